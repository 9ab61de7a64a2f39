package catalog

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// statsDef is DuckLake's ducklake_table_column_stats cut to the columns
// the test needs; its lookup index is on (table_id, column_id).
func statsDef() keyspace.TableDef {
	return keyspace.TableDef{Schema: "public", Name: "ducklake_table_column_stats", Columns: []keyspace.ColumnDef{
		{Name: "table_id", Type: datum.Int8},
		{Name: "column_id", Type: datum.Int8},
		{Name: "min_value", Type: datum.Varchar},
	}}
}

// TestLookupIndexModel drives random writes, commits and column renames
// through transactions on a table with a lookup index and checks, after
// every step and on every version pinned along the way, that the index
// holds one entry per row under the row's key, and that LookupPrefix offers
// every row whose leading columns equal the prefix, in ctid order, and no
// other row except ones with NULL there.
func TestLookupIndexModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		db := NewServer(Options{}).Database("m")
		tx := db.Begin()
		if err := tx.CreateTable(statsDef()); err != nil {
			rt.Fatal(err)
		}
		const name = "ducklake_table_column_stats"
		idCol := "column_id" // renamed away and back: the index follows the name
		small := func(label string) datum.Value {
			v := rapid.IntRange(-1, 3).Draw(rt, label)
			if v < 0 {
				return datum.Null
			}
			return datum.IntValue(int64(v))
		}
		row := func() []datum.Value {
			return []datum.Value{small("table_id"), small("column_id"), datum.TextValue(rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "min"))}
		}
		ctids := func(tb *Table) []CTID {
			var cs []CTID
			tb.Scan(func(c CTID, _ datum.Row) bool { cs = append(cs, c); return true })
			return cs
		}
		check := func(rt *rapid.T, tb *Table) {
			if err := tb.CheckIndexes(); err != nil {
				rt.Fatal(err)
			}
			indexed := tb.LookupColumns() != nil
			if indexed != (idCol == "column_id") {
				rt.Fatalf("lookup columns %v with the second column named %q", tb.LookupColumns(), idCol)
			}
			for a := int64(0); a < 4; a++ {
				for b := int64(-1); b < 4; b++ {
					prefix := []datum.Value{datum.IntValue(a)}
					if b >= 0 {
						prefix = append(prefix, datum.IntValue(b))
					}
					var offered []CTID
					ok := tb.LookupPrefix(prefix, func(c CTID, _ datum.Row) bool { offered = append(offered, c); return true })
					if ok != indexed {
						rt.Fatalf("LookupPrefix ok %v on a table indexed %v", ok, indexed)
					}
					if !ok {
						continue
					}
					if !slices.IsSorted(offered) {
						rt.Fatalf("prefix %v offered rows out of ctid order: %v", prefix, offered)
					}
					tb.Scan(func(c CTID, r datum.Row) bool {
						vals, err := r.Decode(tb.Types(), nil)
						if err != nil {
							rt.Fatal(err)
						}
						match, null := true, false
						for i, p := range prefix {
							null = null || vals[i].IsNull()
							match = match && !vals[i].IsNull() && vals[i].I == p.I
						}
						_, in := slices.BinarySearch(offered, c)
						switch {
						case match && !in:
							rt.Fatalf("prefix %v missed row %s %v", prefix, c, vals)
						case in && !match && !null:
							rt.Fatalf("prefix %v offered row %s %v", prefix, c, vals)
						}
						return true
					})
				}
			}
		}
		type pin struct {
			v     *Version
			rows  []CTID
			named string
		}
		var pins []pin
		// pick draws one of the working table's rows; with none, the
		// action does not apply and rapid draws another.
		pick := func(rt *rapid.T) CTID {
			tb, _ := tx.Table("public", name)
			cs := ctids(tb)
			if len(cs) == 0 {
				rt.Skip("no rows")
			}
			return rapid.SampledFrom(cs).Draw(rt, "row")
		}
		rt.Repeat(map[string]func(*rapid.T){
			"insert": func(rt *rapid.T) {
				if _, err := tx.InsertRow("public", name, row()); err != nil {
					rt.Fatal(err)
				}
			},
			"update": func(rt *rapid.T) {
				if _, err := tx.UpdateRow("public", name, pick(rt), row()); err != nil {
					rt.Fatal(err)
				}
			},
			"delete": func(rt *rapid.T) {
				if err := tx.DeleteRow("public", name, pick(rt)); err != nil {
					rt.Fatal(err)
				}
			},
			"rename": func(rt *rapid.T) {
				to := map[string]string{"column_id": "col_id", "col_id": "column_id"}[idCol]
				if err := tx.RenameColumn("public", name, idCol, to); err != nil {
					rt.Fatal(err)
				}
				idCol = to
			},
			"commit": func(rt *rapid.T) {
				if err := tx.Commit(ctx); err != nil {
					rt.Fatal(err)
				}
				v := db.Current()
				tb, _ := v.Table("public", name)
				pins = append(pins, pin{v, ctids(tb), idCol})
				tx = db.Begin()
			},
			"": func(rt *rapid.T) {
				tb, err := tx.Table("public", name)
				if err != nil {
					rt.Fatal(err)
				}
				check(rt, tb)
				for _, p := range pins {
					tb, _ := p.v.Table("public", name)
					if got := ctids(tb); !slices.Equal(got, p.rows) {
						rt.Fatalf("a pinned version changed: %v, was %v", got, p.rows)
					}
					saved := idCol
					idCol = p.named
					check(rt, tb)
					idCol = saved
				}
			},
		})
	})
}
