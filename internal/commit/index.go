package commit

import (
	"github.com/moraine-db/moraine/internal/catalog"
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

// codecOf returns the keyspace codec of t's definition; a definition the
// keyspace cannot encode is an illegal row shape.
func codecOf(t *catalog.Table) (*keyspace.Table, error) {
	c, err := t.Codec()
	if err != nil {
		return nil, shapeErr("%v", err)
	}
	return c, nil
}
