package maint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"
)

// modelBranch is a live branch of the model's lake and what it must keep
// reading: its catalog as the lake's was at the fork, and the rows of each
// snapshot it retains.
type modelBranch struct {
	name  string
	view  *lake // the harness reading the branch (same data path)
	fork  int64
	dump  map[string]string
	rows  map[int64]map[int64]int64
	files map[int64]bool // data and delete file ids it reads
}

// TestBranchModel forks a lake DuckLake writes real Parquet files for, and
// in random interleavings inserts, deletes rows, merges adjacent files,
// rewrites a file with deletes, expires snapshots, cleans up scheduled
// files and deletes orphaned files on the lake, forks and drops branches,
// and tries to write on a branch. A maintenance commit of the lake is
// refused exactly when it would remove or schedule a file a branch reads,
// or expire a fork snapshot; writes on a branch always are. After every
// step every file any live snapshot of the lake or of a branch references
// is on disk, each branch's catalog is the lake's at its fork, each of
// its snapshots reads the rows it read at the fork from the Parquet
// files, and moraine verify (the cross-branch rule included) passes.
func TestBranchModel(t *testing.T) {
	outcomes := map[string]int{}
	defer func() { t.Logf("maintenance outcomes: %v", outcomes) }()
	rapid.Check(t, func(rt *rapid.T) {
		// Each case's lake (its store, server and connections) closes
		// when the case ends, not with the test.
		sc := &scope{TB: t}
		defer sc.close()
		l := newLake(sc)
		m := &branchModel{rt: rt, l: l, outcomes: outcomes}
		m.admin = m.connect("postgres")
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"insert": func(rt *rapid.T) {
				k := rapid.IntRange(1, 4).Draw(rt, "rows")
				ids := make([]int64, k)
				for i := range ids {
					n++
					ids[i] = int64(n)
				}
				l.insert(ids...)
			},
			"deleteRows": func(rt *rapid.T) {
				f, ok := m.fileWithoutDeletes(rt)
				if !ok {
					rt.Skip("no live file without deletes")
				}
				l.deleteRows(f, 0)
			},
			"merge":   func(rt *rapid.T) { m.merge(rt) },
			"rewrite": func(rt *rapid.T) { m.rewrite(rt) },
			"expire":  func(rt *rapid.T) { m.expire(rt) },
			"cleanup": func(rt *rapid.T) { l.cleanup() },
			"orphans": func(rt *rapid.T) { m.deleteOrphans() },
			"fork": func(rt *rapid.T) {
				if len(m.branches) >= 3 {
					rt.Skip("enough branches")
				}
				m.fork()
			},
			"drop": func(rt *rapid.T) {
				if len(m.branches) == 0 {
					rt.Skip("no branch")
				}
				i := rapid.IntRange(0, len(m.branches)-1).Draw(rt, "branch")
				m.drop(i)
			},
			"writeBranch": func(rt *rapid.T) {
				if len(m.branches) == 0 {
					rt.Skip("no branch")
				}
				b := m.branches[rapid.IntRange(0, len(m.branches)-1).Draw(rt, "branch")]
				err := b.view.tryCommit(func(s snap) []string { return []string{snapshotSQL(s, s.nextFile)} })
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "25006" {
					rt.Fatalf("a commit on branch %s: %v, want 25006", b.name, err)
				}
			},
			"": func(rt *rapid.T) { m.check(rt) },
		})
	})
}

// scope is t, but runs what is registered with Cleanup when close is
// called.
type scope struct {
	testing.TB
	cleanups []func()
}

func (s *scope) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scope) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

type branchModel struct {
	rt       *rapid.T
	l        *lake
	admin    *pgconn.PgConn
	branches []*modelBranch
	forks    int
	outcomes map[string]int // "merge refused", "expire done", …
}

func (m *branchModel) connect(db string) *pgconn.PgConn {
	c, err := pgconn.Connect(m.l.ctx, "postgres://moraine@"+m.l.conn.Conn().RemoteAddr().String()+"/"+db+"?sslmode=disable")
	if err != nil {
		m.rt.Fatalf("connect %s: %v", db, err)
	}
	m.l.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// readBy reports the live branches that read file id.
func (m *branchModel) readBy(ids ...int64) []string {
	var out []string
	for _, b := range m.branches {
		for _, id := range ids {
			if b.files[id] {
				out = append(out, b.name)
				break
			}
		}
	}
	return out
}

func (m *branchModel) fileWithoutDeletes(rt *rapid.T) (catFile, bool) {
	files, dels := m.l.live()
	var free []catFile
	for _, f := range files {
		if !slices.ContainsFunc(dels, func(d catDelete) bool { return d.dataFile == f.id }) {
			free = append(free, f)
		}
	}
	if len(free) == 0 {
		return catFile{}, false
	}
	return free[rapid.IntRange(0, len(free)-1).Draw(rt, "file")], true
}

// expectRefusal checks that a maintenance commit failed exactly when the
// model says a branch reads what it removes, and with the branch's error.
func (m *branchModel) expectRefusal(rt *rapid.T, what string, err error, readers []string) {
	outcome := strings.Fields(what)[0] + " done"
	if err != nil {
		outcome = strings.Fields(what)[0] + " refused"
	}
	m.outcomes[outcome]++
	if len(readers) == 0 {
		if err != nil {
			rt.Fatalf("%s, which no branch reads: %v", what, err)
		}
		return
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55006" || !strings.Contains(pe.Message, "is a branch of") {
		rt.Fatalf("%s, read by %v: %v, want 55006", what, readers, err)
	}
}

// merge is merge_adjacent_files over two or more live files without
// deletes, adjacent in row ids.
func (m *branchModel) merge(rt *rapid.T) {
	l := m.l
	files, dels := l.live()
	var srcs []catFile
	for _, f := range files {
		if f.hasStart && !slices.ContainsFunc(dels, func(d catDelete) bool { return d.dataFile == f.id }) {
			if len(srcs) > 0 && srcs[len(srcs)-1].rowIDStart+srcs[len(srcs)-1].records != f.rowIDStart {
				srcs = srcs[:0]
			}
			srcs = append(srcs, f)
		}
	}
	if len(srcs) < 2 {
		rt.Skip("no adjacent files to merge")
	}
	ids := make([]int64, len(srcs))
	for i, f := range srcs {
		ids[i] = f.id
	}
	err := l.tryCommit(func(s snap) []string {
		rows := l.mergeRows(srcs)
		for i := range rows {
			rows[i].hasRowID = false
		}
		path := fmt.Sprintf("ducklake-merged-%d.parquet", s.nextFile)
		n := writeData(l.t, l.local(path), rows, false, true)
		return l.mergeSQL(s, srcs, path, rows, n, srcs[0].rowIDStart, true)
	})
	m.expectRefusal(rt, fmt.Sprintf("merging files %v", ids), err, m.readBy(ids...))
}

// rewrite is rewrite_data_files over one live file with a live delete
// file: the survivors in a new file, the source and its delete file
// ended (not removed: that is expire's).
func (m *branchModel) rewrite(rt *rapid.T) {
	l := m.l
	files, dels := l.live()
	var f catFile
	var d catDelete
	found := false
	for _, x := range files {
		if i := slices.IndexFunc(dels, func(y catDelete) bool { return y.dataFile == x.id }); i >= 0 && x.hasStart {
			f, d, found = x, dels[i], true
		}
	}
	if !found {
		rt.Skip("no file with deletes")
	}
	deleted := map[int64]bool{}
	for _, p := range readDeletes(l.t, l.local(d.path)) {
		deleted[p.pos] = true
	}
	if len(deleted) == int(f.records) {
		rt.Skip("every row deleted: nothing to rewrite")
	}
	l.commit(func(s snap) []string {
		c := s.id + 1
		var rows []dataRow
		for pos, r := range readData(l.t, l.local(f.path)) {
			if !deleted[int64(pos)] {
				rows = append(rows, dataRow{id: r.id, rowID: f.rowIDStart + int64(pos), hasRowID: true})
			}
		}
		path := fmt.Sprintf("ducklake-rewritten-%d.parquet", s.nextFile)
		n := writeData(l.t, l.local(path), rows, true, false)
		records, next, size, _ := l.tableStats()
		stmts := []string{snapshotSQL(s, s.nextFile+1)}
		stmts = append(stmts, l.fileSQL(s.nextFile, c, path, rows, n, 0, false, 0, false)...)
		return append(stmts,
			fmt.Sprintf("UPDATE %s.ducklake_delete_file SET end_snapshot = %d WHERE delete_file_id = %d", q, c, d.id),
			fmt.Sprintf("UPDATE %s.ducklake_data_file SET end_snapshot = %d WHERE data_file_id = %d", q, c, f.id),
			fmt.Sprintf("UPDATE %s.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d", q, records-int64(len(deleted)), size, next, l.table),
			changesSQL(c, fmt.Sprintf("rewrite_delete:%d", l.table)))
	})
}

// expire is expire_snapshots(older_than => …) at a random cutoff (never
// the newest snapshot).
func (m *branchModel) expire(rt *rapid.T) {
	l := m.l
	last := l.latest().id
	var retained []int64
	for _, r := range l.scan("ducklake_snapshot", "snapshot_id") {
		if id, _ := i8(r[0]); id != last {
			retained = append(retained, id)
		}
	}
	if len(retained) == 0 {
		rt.Skip("only the newest snapshot")
	}
	sort.Slice(retained, func(i, j int) bool { return retained[i] < retained[j] })
	// expire_snapshots(older_than => …): the oldest ones, up to a cutoff.
	victims := retained[:rapid.IntRange(1, len(retained)).Draw(rt, "expired")]
	purged, err := l.tryExpire(victims...)
	readers := m.readBy(purged...)
	for _, b := range m.branches {
		if slices.Contains(victims, b.fork) && !slices.Contains(readers, b.name) {
			readers = append(readers, b.name)
		}
	}
	m.expectRefusal(rt, fmt.Sprintf("expiring %v (purging %v)", victims, purged), err, readers)
}

// deleteOrphans is delete_orphaned_files(cleanup_all => true): every
// Parquet file under the data path that no data-file, delete-file or
// schedule row of the lake names goes.
func (m *branchModel) deleteOrphans() {
	l := m.l
	known := map[string]bool{}
	for _, f := range l.dataFiles() {
		known[l.local(f.path)] = true
	}
	for _, d := range l.deleteFiles() {
		known[l.local(d.path)] = true
	}
	for _, r := range l.scan("ducklake_files_scheduled_for_deletion", "path") {
		known[filepath.Join(l.data, string(r[0]))] = true
	}
	err := filepath.WalkDir(l.data, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") || known[p] {
			return err
		}
		return os.Remove(p)
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

// fork creates a branch of the lake and records what it reads.
func (m *branchModel) fork() {
	m.forks++
	name := fmt.Sprintf("b%d", m.forks)
	if _, err := m.admin.Exec(m.l.ctx, "CREATE DATABASE "+name+" TEMPLATE lake").ReadAll(); err != nil {
		m.rt.Fatalf("fork: %v", err)
	}
	view := *m.l
	view.conn = m.connect(name)
	b := &modelBranch{name: name, view: &view, fork: m.l.latest().id, dump: m.dump(m.l.conn), rows: map[int64]map[int64]int64{}, files: map[int64]bool{}}
	for _, r := range m.l.scan("ducklake_snapshot", "snapshot_id") {
		s, _ := i8(r[0])
		b.rows[s] = m.l.rows(s)
	}
	for _, f := range m.l.dataFiles() {
		b.files[f.id] = true
	}
	for _, d := range m.l.deleteFiles() {
		b.files[d.id] = true
	}
	m.branches = append(m.branches, b)
}

func (m *branchModel) drop(i int) {
	b := m.branches[i]
	if _, err := m.admin.Exec(m.l.ctx, "DROP DATABASE "+b.name+" WITH (FORCE)").ReadAll(); err != nil {
		m.rt.Fatalf("drop %s: %v", b.name, err)
	}
	m.branches = slices.Delete(m.branches, i, i+1)
}

// dump is every DuckLake table as c reads it, rows sorted.
func (m *branchModel) dump(c *pgconn.PgConn) map[string]string {
	res, err := c.Exec(m.l.ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").ReadAll()
	if err != nil {
		m.rt.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range res[0].Rows {
		var b bytes.Buffer
		if _, err := c.CopyTo(m.l.ctx, &b, fmt.Sprintf(`COPY (SELECT * FROM "public".%q) TO STDOUT`, string(r[0]))); err != nil {
			m.rt.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		sort.Strings(lines)
		out[string(r[0])] = strings.Join(lines, "\n")
	}
	return out
}

// check is the model's invariant, after every step.
func (m *branchModel) check(rt *rapid.T) {
	l := m.l
	onDisk := func(who string, v *lake) {
		for _, f := range v.dataFiles() {
			if _, err := os.Stat(v.local(f.path)); err != nil {
				rt.Fatalf("%s references data file %d (%s), which is gone: %v", who, f.id, f.path, err)
			}
		}
		for _, d := range v.deleteFiles() {
			if _, err := os.Stat(v.local(d.path)); err != nil {
				rt.Fatalf("%s references delete file %d (%s), which is gone: %v", who, d.id, d.path, err)
			}
		}
	}
	onDisk("the lake", l)
	for _, b := range m.branches {
		onDisk("branch "+b.name, b.view)
		got := m.dump(b.view.conn)
		for name, want := range b.dump {
			if got[name] != want {
				rt.Fatalf("branch %s: table %s differs from the lake's at the fork", b.name, name)
			}
		}
		if len(got) != len(b.dump) {
			rt.Fatalf("branch %s: %d tables, %d at the fork", b.name, len(got), len(b.dump))
		}
		for s, want := range b.rows {
			got := b.view.rows(s)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				rt.Fatalf("branch %s at snapshot %d reads %v, read %v at the fork", b.name, s, got, want)
			}
		}
	}
	l.verify("model step")
}
