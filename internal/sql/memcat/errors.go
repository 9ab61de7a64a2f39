package memcat

import (
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// uniqueError is the unique violation of t's primary key by vals, as the
// catalog reports one for committed rows (catalog.DuplicateKey).
func uniqueError(schema string, t *Table, vals []datum.Value) error {
	cols := make([]string, 0, len(t.Def.PK))
	texts := make([]string, 0, len(t.Def.PK))
	for _, i := range t.Def.PK {
		cols = append(cols, t.Def.Columns[i].Name)
		texts = append(texts, datum.FormatText(t.Def.Columns[i].Type, vals[i]))
	}
	return catalog.DuplicateKey(schema, t.Name, strings.Join(cols, ", "), strings.Join(texts, ", "))
}
