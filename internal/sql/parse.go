package sql

import (
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// stmt is one parsed statement of a query string.
type stmt struct {
	node *pg.Node
	text string // the statement's own text
}

// parseCache maps query text to its parsed statements. DuckLake repeats the
// same texts constantly (every catalog read, every introspection batch), so
// the cgo parse and protobuf decoding run once per distinct text. Parsed
// trees are treated as immutable by the executor, which is what makes
// sharing them between sessions safe.
type parseCache struct {
	mu  sync.Mutex
	m   map[string][]stmt
	max int
}

func newParseCache(max int) *parseCache { return &parseCache{m: map[string][]stmt{}, max: max} }

// parse splits and parses a query string with the PostgreSQL grammar.
func (c *parseCache) parse(sql string) ([]stmt, error) {
	c.mu.Lock()
	if s, ok := c.m[sql]; ok {
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	res, err := pg.Parse(sql)
	if err != nil {
		return nil, parseError(err)
	}
	out := make([]stmt, 0, len(res.Stmts))
	for _, rs := range res.Stmts {
		if rs.Stmt == nil {
			continue
		}
		start := int(rs.StmtLocation)
		end := len(sql)
		if rs.StmtLen > 0 {
			end = start + int(rs.StmtLen)
		}
		if start < 0 || start > end || end > len(sql) {
			start, end = 0, len(sql)
		}
		out = append(out, stmt{node: rs.Stmt, text: sql[start:end]})
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		// Crude but bounded: DuckLake's working set of texts is small, a
		// flood of one-off texts just restarts the cache.
		clear(c.m)
	}
	c.m[sql] = out
	c.mu.Unlock()
	return out, nil
}
