package maint

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestRewriteDataFilesThenExpire: after a DELETE, rewrite_data_files
// leaves no live delete file, the survivors keep their row ids, and time
// travel to the pre-rewrite snapshots still shows the deleted rows. Then
// expire_snapshots (ctid path) purges and schedules the rewritten source
// and its delete file, cleanup removes them, and the catalog stays
// consistent at every step.
func TestRewriteDataFilesThenExpire(t *testing.T) {
	l := newLake(t)
	s1, _ := l.insert(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	l.insert(100, 101, 102, 103, 104)
	files, _ := l.live()
	a := files[0]
	sd, del := l.deleteRows(a, 0, 1, 2, 3, 4, 5, 6, 7)
	l.verify("after delete")
	beforeDelete := l.rows(sd - 1)
	afterDelete := l.rows(sd)
	if len(beforeDelete) != 15 || len(afterDelete) != 7 {
		t.Fatalf("rows before/after delete: %d/%d, want 15/7", len(beforeDelete), len(afterDelete))
	}

	// CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.5)
	// (fixture s04, seq 6023).
	var rewritten int64
	l.commit(func(s snap) []string {
		rewritten = s.nextFile
		c := s.id + 1
		var rows []dataRow
		for pos, r := range readData(t, l.local(a.path)) {
			if pos >= 8 {
				rows = append(rows, dataRow{id: r.id, rowID: a.rowIDStart + int64(pos), hasRowID: true})
			}
		}
		path := "ducklake-rewritten.parquet"
		n := writeData(t, l.local(path), rows, true, false)
		records, next, size, _ := l.tableStats()
		stmts := []string{snapshotSQL(s, s.nextFile+1)}
		stmts = append(stmts, l.fileSQL(rewritten, c, path, rows, n, 0, false, 0, false)...)
		return append(stmts,
			fmt.Sprintf("\n\t\t\t\tUPDATE %s.ducklake_delete_file SET end_snapshot = %d\n\t\t\t\tWHERE delete_file_id = %d;\n\t\t\t\t\n\t\tUPDATE %s.ducklake_data_file SET end_snapshot = %d\n\t\tWHERE data_file_id = %d;\n\t\t\n\t\t\t\tUPDATE %s.ducklake_data_file SET begin_snapshot = %d\n\t\t\t\tWHERE data_file_id = %d;\n\t\t\t\tUPDATE %s.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d",
				q, c, del, q, c, a.id, q, c, rewritten, q, records-8, size, next, l.table),
			changesSQL(c, fmt.Sprintf("rewrite_delete:%d", l.table)))
	})
	l.verify("after rewrite")
	live, dels := l.live()
	if len(dels) != 0 {
		t.Fatalf("live delete files after rewrite: %+v", dels)
	}
	if len(live) != 2 || !slices.ContainsFunc(live, func(f catFile) bool { return f.id == rewritten }) {
		t.Fatalf("live files after rewrite: %+v", live)
	}
	sr := l.latest().id
	sameRows(t, "after rewrite (survivors keep row ids)", l.rows(sr), afterDelete)
	sameRows(t, "time travel to the pre-rewrite snapshot", l.rows(sd), afterDelete)
	sameRows(t, "time travel to before the delete", l.rows(sd-1), beforeDelete)
	sameRows(t, "time travel to the first insert", l.rows(s1), l.rows(s1)) // readable
	if len(l.rows(s1)) != 10 {
		t.Fatalf("snapshot %d: %d rows, want 10", s1, len(l.rows(s1)))
	}

	// Expire everything but the newest snapshot: the source file and its
	// delete file lose every retained snapshot and are purged.
	var victims []int64
	for s := int64(0); s < sr; s++ {
		victims = append(victims, s)
	}
	purged := l.expire(victims...)
	if !slices.Equal(purged, []int64{a.id, del}) {
		t.Fatalf("expire purged %v, want data file %d and delete file %d", purged, a.id, del)
	}
	l.verify("after expire")
	sameRows(t, "after expire", l.rows(sr), afterDelete)
	removed := l.cleanup()
	if len(removed) != 2 {
		t.Fatalf("cleanup removed %v, want 2 files", removed)
	}
	for _, p := range removed {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still on disk: %v", p, err)
		}
	}
	l.verify("after cleanup")
	sameRows(t, "after cleanup", l.rows(sr), afterDelete)
}
