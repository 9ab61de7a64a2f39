package catalog

import (
	"fmt"
	"slices"

	"github.com/moraine-db/moraine/internal/datum"
)

// Diff compares the contents of two versions — schemas with their catalog
// ids, table definitions and each table's rows as a multiset of encoded
// rows — and describes every difference (nil when they hold the same
// catalog). ctids, OIDs and version numbers are not compared: a catalog
// reloaded from the store lays its heaps out afresh. It is the check that
// "reopened equals in memory" for the tests of any layer; at most limit
// differences are reported (0: no limit).
func Diff(a, b *Version, limit int) []string {
	var out []string
	add := func(format string, args ...any) bool {
		out = append(out, fmt.Sprintf(format, args...))
		return limit <= 0 || len(out) < limit
	}
	names := func(v *Version) []string {
		var ns []string
		for n := range v.schemas {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		return ns
	}
	an, bn := names(a), names(b)
	if !slices.Equal(an, bn) {
		if !add("schemas %v vs %v", an, bn) {
			return out
		}
	}
	for _, sn := range an {
		sa, sb := a.schemas[sn], b.schemas[sn]
		if sb == nil {
			continue
		}
		if sa.CatalogID != sb.CatalogID && !add("schema %s: catalog id %d vs %d", sn, sa.CatalogID, sb.CatalogID) {
			return out
		}
		ta, tb := sa.Tables(), sb.Tables()
		tnames := func(ts []*Table) []string {
			var ns []string
			for _, t := range ts {
				ns = append(ns, t.Name())
			}
			return ns
		}
		if !slices.Equal(tnames(ta), tnames(tb)) && !add("schema %s: tables %v vs %v", sn, tnames(ta), tnames(tb)) {
			return out
		}
		for _, t := range ta {
			u, ok := sb.Table(t.Name())
			if !ok {
				continue
			}
			if t.Def().String() != u.Def().String() && !add("%s.%s: definition %s vs %s", sn, t.Name(), t.Def(), u.Def()) {
				return out
			}
			ra, rb := sortedRows(t), sortedRows(u)
			if slices.Equal(ra, rb) {
				continue
			}
			onlyA, onlyB := 0, 0
			i, j := 0, 0
			for i < len(ra) || j < len(rb) {
				switch {
				case j >= len(rb) || (i < len(ra) && ra[i] < rb[j]):
					onlyA++
					i++
				case i >= len(ra) || rb[j] < ra[i]:
					onlyB++
					j++
				default:
					i++
					j++
				}
			}
			if !add("%s.%s: %d rows vs %d (%d only in the first, %d only in the second)", sn, t.Name(), len(ra), len(rb), onlyA, onlyB) {
				return out
			}
		}
	}
	return out
}

func sortedRows(t *Table) []string {
	rows := make([]string, 0, t.Len())
	t.Scan(func(_ CTID, r datum.Row) bool {
		rows = append(rows, string(r))
		return true
	})
	slices.Sort(rows)
	return rows
}
