package maint

import (
	"fmt"
	"strings"
	"testing"
)

// TestBrokenMaintenanceIsRefused: the commit pipeline refuses what would
// leave a dangling delete file or a dropped tombstone in the store — a
// broken expiry that hard-deletes a live data file while its delete file
// stays, and a broken rewrite that ends a tombstone while its data file
// stays visible — and the store stays consistent by moraine verify. (The
// checker's own detection of each violation kind is pinned by
// internal/verify's table tests.)
func TestBrokenMaintenanceIsRefused(t *testing.T) {
	t.Run("unscheduled hard delete", func(t *testing.T) {
		l := newLake(t)
		_, f := l.insert(1, 2, 3)
		files, _ := l.live()
		l.deleteRows(files[0], 0)
		l.verify("before")
		l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
		match := func(k int64) bool { return k == f }
		l.ctidDelete("ducklake_data_file", "data_file_id", match)
		l.ctidDelete("ducklake_file_column_stats", "data_file_id", match)
		err := l.exec("COMMIT")
		if err == nil || !strings.Contains(err.Error(), "never outlive its data file") {
			t.Fatalf("COMMIT of a dangling delete file: %v, want a refusal", err)
		}
		l.exec("ROLLBACK")
		l.verify("after the refused expiry")
	})
	t.Run("tombstone dropped", func(t *testing.T) {
		l := newLake(t)
		l.insert(1, 2, 3)
		files, _ := l.live()
		_, del := l.deleteRows(files[0], 0)
		err := l.tryCommit(func(s snap) []string {
			return []string{
				snapshotSQL(s, s.nextFile),
				fmt.Sprintf("UPDATE %s.ducklake_delete_file SET end_snapshot = %d WHERE delete_file_id = %d", q, s.id+1, del),
				changesSQL(s.id+1, fmt.Sprintf("deleted_from_table:%d", l.table)),
			}
		})
		if err == nil || !strings.Contains(err.Error(), "tombstone must not be dropped") {
			t.Fatalf("commit dropping a tombstone: %v, want a refusal", err)
		}
		l.verify("after the refused rewrite")
	})
}
