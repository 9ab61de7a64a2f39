package maint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
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
	fork := forkOf(b)
	b.insert(10, 11)
	b.insert(12)
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
	for sql, code := range map[string]string{
		"ALTER DATABASE nosuch MERGE_INTO lake":           "3D000",
		"ALTER DATABASE dev MERGE_INTO ''":                "0A000",
		"ALTER DATABASE dev WITH CONNECTION LIMIT 5":      "0A000",
		"BEGIN; ALTER DATABASE dev MERGE_INTO lake":       "25001",
		"ALTER DATABASE dev MERGE_INTO lake MERGE_INTO x": "22023",
	} {
		if err := l.admin(sql); pgCode(err) != code {
			t.Fatalf("%s: %v, want %s", sql, err, code)
		}
	}
	mergeChecked(t, l, b, "dev", fork)
	records, next, _, _ := l.tableStats()
	if records != lakeRecords+3 || next != lakeNext+3 {
		t.Fatalf("table stats after the merge: record_count %d next_row_id %d, want %d and %d", records, next, lakeRecords+3, lakeNext+3)
	}
	if n := fromBranch(t, l, b); n != 2 {
		t.Fatalf("the lake names %d data files of the branch, want 2", n)
	}

	// Deletes on both sides, of different files.
	b2 := branchOf(t, l, "dev2")
	fork = forkOf(b2)
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
		}
	}
	mergeChecked(t, l, b2, "dev2", fork)
	for _, d := range l.deleteFiles() {
		if d.dataFile == f1 && (!filepath.IsAbs(d.path) || !strings.HasPrefix(d.path, b2.data)) {
			t.Fatalf("the branch's delete file is named %q, want its absolute path under %s", d.path, b2.data)
		}
	}
}

// forkState is what a branch read at its fork: its snapshot, rows and
// next row id.
type forkState struct {
	snapshot, nextRow int64
	rows              map[int64]int64
}

// forkOf records b's state at the fork (before its first commit).
func forkOf(b *lake) forkState {
	s := b.latest().id
	_, next, _, _ := b.tableStats()
	return forkState{snapshot: s, nextRow: next, rows: b.rows(s)}
}

// mergeChecked merges branch name (harness b, forked at f) into l, once
// the branch's session is closed, and checks the outcome: one new lake
// snapshot per branch snapshot since the fork, each reading the lake's
// rows before the merge less the rows the branch had deleted by then,
// with the rows the branch had inserted by then under row ids moved past
// those the lake allocated since the fork; the snapshot before the merge
// reading as before; the branch gone; verify passing; the store loading
// as the server holds it; and the lake's orphan cleanup keeping every
// file it names. It returns what the lake's head reads.
func mergeChecked(t *testing.T, l, b *lake, name string, f forkState) map[int64]int64 {
	t.Helper()
	branchAt := map[int64]map[int64]int64{}
	last := b.latest().id
	for s := f.snapshot + 1; s <= last; s++ {
		branchAt[s] = b.rows(s)
	}
	before := l.latest().id
	lakeBefore := l.rows(before)
	_, lakeNext, _, _ := l.tableStats()
	newFiles := 0 // of every table
	for _, table := range []string{"ducklake_data_file", "ducklake_delete_file"} {
		for _, r := range b.scan(table, "begin_snapshot") {
			if s, _ := i8(r[0]); s > f.snapshot {
				newFiles++
			}
		}
	}
	b.conn.Close(l.ctx)
	notices, err := l.adminNotices("ALTER DATABASE " + name + " MERGE_INTO lake")
	if err != nil {
		t.Fatalf("merge %s: %v", name, errDetail(err))
	}
	head := l.latest().id
	if head != before+last-f.snapshot {
		t.Fatalf("the merge of %d snapshots made the lake's head %d, want %d", last-f.snapshot, head, before+last-f.snapshot)
	}
	notice := fmt.Sprintf("merged snapshots %d to %d of %q into \"lake\" as its snapshots %d to %d (%d files)", f.snapshot+1, last, name, before+1, head, newFiles)
	if len(notices) != 1 || notices[0] != notice {
		t.Fatalf("the merge's notices %q, want %q", notices, notice)
	}
	var want map[int64]int64
	for s := f.snapshot + 1; s <= last; s++ {
		want = mergedRows(lakeBefore, f.rows, branchAt[s], f.nextRow, lakeNext)
		at := before + s - f.snapshot
		sameRows(t, fmt.Sprintf("the lake at %d, the merge of %s's snapshot %d", at, name, s), l.rows(at), want)
	}
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
	return want
}

// mergedRows is what the lake reads once a branch's snapshot merged onto
// it: its own rows (lake), less those the branch had at the fork (fork)
// and no longer has (branch), plus the branch's new rows (row ids from
// forkNext on) moved past the ids the lake allocated since the fork
// (lakeNext).
func mergedRows(lake, fork, branch map[int64]int64, forkNext, lakeNext int64) map[int64]int64 {
	want := map[int64]int64{}
	for k, v := range lake {
		want[k] = v
	}
	for k := range fork {
		if _, kept := branch[k]; !kept {
			delete(want, k)
		}
	}
	for k, v := range branch {
		if k >= forkNext {
			want[k+lakeNext-forkNext] = v
		}
	}
	return want
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

// compact commits merge_adjacent_files over files (adjacentMerge).
func (l *lake) compact(files []catFile) {
	l.t.Helper()
	l.commit(l.adjacentMerge(files))
}

// adjacentMerge is merge_adjacent_files' commit over files, row-id
// adjacent inserts: the output keeps their row_id_start and embeds
// snapshot ids.
func (l *lake) adjacentMerge(files []catFile) func(s snap) []string {
	return func(s snap) []string {
		rows := l.mergeRows(files)
		for i := range rows {
			rows[i].hasRowID = false
		}
		path := fmt.Sprintf("ducklake-merged-%d.parquet", s.nextFile)
		n := writeData(l.t, l.local(path), rows, false, true)
		return l.mergeSQL(s, files, path, rows, n, files[0].rowIDStart, true)
	}
}

// filesFrom returns l's live data files with ids from id on.
func (l *lake) filesFrom(id int64) []catFile {
	var out []catFile
	for _, f := range l.dataFiles() {
		if f.id >= id && f.end == nil {
			out = append(out, f)
		}
	}
	return out
}

// addColumn commits ALTER TABLE m ADD COLUMN (a schema change:
// altered_table, schema_version + 1); the column takes m's next field id.
func (l *lake) addColumn(name string) {
	l.t.Helper()
	next := int64(1)
	for _, r := range l.scan("ducklake_column", "table_id", "column_id") {
		if t, _ := i8(r[0]); t == l.table {
			c, _ := i8(r[1])
			next = max(next, c+1)
		}
	}
	l.commit(func(s snap) []string {
		c, sv := s.id+1, s.schemaVersion+1
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_column VALUES (%d, %d, NULL, %d, %d, '%s', 'int64', NULL, 'NULL', true, NULL, 'literal', 'duckdb')", q, next, c, l.table, next, name),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, sv, l.table),
			changesSQL(c, fmt.Sprintf("altered_table:%d", l.table)),
		}
	})
}

// dropTable commits DROP TABLE m: its table, column and live file rows
// end.
func (l *lake) dropTable() {
	l.t.Helper()
	l.commit(func(s snap) []string {
		c := s.id + 1
		var out []string
		out = append(out, snapshotSQL(s, s.nextFile))
		for _, table := range []string{"ducklake_table", "ducklake_column", "ducklake_data_file", "ducklake_delete_file"} {
			out = append(out, fmt.Sprintf("UPDATE %s.%s SET end_snapshot = %d WHERE table_id = %d AND end_snapshot IS NULL", q, table, c, l.table))
		}
		return append(out, changesSQL(c, fmt.Sprintf("dropped_table:%d", l.table)))
	})
}

// createTable commits CREATE TABLE name (id BIGINT) and returns the
// harness on the new table. Its path is m's, so that the harness finds
// its files where it finds m's.
func (l *lake) createTable(name string) *lake {
	l.t.Helper()
	v := *l
	l.commit(func(s snap) []string {
		c, sv := s.id+1, s.schemaVersion+1
		v.table = s.nextCatalog
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog+1, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_table VALUES (%d, 'a0a0a0a0-0000-4000-8000-%012d', %d, NULL, 0, '%s', 'm/', true)", q, v.table, c, c, name),
			fmt.Sprintf("INSERT INTO %s.ducklake_column VALUES (1, %d, NULL, %d, 1, 'id', 'int64', NULL, 'NULL', true, NULL, 'literal', 'duckdb')", q, c, v.table),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, sv, v.table),
			changesSQL(c, fmt.Sprintf(`created_table:"main"."%s"`, name)),
		}
	})
	return &v
}

// inlineInsert commits an INSERT of ids into m's inlined data table,
// which must exist (inlinedTable).
func (l *lake) inlineInsert(table string, ids ...int64) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		c := s.id + 1
		records, next, size, had := l.tableStats()
		var vals []string
		for i, id := range ids {
			vals = append(vals, fmt.Sprintf("(%d, %d, NULL, %d)", next+int64(i), c, id))
		}
		return append(l.statsSQL(records+int64(len(ids)), next+int64(len(ids)), size, had),
			snapshotSQL(s, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.%s VALUES %s", q, table, strings.Join(vals, ", ")),
			changesSQL(c, fmt.Sprintf("inlined_insert:%d", l.table)))
	})
}

// inlineDelete commits a DELETE of m's inlined rows rowIDs: it ends them.
func (l *lake) inlineDelete(table string, rowIDs ...int64) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		c := s.id + 1
		var ids []string
		for _, r := range rowIDs {
			ids = append(ids, fmt.Sprint(r))
		}
		return []string{snapshotSQL(s, s.nextFile),
			fmt.Sprintf("UPDATE %s.%s SET _ducklake_end_snapshot = %d WHERE _ducklake_row_id IN (%s) AND _ducklake_end_snapshot IS NULL", q, table, c, strings.Join(ids, ", ")),
			changesSQL(c, fmt.Sprintf("inlined_delete:%d", l.table))}
	})
}

// endFile commits a DELETE of every row of data file f: DuckLake ends the
// file instead of writing a delete file.
func (l *lake) endFile(f catFile) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		c := s.id + 1
		return []string{snapshotSQL(s, s.nextFile),
			fmt.Sprintf("UPDATE %s.ducklake_data_file SET end_snapshot = %d WHERE data_file_id = %d AND end_snapshot IS NULL", q, c, f.id),
			changesSQL(c, fmt.Sprintf("deleted_from_table:%d", l.table))}
	})
}

// inlinedTable commits the creation of m's inlined data table, as
// DuckLake's first inlined insert does (a new schema version), and returns
// its name.
func (l *lake) inlinedTable() string {
	l.t.Helper()
	var name string
	l.commit(func(s snap) []string {
		c, sv := s.id+1, s.schemaVersion+1
		name = fmt.Sprintf("ducklake_inlined_data_%d_%d", l.table, sv)
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_inlined_data_tables VALUES (%d, '%s', %d)", q, l.table, name, sv),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s(_ducklake_row_id BIGINT, _ducklake_begin_snapshot BIGINT, _ducklake_end_snapshot BIGINT, id BIGINT)", q, name),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, sv, l.table),
			changesSQL(c, fmt.Sprintf("altered_table:%d", l.table)),
		}
	})
	return name
}

// TestMergeMatrix: a merge under DuckLake's conflict matrix, class by
// class of what the branch and the lake did since the fork. A case that
// merges must read, on the lake, exactly the lake's rows with the
// branch's changes (mergeChecked); a refused one must change nothing on
// either side and leave the branch in place.
func TestMergeMatrix(t *testing.T) {
	type env struct {
		l, b       *lake
		f1, f2     int64 // the lake's files at the fork: ids (1,2,3) and (4,5)
		inlined    string
		inlinedRow int64 // the row id of the lake's inlined row (6)
	}
	fileOf := func(v *lake, id int64) catFile {
		for _, f := range v.dataFiles() {
			if f.id == id {
				return f
			}
		}
		t.Fatalf("no file %d", id)
		return catFile{}
	}
	cases := []struct {
		name         string
		branch, lake func(e *env)
		code         string // "" merges
	}{
		{"insert / insert", func(e *env) { e.b.insert(10) }, func(e *env) { e.l.insert(20) }, ""},
		{"insert / merge_adjacent", func(e *env) { e.b.insert(10) }, func(e *env) {
			e.l.insert(20)
			e.l.insert(21)
			e.l.compact(e.l.filesFrom(e.f2 + 1))
		}, ""},
		{"inlined insert / insert", func(e *env) { e.b.inlineInsert(e.inlined, 10, 11) }, func(e *env) { e.l.insert(20) }, ""},
		{"delete / delete of another file", func(e *env) { e.b.deleteRows(fileOf(e.b, e.f1), 0) }, func(e *env) { e.l.deleteRows(fileOf(e.l, e.f2), 1) }, ""},
		{"delete / nothing", func(e *env) { e.b.deleteRows(fileOf(e.b, e.f1), 0, 2) }, func(e *env) {}, ""},
		{"insert / delete", func(e *env) { e.b.insert(10) }, func(e *env) { e.l.deleteRows(fileOf(e.l, e.f1), 0) }, "40001"},
		{"delete / insert", func(e *env) { e.b.deleteRows(fileOf(e.b, e.f1), 0) }, func(e *env) { e.l.insert(20) }, "40001"},
		{"delete / delete of the same file", func(e *env) { e.b.deleteRows(fileOf(e.b, e.f1), 0) }, func(e *env) { e.l.deleteRows(fileOf(e.l, e.f1), 1) }, "40001"},
		{"delete / merge_adjacent", func(e *env) { e.b.deleteRows(fileOf(e.b, e.f1), 0) }, func(e *env) {
			e.l.insert(20)
			e.l.insert(21)
			e.l.compact(e.l.filesFrom(e.f2 + 1))
		}, "40001"},
		{"insert / altered_table", func(e *env) { e.b.insert(10) }, func(e *env) { e.l.addColumn("x") }, "40001"},
		{"inlined insert / altered_table", func(e *env) { e.b.inlineInsert(e.inlined, 10) }, func(e *env) { e.l.addColumn("x") }, "40001"},
		{"inlined delete / nothing", func(e *env) { e.b.inlineDelete(e.inlined, e.inlinedRow) }, func(e *env) {}, ""},
		{"inlined insert / inlined insert", func(e *env) { e.b.inlineInsert(e.inlined, 10) }, func(e *env) { e.l.inlineInsert(e.inlined, 20) }, ""},
		{"inlined delete / insert", func(e *env) { e.b.inlineDelete(e.inlined, e.inlinedRow) }, func(e *env) { e.l.insert(20) }, "40001"},
		{"insert / inlined delete", func(e *env) { e.b.insert(10) }, func(e *env) { e.l.inlineDelete(e.inlined, e.inlinedRow) }, "40001"},
		{"inlined insert / inlined delete", func(e *env) { e.b.inlineInsert(e.inlined, 10) }, func(e *env) { e.l.inlineDelete(e.inlined, e.inlinedRow) }, "40001"},
		{"inlined delete / inlined delete", func(e *env) { e.b.inlineDelete(e.inlined, e.inlinedRow) }, func(e *env) { e.l.inlineDelete(e.inlined, e.inlinedRow) }, "40001"},
		{"delete of its own new file / nothing", func(e *env) {
			_, f := e.b.insert(10, 11)
			e.b.deleteRows(fileOf(e.b, f), 1)
		}, func(e *env) {}, ""},
		{"insert, every row of it deleted, insert / nothing", func(e *env) {
			_, f := e.b.insert(10, 11)
			e.b.endFile(fileOf(e.b, f))
			e.b.insert(12)
		}, func(e *env) {}, ""},
		{"dropped_table / nothing", func(e *env) { e.b.dropTable() }, func(e *env) {}, ""},
		{"dropped_table / insert", func(e *env) { e.b.dropTable() }, func(e *env) { e.l.insert(20) }, "40001"},
		{"dropped_table / dropped_table", func(e *env) { e.b.dropTable() }, func(e *env) { e.l.dropTable() }, "40001"},
		{"altered_table / nothing", func(e *env) { e.b.addColumn("x") }, func(e *env) {}, ""},
		{"altered_table / insert", func(e *env) { e.b.addColumn("x") }, func(e *env) { e.l.insert(20) }, ""},
		{"altered_table / altered_table", func(e *env) { e.b.addColumn("x") }, func(e *env) { e.l.addColumn("y") }, "40001"},
		{"created_table / created_table of another name", func(e *env) { e.b.createTable("n").insert(40) }, func(e *env) { e.l.createTable("k").insert(50) }, ""},
		{"created_table / created_table of the same name", func(e *env) { e.b.createTable("n") }, func(e *env) { e.l.createTable("n") }, "40001"},
		{"merge_adjacent of its own files / nothing", func(e *env) {
			e.b.insert(10)
			e.b.insert(11)
			e.b.compact(e.b.filesFrom(e.f2 + 1))
		}, func(e *env) {}, "0A000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLake(t)
			e := &env{l: l}
			_, e.f1 = l.insert(1, 2, 3)
			_, e.f2 = l.insert(4, 5)
			e.inlined = l.inlinedTable()
			_, e.inlinedRow, _, _ = l.tableStats()
			l.inlineInsert(e.inlined, 6)
			e.b = branchOf(t, l, "dev")
			fork := forkOf(e.b)
			tc.branch(e)
			branchRows := e.b.rows(e.b.latest().id)
			tc.lake(e)
			if tc.code != "" {
				head := l.latest().id
				lakeRows := l.rows(head)
				e.b.conn.Close(l.ctx)
				err := l.admin("ALTER DATABASE dev MERGE_INTO lake")
				if pgCode(err) != tc.code {
					t.Fatalf("merge: %v, want %s", errDetail(err), tc.code)
				}
				t.Logf("refused: %s", errDetail(err))
				if l.latest().id != head {
					t.Fatal("a refused merge committed a snapshot")
				}
				sameRows(t, "the lake after a refused merge", l.rows(head), lakeRows)
				again := l.viewOf("dev", e.b.data)
				sameRows(t, "the branch after a refused merge", again.rows(again.latest().id), branchRows)
				sameLoad(t, l, "lake", "dev")
				return
			}
			want := mergeChecked(t, l, e.b, "dev", fork)
			// The branch's files are the lake's now: its cleanup takes
			// none while a retained snapshot reads it; once the snapshots
			// that read a file the branch ended expire, it takes that one.
			branchFiles := func() (out []string) {
				for _, p := range l.cleanup() {
					if strings.HasPrefix(p, e.b.data) {
						out = append(out, p)
					}
				}
				return out
			}
			if got := branchFiles(); len(got) != 0 {
				t.Fatalf("the lake's cleanup after the merge removed the branch's %v", got)
			}
			var ended []catFile
			for _, f := range l.dataFiles() {
				if strings.HasPrefix(f.path, e.b.data) && f.end != nil {
					ended = append(ended, f)
				}
			}
			for _, f := range ended {
				end, _ := i8(f.end)
				var victims []int64
				for s := f.begin; s < end; s++ {
					victims = append(victims, s)
				}
				l.expire(victims...)
			}
			if got := branchFiles(); len(got) != len(ended) {
				t.Fatalf("after expiring the snapshots that read the %d files the branch ended, the lake's cleanup removed %v", len(ended), got)
			}
			sameRows(t, "the lake after its cleanup", l.rows(l.latest().id), want)
		})
	}
}

// TestMergedDataPathStaysTaken: once a merge makes the lake read files
// under a branch's data path, no new writable branch may take that path
// (its orphan cleanup would delete them), the lake's own branches
// included; another path is fine.
func TestMergedDataPathStaysTaken(t *testing.T) {
	l := newLake(t)
	l.insert(1, 2)
	b := branchOf(t, l, "dev")
	fork := forkOf(b)
	b.insert(10)
	mergeChecked(t, l, b, "dev", fork)
	for _, loc := range []string{b.data + "/", b.data + "/main/"} {
		err := l.admin("CREATE DATABASE again TEMPLATE lake LOCATION '" + loc + "'")
		if pgCode(err) != "22023" {
			t.Fatalf("a branch at %s, which holds the lake's merged file: %v, want 22023", loc, err)
		}
	}
	if err := l.admin("CREATE DATABASE again TEMPLATE lake LOCATION '" + t.TempDir() + "/'"); err != nil {
		t.Fatalf("a branch at a fresh path: %v", err)
	}
}

// TestMergeCommitIsChecked: the commit a merge plans goes through the
// pipeline's checks like any other — snapshots consecutive from the head
// on — and a refused one leaves the branch in place.
func TestMergeCommitIsChecked(t *testing.T) {
	l := newLake(t)
	l.insert(1)
	b := branchOf(t, l, "dev")
	b.insert(2)
	b.conn.Close(l.ctx)
	head := l.latest()
	for _, snaps := range [][]int64{{head.id + 1, head.id + 3}, {head.id + 2}} {
		err := l.st.Cat.MergeBranch(l.ctx, "dev", "lake", func(m *catalog.Merge) error {
			for _, s := range snaps {
				vals := []datum.Value{datum.IntValue(s), datum.TimestampTZValue(0), datum.IntValue(head.schemaVersion), datum.IntValue(head.nextCatalog), datum.IntValue(head.nextFile)}
				if _, err := m.Txn.InsertRow("public", "ducklake_snapshot", vals); err != nil {
					return err
				}
			}
			return nil
		})
		if !errors.Is(err, commit.ErrShape) && !errors.Is(err, commit.ErrHead) {
			t.Fatalf("a merge minting snapshots %v on head %d: %v, want a shape or head refusal", snaps, head.id, err)
		}
		if _, ok := l.st.Cat.Lookup("dev"); !ok {
			t.Fatalf("a refused merge (snapshots %v) consumed the branch", snaps)
		}
	}
	sameLoad(t, l, "lake", "dev")
}

// TestMergeSchemaChange: a branch that creates a table, fills it and adds
// a column to the lake's table, while the lake creates a table of its own
// (taking the same catalog id) and inserts: the merge moves the branch's
// table to a catalog id past the lake's, with its rows, statistics and
// change sets, and its schema versions past the lake's.
func TestMergeSchemaChange(t *testing.T) {
	l := newLake(t)
	l.insert(1, 2)
	b := branchOf(t, l, "dev")
	fork := forkOf(b)
	n := b.createTable("n")
	n.insert(40, 41)
	b.addColumn("x")
	branchN := n.rows(b.latest().id)
	k := l.createTable("k")
	k.insert(50)
	if n.table != k.table {
		t.Fatalf("the test wants both sides to allocate the same catalog id: n %d, k %d", n.table, k.table)
	}
	lakeK := k.rows(l.latest().id)
	sv := l.latest().schemaVersion
	mergeChecked(t, l, b, "dev", fork)

	var nID int64 = -1
	for _, r := range l.scan("ducklake_table", "table_id", "table_name") {
		if string(r[1]) == "n" {
			nID, _ = i8(r[0])
		}
	}
	if nID <= k.table {
		t.Fatalf("the branch's table n is %d on the lake, want an id past the lake's k (%d)", nID, k.table)
	}
	merged := *k
	merged.table = nID
	sameRows(t, "the branch's table n on the lake", merged.rows(l.latest().id), branchN)
	sameRows(t, "the lake's table k after the merge", k.rows(l.latest().id), lakeK)
	head := l.latest()
	if head.schemaVersion != sv+2 {
		t.Fatalf("the lake's schema version after merging two schema changes: %d, want %d", head.schemaVersion, sv+2)
	}
	if head.nextCatalog != nID+1 {
		t.Fatalf("the lake's next_catalog_id after the merge: %d, want %d", head.nextCatalog, nID+1)
	}
	found := false
	for _, r := range l.scan("ducklake_snapshot_changes", "snapshot_id", "changes_made") {
		found = found || string(r[1]) == fmt.Sprintf("inserted_into_table:%d", nID)
	}
	if !found {
		t.Fatalf("no merged change set names the branch's table under its new id %d", nID)
	}
}

// TestWritableBranchAtEarlierSnapshot: a writable branch forked at an
// earlier snapshot of the lake reads, at its head, what the lake read
// there — the lake's later inserts, deletes and table gone — writes on
// from there under its own data path, and merges back onto the lake's
// head. A fork at a snapshot whose files the lake compacted since is
// refused.
func TestWritableBranchAtEarlierSnapshot(t *testing.T) {
	l := newLake(t)
	_, f1 := l.insert(1, 2, 3)
	at, _ := l.insert(4, 5)
	atRows := l.rows(at)
	for _, f := range l.dataFiles() {
		if f.id == f1 {
			l.deleteRows(f, 0)
		}
	}
	l.insert(6)
	k := l.createTable("k")
	k.insert(7)
	lakeHead := l.rows(l.latest().id)

	dir := t.TempDir()
	if err := l.admin(fmt.Sprintf("CREATE DATABASE dev TEMPLATE lake LOCATION '%s/' AT_SNAPSHOT %d", dir, at)); err != nil {
		t.Fatalf("fork at %d: %v", at, err)
	}
	b := l.viewOf("dev", dir)
	if got := b.latest().id; got != at {
		t.Fatalf("the branch's head is %d, want %d", got, at)
	}
	sameRows(t, "the branch at its head", b.rows(at), atRows)
	for _, r := range b.scan("ducklake_table", "table_name") {
		if string(r[0]) == "k" {
			t.Fatal("the branch holds the table the lake created after the fork snapshot")
		}
	}
	b.verify("the branch at its fork")
	// It writes on from there: a new snapshot id the lake used already,
	// new files under its own data path.
	s, f := b.insert(10)
	if s != at+1 {
		t.Fatalf("the branch's first commit is snapshot %d, want %d", s, at+1)
	}
	want := map[int64]int64{}
	for r, v := range atRows {
		want[r] = v
	}
	_, next, _, _ := b.tableStats()
	want[next-1] = 10
	sameRows(t, "the branch after its insert", b.rows(s), want)
	for _, df := range b.dataFiles() {
		if df.id == f && filepath.IsAbs(df.path) {
			t.Fatalf("the branch's own file is served as %q, want a path relative to its data path", df.path)
		}
	}
	sameRows(t, "the lake after the branch's insert", l.rows(l.latest().id), lakeHead)
	b.verify("the branch after its insert")
	l.verify("the lake after the branch's insert")
	sameLoad(t, l, "lake", "dev")
	// The lake deleted from m since the fork snapshot, and the branch
	// inserted into it: DuckLake's matrix refuses the merge.
	b.conn.Close(l.ctx)
	if err := l.admin("ALTER DATABASE dev MERGE_INTO lake"); pgCode(err) != "40001" {
		t.Fatalf("merge of an insert onto the lake's delete since the fork: %v, want 40001", errDetail(err))
	}

	// A second branch at a snapshot after the delete: the lake only
	// inserted since, so the merge goes through.
	at2, f8 := l.insert(8)
	_, f9 := l.insert(9)
	dir2 := t.TempDir()
	if err := l.admin(fmt.Sprintf("CREATE DATABASE dev2 TEMPLATE lake LOCATION '%s/' AT_SNAPSHOT %d", dir2, at2)); err != nil {
		t.Fatalf("fork at %d: %v", at2, err)
	}
	b2 := l.viewOf("dev2", dir2)
	fork2 := forkOf(b2)
	b2.insert(11)
	b2.insert(12)
	mergeChecked(t, l, b2, "dev2", fork2)

	// The lake compacts files the snapshot saw (once no branch reads
	// them): no writable fork there.
	if err := l.admin("DROP DATABASE dev"); err != nil {
		t.Fatal(err)
	}
	var pair []catFile
	for _, f := range l.dataFiles() {
		if f.id == f8 || f.id == f9 {
			pair = append(pair, f)
		}
	}
	l.compact(pair)
	err := l.admin(fmt.Sprintf("CREATE DATABASE dev3 TEMPLATE lake LOCATION '%s/' AT_SNAPSHOT %d", t.TempDir(), at2))
	if pgCode(err) != "0A000" {
		t.Fatalf("a writable fork at a snapshot whose files the lake compacted since: %v, want 0A000", err)
	}
}
