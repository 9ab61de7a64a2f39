package commit

import (
	"fmt"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// childIndex maps a parent entity (catalog, parent table, link values) to
// the rows of its embedded child table, so that re-encoding a data file, a
// partition spec or a sort spec needs no scan of the child table. It mirrors
// the durable state: it changes only after a commit is durable.
type childIndex struct {
	m map[string][]datum.Row
}

func newChildIndex() *childIndex { return &childIndex{m: map[string][]datum.Row{}} }

func (c *childIndex) rows(ident string) []datum.Row { return c.m[ident] }

func (c *childIndex) set(ident string, rows []datum.Row) {
	if len(rows) == 0 {
		delete(c.m, ident)
		return
	}
	c.m[ident] = rows
}

func (c *childIndex) add(ident string, r datum.Row) { c.m[ident] = append(c.m[ident], r) }

// codecCache keeps one keyspace codec per (catalog, table definition).
// The catalog's table definitions are immutable (DDL replaces them), so the
// definition's address identifies it on the hot path; the rendered
// definition catches equal definitions at other addresses.
type codecCache struct {
	mu    sync.Mutex
	m     map[string]*keyspace.Table
	byPtr map[codecKey]*keyspace.Table
}

type codecKey struct {
	id  uint32
	def *keyspace.TableDef
}

func newCodecCache() *codecCache {
	return &codecCache{m: map[string]*keyspace.Table{}, byPtr: map[codecKey]*keyspace.Table{}}
}

func (c *codecCache) get(id uint32, def *keyspace.TableDef) (*keyspace.Table, error) {
	pk := codecKey{id, def}
	c.mu.Lock()
	t, ok := c.byPtr[pk]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	k := fmt.Sprintf("%d/%s", id, def.String())
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[k]; ok {
		c.byPtr[pk] = t
		return t, nil
	}
	t, err := keyspace.NewTable(*def)
	if err != nil {
		return nil, shapeErr("%v", err)
	}
	c.m[k] = t
	c.byPtr[pk] = t
	return t, nil
}
