package commit

import (
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// TestMigrationDDL commits the table changes DuckLake's migrations make —
// a dropped column, a column added with a default, a table renamed — on a
// catalog with rows, and checks after each that the store holds exactly
// the catalog's rows under the new definitions (the rows are rewritten in
// the commit, children included), and that row ops made in the same commit
// under an older column set land as the catalog holds them.
func TestMigrationDDL(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	h.addFile(3, 1, 10, 5)

	h.mustCommit(func(tx *catalog.Txn) {
		// An insert under the old column set, then the drop.
		h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:04+00", "1", "2", "3")
		h.insert(tx, "ducklake_snapshot_changes", "4", "inserted_into_table:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_data_file", "2", "1", "4", "NULL", "NULL", "f2.parquet", "true", "parquet",
			"3", "1000", "100", "15", "NULL", "NULL", "NULL", "NULL", "1")
		h.insert(tx, "ducklake_file_partition_value", "2", "1", "0", "2022")
		if err := tx.DropColumn(schema, "ducklake_data_file", "row_group_count"); err != nil {
			t.Fatal(err)
		}
	})
	h.checkStore()
	if def, _ := h.db.Current().Table(schema, "ducklake_data_file"); len(def.Def().Columns) != 16 {
		t.Fatalf("data file table has %d columns", len(def.Def().Columns))
	}
	h.mustCommit(func(tx *catalog.Txn) {
		if err := tx.AddColumn(schema, "ducklake_data_file", keyspace.ColumnDef{Name: "row_group_count", Type: datum.Int8}, datum.IntValue(1)); err != nil {
			t.Fatal(err)
		}
		if err := tx.RenameTable(schema, "ducklake_file_column_stats", "ducklake_file_column_statistics"); err != nil {
			t.Fatal(err)
		}
	})
	h.checkStore()
	tb, _ := h.db.Current().Table(schema, "ducklake_data_file")
	i := tb.Def().ColumnIndex("row_group_count")
	n := 0
	tb.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if v, _ := r.Column(tb.Types(), i); v.I == 1 {
			n++
		}
		return true
	})
	if n != 3 {
		t.Fatalf("%d data files read the added column's default, want 3", n)
	}
	if got := len(h.storedRows("ducklake_file_column_statistics")); got != 4 {
		t.Fatalf("%d stats rows stored under the old name, want 4", got)
	}

	// A column no DuckLake version has is refused with its rows unwritten.
	h.refused(ErrShape, func(tx *catalog.Txn) {
		if err := tx.AddColumn(schema, "ducklake_column", keyspace.ColumnDef{Name: "extra", Type: datum.Varchar}, datum.TextValue("literal")); err != nil {
			t.Fatal(err)
		}
	})
	// Both names of one kind at once would share keys.
	err := h.refused(ErrShape, func(tx *catalog.Txn) {
		def, _ := keyspace.FixedDefs(schema, keyspace.Version11)
		for _, d := range def {
			if d.Name == "ducklake_file_column_stats" {
				if err := tx.CreateTable(d); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	if !strings.Contains(err.Error(), "beside") {
		t.Fatalf("error %q", err)
	}
	h.mustCommit(func(tx *catalog.Txn) {
		if err := tx.RenameTable(schema, "ducklake_file_column_statistics", "ducklake_file_column_stats"); err != nil {
			t.Fatal(err)
		}
	})
	h.checkStore()
}

// storedRows returns the rows the store holds for table.
func (h *harness) storedRows(table string) []datum.Row {
	h.t.Helper()
	cats, err := ReadStore(h.ctx, h.kv)
	if err != nil {
		h.t.Fatal(err)
	}
	sc, _ := h.db.Current().Schema(schema)
	return cats[uint32(sc.CatalogID)].Rows[table]
}
