package commit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/rowids"
)

// Rows as DuckDB writes them: a user column, then (for compaction outputs,
// flushes and updates) the row id with Parquet field id 2147483540.
type embeddedRow struct {
	V     int64  `parquet:"v"`
	RowID *int64 `parquet:"_ducklake_internal_row_id,optional,id(2147483540)"`
}

type plainRow struct {
	V int64 `parquet:"v"`
}

type deleteRow struct {
	FilePath string `parquet:"file_path"`
	Pos      int64  `parquet:"pos"`
}

func writeParquet[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func withIDs(ids ...int64) []embeddedRow {
	out := make([]embeddedRow, len(ids))
	for i := range ids {
		id := ids[i]
		out[i] = embeddedRow{V: id, RowID: &id}
	}
	return out
}

func plainRows(n int) []plainRow {
	out := make([]plainRow, n)
	for i := range out {
		out[i] = plainRow{V: int64(i)}
	}
	return out
}

// holdLake is a lake in a temporary data path, with the row-id hold on.
func holdLake(t *testing.T) (*harness, string) {
	dir := t.TempDir()
	h := newHarness(t, Options{Hold: &rowids.Checker{}})
	h.initLakeAt(dir + "/")
	return h, filepath.Join(dir, "main", "t")
}

// mergeInto stages a merge of files src into one output file out (data file
// id 10) backdated to snapshot 2.
func (h *harness) merge(snap int64, out, outStart string, outCount int64, src ...string) error {
	return h.commit(func(tx *catalog.Txn) {
		s := fmt.Sprint
		h.insert(tx, "ducklake_snapshot", s(snap), "2026-01-01 00:00:09+00", "1", "2", "11")
		h.insert(tx, "ducklake_snapshot_changes", s(snap), "merge_adjacent:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_data_file", "10", "1", "2", "NULL", "NULL", out, "true", "parquet",
			s(outCount), "1000", "100", outStart, "NULL", "NULL", "NULL", "NULL", "1")
		for _, f := range src {
			h.del(tx, "ducklake_data_file", "data_file_id", f)
			h.del(tx, "ducklake_file_column_stats", "data_file_id", f)
			h.del(tx, "ducklake_file_partition_value", "data_file_id", f)
			h.insert(tx, "ducklake_files_scheduled_for_deletion", f, "f"+f+".parquet", "true", "2026-01-01 00:00:09+00")
		}
	})
}

func TestHoldRefusesAMergeThatRenumbersASparseSource(t *testing.T) {
	h, dir := holdLake(t)
	// Source 0: an ordinary insert, ids 0..3 by position.
	writeParquet(t, filepath.Join(dir, "f0.parquet"), plainRows(4))
	h.addFile(2, 0, 0, 4)
	// Source 1: a flush output whose batch straddled partitions: its ids
	// have gaps that row_id_start (its lowest id) hides.
	writeParquet(t, filepath.Join(dir, "f1.parquet"), withIDs(4, 6, 8))
	h.addFile(3, 1, 4, 3)
	before := h.db.Current()

	// DuckLake's old planner: adjacent by start+count, numbered by position.
	writeParquet(t, filepath.Join(dir, "bad.parquet"), plainRows(7))
	err := h.merge(4, "bad.parquet", "0", 7, "0", "1")
	if !isKind(err, ErrHold) {
		t.Fatalf("renumbering merge: %v, want a hold refusal", err)
	}
	if h.db.Current() != before {
		t.Fatal("the refused merge changed the catalog: its sources must stay live")
	}
	if cs, _ := h.where(h.db.Begin(), "ducklake_data_file", "data_file_id", "1"); len(cs) != 1 {
		t.Fatal("source 1 is gone")
	}
	h.checkStore()

	// A merge that carries its sources' ids lands.
	writeParquet(t, filepath.Join(dir, "good.parquet"), withIDs(0, 1, 2, 3, 4, 6, 8))
	if err := h.merge(4, "good.parquet", "0", 7, "0", "1"); err != nil {
		t.Fatalf("faithful merge refused: %v", err)
	}
	h.checkStore()
}

func TestHoldOnRewrites(t *testing.T) {
	h, dir := holdLake(t)
	writeParquet(t, filepath.Join(dir, "f0.parquet"), plainRows(6))
	h.addFile(2, 0, 0, 6)
	// DELETE rows at positions 1 and 4 (ids 1 and 4).
	src := filepath.Join(dir, "f0.parquet")
	writeParquet(t, filepath.Join(dir, "d1.parquet"), []deleteRow{{src, 1}, {src, 4}})
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "2")
		h.insert(tx, "ducklake_snapshot_changes", "3", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_delete_file", "1", "1", "3", "NULL", "0", "d1.parquet", "true", "parquet", "2", "100", "50", "NULL", "NULL", "NULL")
	})
	rewrite := func(out string, count int64) error {
		return h.commit(func(tx *catalog.Txn) {
			s := fmt.Sprint
			h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:04+00", "1", "2", "3")
			h.insert(tx, "ducklake_snapshot_changes", "4", "rewrite_delete:1", "NULL", "NULL", "NULL")
			h.insert(tx, "ducklake_data_file", "2", "1", "3", "NULL", "NULL", out, "true", "parquet",
				s(count), "800", "100", "0", "NULL", "NULL", "NULL", "NULL", "1")
			h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
			h.set(tx, "ducklake_delete_file", "delete_file_id", "1", "end_snapshot", "4")
			h.set(tx, "ducklake_data_file", "data_file_id", "2", "begin_snapshot", "4")
		})
	}
	// One naming an id its source lacked is refused.
	writeParquet(t, filepath.Join(dir, "r_bad.parquet"), withIDs(0, 2, 3, 5, 42))
	if err := rewrite("r_bad.parquet", 5); !isKind(err, ErrHold) {
		t.Fatalf("rewrite inventing id 42: %v, want a hold refusal", err)
	}
	h.checkStore()
	// Dropping the deleted rows lands; survivors keep their ids.
	writeParquet(t, filepath.Join(dir, "r_ok.parquet"), withIDs(0, 2, 3, 5))
	if err := rewrite("r_ok.parquet", 4); err != nil {
		t.Fatalf("faithful rewrite refused: %v", err)
	}
	h.checkStore()
}
