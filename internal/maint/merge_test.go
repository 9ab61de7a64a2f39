package maint

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestMergeAdjacentFiles: four small files merge to one; rows and row ids
// are identical before and after; time travel to every pre-merge snapshot
// answers as before; the sources are scheduled and cleanup removes them;
// an UPDATE after the merge hits the right row.
func TestMergeAdjacentFiles(t *testing.T) {
	l := newLake(t)
	want := map[int][]int64{} // snapshot → ids inserted by then (row id = index)
	var ids []int64
	var snaps []int64
	for f := 0; f < 4; f++ {
		batch := []int64{}
		for i := 0; i < 5; i++ {
			batch = append(batch, int64(1000+len(ids)+len(batch)))
		}
		s, _ := l.insert(batch...)
		ids = append(ids, batch...)
		want[int(s)] = append([]int64(nil), ids...)
		snaps = append(snaps, s)
	}
	l.verify("after inserts")
	before := map[int64]map[int64]int64{}
	for _, s := range snaps {
		before[s] = l.rows(s)
		if len(before[s]) != len(want[int(s)]) {
			t.Fatalf("snapshot %d: %d rows before merge, want %d", s, len(before[s]), len(want[int(s)]))
		}
		for rid, id := range want[int(s)] {
			if before[s][int64(rid)] != id {
				t.Fatalf("snapshot %d: row id %d holds %d, want %d", s, rid, before[s][int64(rid)], id)
			}
		}
	}
	sources, _ := l.live()
	if len(sources) != 4 {
		t.Fatalf("%d live files before merge, want 4", len(sources))
	}

	// CALL ducklake_merge_adjacent_files('lake'): the sources are row-id
	// adjacent, so the output keeps row_id_start and embeds snapshot ids.
	var merged int64
	l.commit(func(s snap) []string {
		merged = s.nextFile
		rows := l.mergeRows(sources)
		for i := range rows {
			rows[i].hasRowID = false
		}
		path := "ducklake-merged.parquet"
		n := writeData(l.t, l.local(path), rows, false, true)
		return l.mergeSQL(s, sources, path, rows, n, sources[0].rowIDStart, true)
	})
	l.verify("after merge")
	live, dels := l.live()
	if len(live) != 1 || live[0].id != merged || len(dels) != 0 {
		t.Fatalf("after merge: live files %+v, delete files %+v; want only file %d", live, dels, merged)
	}
	last := l.latest().id
	sameRows(t, "after merge", l.rows(last), before[snaps[3]])
	for _, s := range snaps {
		sameRows(t, "time travel to pre-merge snapshot", l.rows(s), before[s])
	}

	// Sources are scheduled; cleanup_old_files removes them and empties
	// the schedule.
	sched := l.scan("ducklake_files_scheduled_for_deletion", "data_file_id")
	if len(sched) != 4 {
		t.Fatalf("%d scheduled files after merge, want 4", len(sched))
	}
	removed := l.cleanup()
	if len(removed) != 4 {
		t.Fatalf("cleanup removed %v, want the 4 sources", removed)
	}
	for i, f := range sources {
		if _, err := os.Stat(l.local(f.path)); !os.IsNotExist(err) {
			t.Fatalf("source %d (%s) still on disk after cleanup: %v", i, f.path, err)
		}
	}
	if n := len(l.scan("ducklake_files_scheduled_for_deletion", "data_file_id")); n != 0 {
		t.Fatalf("%d schedule rows after cleanup", n)
	}
	l.verify("after cleanup")

	// UPDATE m SET id = 7 WHERE rowid = 12: position 12 of the merged file.
	u := l.update(merged, live[0].path, 12, 12, 7)
	l.verify("after update")
	after := map[int64]int64{}
	for k, v := range before[snaps[3]] {
		after[k] = v
	}
	after[12] = 7
	sameRows(t, "after update", l.rows(u), after)
	sameRows(t, "before update", l.rows(u-1), before[snaps[3]])

	// expire_snapshots(older_than => now()) keeps only the newest: nothing
	// is ended, so nothing is purged; history before it is gone, the
	// current answer is not.
	var victims []int64
	for s := int64(0); s < u; s++ {
		victims = append(victims, s)
	}
	if purged := l.expire(victims...); len(purged) != 0 {
		t.Fatalf("expire purged %v; no file or delete file has ended", purged)
	}
	l.verify("after expire")
	sameRows(t, "after expire", l.rows(u), after)
}

// TestHoldRefusesRenumbering: a merge over an update's output and the file
// registered after it must keep every row id. The update's file has
// row_id_start N (an unused range) but embeds the original id; with the
// next file starting at N+1 the two look row-id adjacent, so a merge that
// keeps row_id_start and drops the embedded ids would renumber the updated
// row. The hold refuses it and the sources stay live; the correct merge
// (embedded row ids, row_id_start NULL) commits and keeps every row id.
func TestHoldRefusesRenumbering(t *testing.T) {
	l := newLake(t)
	_, a := l.insert(10, 11, 12, 13)
	files, _ := l.live()
	l.update(a, files[0].path, 1, 1, 99)
	l.insert(20, 21, 22)
	l.verify("before merge")
	want := l.rows(l.latest().id)
	all, _ := l.live()
	if len(all) != 3 {
		t.Fatalf("%d live files, want 3", len(all))
	}
	sources := all[1:] // the update's output and the file after it
	if sources[0].rowIDStart+sources[0].records != sources[1].rowIDStart {
		t.Fatalf("update output [%d,+%d) and next file %d are not adjacent by row_id_start; the test needs them to be", sources[0].rowIDStart, sources[0].records, sources[1].rowIDStart)
	}

	err := l.tryCommit(func(s snap) []string {
		rows := l.mergeRows(sources)
		for i := range rows {
			rows[i].hasRowID = false // renumber: row_id_start + position
		}
		path := "ducklake-renumbered.parquet"
		n := writeData(l.t, l.local(path), rows, false, true)
		return l.mergeSQL(s, sources, path, rows, n, sources[0].rowIDStart, true)
	})
	if err == nil {
		t.Fatal("renumbering merge committed; the hold should refuse it")
	}
	// Over the wire the hold is SQLSTATE XX001 (data corrupted) naming
	// RFC 0008 and the renumbered id.
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "XX001" || !strings.Contains(pe.Message, "RFC 0008") || !strings.Contains(pe.Message, "row id 4") {
		t.Fatalf("renumbering merge failed for another reason: %v", err)
	}
	after, _ := l.live()
	if len(after) != 3 {
		t.Fatalf("after the refused merge %d live files, want the 3 sources", len(after))
	}
	sameRows(t, "after refused merge", l.rows(l.latest().id), want)
	l.verify("after refused merge")

	l.commit(func(s snap) []string {
		rows := l.mergeRows(sources)
		path := "ducklake-kept.parquet"
		n := writeData(l.t, l.local(path), rows, true, true)
		return l.mergeSQL(s, sources, path, rows, n, 0, false)
	})
	sameRows(t, "after correct merge", l.rows(l.latest().id), want)
	l.verify("after correct merge")
}
