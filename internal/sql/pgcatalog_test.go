package sql

import "testing"

// TestSysdata checks that every embedded system catalog file parses with
// its relation's column types.
func TestSysdata(t *testing.T) {
	x := &exec{s: testServer().Open("sys", "postgres", "", 1)}
	for _, name := range []string{"pg_class", "pg_attribute", "pg_type", "pg_constraint", "pg_indexes"} {
		r, ok, err := x.virtual("pg_catalog", name)
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		cols := vcols(r)
		if name == "pg_attribute" {
			cols = cols[:16] // attstorage and attcompression are computed
		}
		rows, err := loadSys(name, cols)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 100 {
			t.Errorf("%s: only %d rows", name, len(rows))
		}
	}
}
