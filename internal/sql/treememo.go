package sql

import (
	"sync"
	"sync/atomic"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// treeMemoLimit bounds a treeMemo: the parse cache holds at most 4096
// trees, and a memo of facts about them need not outgrow it by much.
const treeMemoLimit = 8192

// treeMemo remembers a fact computed from a parse tree, for every session:
// trees are shared by the parse cache and never modified. Trees the parse
// cache evicts would stay reachable from the memo, so once it holds
// treeMemoLimit of them it forgets them all and starts over.
type treeMemo[V any] struct {
	m sync.Map // *pg.SelectStmt → V
	n atomic.Int64
}

func (t *treeMemo[V]) get(sel *pg.SelectStmt, compute func(*pg.SelectStmt) V) V {
	if v, ok := t.m.Load(sel); ok {
		return v.(V)
	}
	v := compute(sel)
	if _, loaded := t.m.LoadOrStore(sel, v); !loaded && t.n.Add(1) > treeMemoLimit {
		t.m.Clear()
		t.n.Store(0)
	}
	return v
}
