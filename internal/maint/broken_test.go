package maint

import (
	"fmt"
	"testing"

	"github.com/moraine-db/moraine/internal/verify"
)

// TestVerifySeesStoredViolations: the checker reads the real store. A
// broken expiry that hard-deletes a data file (and its stats) while its
// delete file stays, without scheduling it, is reported as a dangling
// delete file and an unscheduled file; a broken rewrite that ends a
// tombstone while its data file stays visible is a dropped tombstone.
func TestVerifySeesStoredViolations(t *testing.T) {
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
		l.must("COMMIT")
		got := kinds(l.violations())
		want := []verify.Kind{verify.KindDanglingDeleteFile, verify.KindUnscheduled}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("violations %v, want %v", got, want)
		}
	})
	t.Run("tombstone dropped", func(t *testing.T) {
		l := newLake(t)
		l.insert(1, 2, 3)
		files, _ := l.live()
		_, del := l.deleteRows(files[0], 0)
		l.commit(func(s snap) []string {
			return []string{
				snapshotSQL(s, s.nextFile),
				fmt.Sprintf("UPDATE %s.ducklake_delete_file SET end_snapshot = %d WHERE delete_file_id = %d", q, s.id+1, del),
				changesSQL(s.id+1, fmt.Sprintf("deleted_from_table:%d", l.table)),
			}
		})
		got := kinds(l.violations())
		if fmt.Sprint(got) != fmt.Sprint([]verify.Kind{verify.KindTombstoneDropped}) {
			t.Fatalf("violations %v, want [tombstone-dropped]", got)
		}
	})
}

func kinds(vs []verify.Violation) []verify.Kind {
	var out []verify.Kind
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}
