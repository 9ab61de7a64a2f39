package maint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestMergeBranch: a writable branch's commits merge into the lake as one
// snapshot, twice over. First the branch's inserts, while the lake
// inserted too: the branch's rows come under row ids past the lake's. Then
// the branch's delete on a file it inherited, while the lake deleted from
// another file (DuckLake's file-level check lets both be).
// After each, the lake reads its own rows and the branch's changes, its
// earlier snapshots read as before, the branch is gone, verify passes and
// the store loads as the server holds it; the lake's orphan cleanup keeps
// the files under the branch's data path.
func TestMergeBranch(t *testing.T) {
	l := newLake(t)
	_, f1 := l.insert(1, 2, 3)
	_, f2 := l.insert(4, 5)

	b := branchOf(t, l, "dev")
	_, forkNext, _, _ := b.tableStats()
	b.insert(10, 11)
	b.insert(12)
	branchRows := b.rows(b.latest().id)
	l.insert(20, 21)
	lakeRecords, lakeNext, _, _ := l.tableStats()

	// Sessions on the branch hold the merge off, as they hold off a drop.
	if err := l.admin("ALTER DATABASE dev MERGE_INTO lake"); pgCode(err) != "55006" {
		t.Fatalf("a merge while a session is on the branch: %v, want 55006", err)
	}
	if err := l.admin("ALTER DATABASE dev MERGE_INTO postgres"); pgCode(err) != "22023" {
		t.Fatalf("a merge into a database that is not the branch's parent: %v, want 22023", err)
	}
	if err := l.admin("ALTER DATABASE lake MERGE_INTO postgres"); pgCode(err) != "42809" {
		t.Fatalf("a merge of a database that is no branch: %v, want 42809", err)
	}
	want := map[int64]int64{}
	for k, v := range l.rows(l.latest().id) {
		want[k] = v
	}
	shift := lakeNext - forkNext
	for k, v := range branchRows {
		if k >= forkNext {
			want[k+shift] = v
		}
	}
	mergeChecked(t, l, b, "dev", want)
	records, next, _, _ := l.tableStats()
	if records != lakeRecords+3 || next != lakeNext+3 {
		t.Fatalf("table stats after the merge: record_count %d next_row_id %d, want %d and %d", records, next, lakeRecords+3, lakeNext+3)
	}
	if n := fromBranch(t, l, b); n != 2 {
		t.Fatalf("the lake names %d data files of the branch, want 2", n)
	}

	// Deletes on both sides, of different files.
	b2 := branchOf(t, l, "dev2")
	var inherited catFile
	for _, f := range b2.dataFiles() {
		if f.id == f1 {
			inherited = f
		}
	}
	b2.deleteRows(inherited, 1)
	for _, f := range l.dataFiles() {
		if f.id == f2 {
			l.deleteRows(f, 0)
			delete(want, f.rowIDStart)
		}
	}
	delete(want, inherited.rowIDStart+1)
	mergeChecked(t, l, b2, "dev2", want)
	for _, d := range l.deleteFiles() {
		if d.dataFile == f1 && (!filepath.IsAbs(d.path) || !strings.HasPrefix(d.path, b2.data)) {
			t.Fatalf("the branch's delete file is named %q, want its absolute path under %s", d.path, b2.data)
		}
	}
}

// mergeChecked merges branch name (harness b) into l, once the branch's
// session is closed, and checks the outcome: one new snapshot reading
// want, the snapshot before it reading as before, the branch gone, verify
// passing, the store loading as the server holds it, and the lake's
// orphan cleanup keeping every file it names. It returns the new snapshot.
func mergeChecked(t *testing.T, l, b *lake, name string, want map[int64]int64) int64 {
	t.Helper()
	before := l.latest().id
	lakeBefore := l.rows(before)
	b.conn.Close(l.ctx)
	if err := l.admin("ALTER DATABASE " + name + " MERGE_INTO lake"); err != nil {
		t.Fatalf("merge %s: %v", name, errDetail(err))
	}
	head := l.latest().id
	if head != before+1 {
		t.Fatalf("the merge made snapshot %d, want %d", head, before+1)
	}
	sameRows(t, "the lake after the merge of "+name, l.rows(head), want)
	sameRows(t, "the lake's snapshot before the merge of "+name, l.rows(before), lakeBefore)
	seen := map[int64]bool{}
	for _, f := range l.dataFiles() {
		if seen[f.id] {
			t.Fatalf("file id %d twice", f.id)
		}
		seen[f.id] = true
	}
	l.verify("after the merge of " + name)
	if err := l.admin("DROP DATABASE " + name); pgCode(err) != "3D000" {
		t.Fatalf("the merged branch %s: %v, want 3D000 (gone)", name, err)
	}
	sameLoad(t, l, "lake")
	deleteOrphans(l)
	for _, f := range l.dataFiles() {
		if _, err := os.Stat(l.local(f.path)); err != nil {
			t.Fatalf("file %d after the lake's orphan cleanup: %v", f.id, err)
		}
	}
	sameRows(t, "the lake after its orphan cleanup", l.rows(head), want)
	return head
}

// fromBranch counts the data files l names under b's data path, each of
// which must be on disk.
func fromBranch(t *testing.T, l, b *lake) int {
	t.Helper()
	n := 0
	for _, f := range l.dataFiles() {
		if strings.HasPrefix(f.path, b.data) {
			n++
			if _, err := os.Stat(f.path); err != nil {
				t.Fatalf("merged file %d: %v", f.id, err)
			}
		}
	}
	return n
}

// errDetail is err with its DETAIL, if it is a PostgreSQL error.
func errDetail(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Detail != "" {
		return pe.Error() + "\n" + pe.Detail
	}
	return fmt.Sprint(err)
}
