package sql

import (
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// TestTreeMemoIsBounded: a memo never holds more than treeMemoLimit trees,
// and answers from memory only for trees it holds.
func TestTreeMemoIsBounded(t *testing.T) {
	var m treeMemo[int]
	calls := 0
	compute := func(*pg.SelectStmt) int { calls++; return calls }
	first := &pg.SelectStmt{}
	if m.get(first, compute) != 1 || m.get(first, compute) != 1 || calls != 1 {
		t.Fatalf("a remembered tree was computed again (%d calls)", calls)
	}
	for i := 0; i < treeMemoLimit; i++ {
		m.get(&pg.SelectStmt{}, compute)
	}
	if n := m.n.Load(); n > treeMemoLimit {
		t.Fatalf("memo holds %d trees, limit %d", n, treeMemoLimit)
	}
	before := calls
	m.get(first, compute)
	if calls != before+1 {
		t.Fatal("the memo kept a tree past its limit")
	}
}
