package maint

import (
	"bytes"
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

// side is where a model step runs: the lake, or a writable branch of it.
type side struct {
	name string
	view *lake // the harness reading and writing it
	// rows are what each snapshot read when the model first saw it: a
	// retained snapshot must always read the same.
	rows map[int64]map[int64]int64
	// branch is nil for the lake.
	branch *modelBranch
	// want is the oracle: the values its newest snapshot must read,
	// derived from the commits made on it alone (inserted values, the
	// value a row delete removed, a fork's starting values, a merge's
	// changes); nil where the model cannot tell.
	want map[int64]bool
	// history is the lake's want at each snapshot (for forks at one).
	history map[int64]map[int64]bool
}

// insert commits an insert of ids on s and adds them to its oracle.
func (s *side) insert(ids ...int64) {
	s.view.insert(ids...)
	for _, id := range ids {
		if s.want != nil {
			s.want[id] = true
		}
	}
}

// deleteFirst commits the delete of f's first row on s and removes its
// value (read from f's Parquet file) from the oracle.
func (s *side) deleteFirst(f catFile) {
	s.view.deleteRows(f, 0)
	if s.want != nil {
		delete(s.want, readData(s.view.t, s.view.local(f.path))[0].id)
	}
}

func copyWant(w map[int64]bool) map[int64]bool {
	if w == nil {
		return nil
	}
	out := make(map[int64]bool, len(w))
	for k := range w {
		out[k] = true
	}
	return out
}

// modelBranch is a live branch of the model's lake and what it must keep
// reading.
type modelBranch struct {
	fork     int64
	nextFile int64             // the lake's next_file_id at the fork
	files    map[int64]bool    // the data and delete file ids it inherited
	dump     map[string]string // a read-only branch's catalog at the lake's newest: the lake's then
	writable bool
	nextRow  int64 // the lake's next_row_id at the fork
	// forkWant is the oracle's values at the fork.
	forkWant map[int64]bool
}

// TestBranchModel forks a lake DuckLake writes real Parquet files for into
// read-only and writable branches, and in random interleavings, on the
// lake and on the writable branches, inserts, deletes rows, merges
// adjacent files, rewrites a file with deletes, expires snapshots, cleans
// up scheduled files and deletes orphaned files; forks, merges and drops
// branches (a merge of appends onto appends must go through; any merge,
// once done, must read as the lake's rows plus the branch's changes at
// every merged snapshot); and tries to write on a read-only one. A
// maintenance commit is refused exactly when it would remove, schedule or
// expire what a branch reads of the lake (on the lake), or what a branch
// inherited (on the branch); writes on a read-only branch always are.
// After every step every file a live snapshot of the lake or of a branch
// references is on disk; the newest snapshot of each reads exactly the
// values its own commits make (side.want: the values inserted, less those
// deleted, a fork starting from its parent's at the fork, a merge adding
// the branch's changes), which is what a fresh catalog given the same
// commits reads; every retained snapshot of each reads the rows it read
// when first seen (from the Parquet files); a read-only branch's catalog
// is the lake's at its fork; and moraine verify (the cross-branch rule
// included) passes. At the end of a case a load of the store holds what
// the server does.
func TestBranchModel(t *testing.T) {
	outcomes := map[string]int{}
	defer func() { t.Logf("maintenance outcomes: %v", outcomes) }()
	rapid.Check(t, func(rt *rapid.T) {
		// Each case's lake (its store, server and connections) closes
		// when the case ends, not with the test.
		sc := &scope{TB: t}
		defer sc.close()
		l := newLake(sc)
		m := &branchModel{rt: rt, l: l, outcomes: outcomes, created: l.latest().id}
		m.admin = l.connectTo("postgres")
		m.sides = []*side{{name: "lake", view: l, rows: map[int64]map[int64]int64{},
			want: map[int64]bool{}, history: map[int64]map[int64]bool{0: {}, l.latest().id: {}}}}
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"insert": func(rt *rapid.T) {
				s := m.pick(rt)
				k := rapid.IntRange(1, 4).Draw(rt, "rows")
				ids := make([]int64, k)
				for i := range ids {
					n++
					ids[i] = int64(n)
				}
				s.insert(ids...)
			},
			"deleteRows": func(rt *rapid.T) {
				s := m.pick(rt)
				f, ok := fileWithoutDeletes(rt, s.view)
				if !ok {
					rt.Skip("no live file without deletes")
				}
				s.deleteFirst(f)
			},
			"merge":   func(rt *rapid.T) { m.merge(rt, m.pick(rt)) },
			"rewrite": func(rt *rapid.T) { m.rewrite(rt, m.pick(rt)) },
			"expire":  func(rt *rapid.T) { m.expire(rt, m.pick(rt)) },
			"cleanup": func(rt *rapid.T) { m.pick(rt).view.cleanup() },
			"orphans": func(rt *rapid.T) { deleteOrphans(m.pick(rt).view) },
			"fork": func(rt *rapid.T) {
				if len(m.sides) >= 4 {
					rt.Skip("enough branches")
				}
				if kind := rapid.IntRange(0, 4).Draw(rt, "kind"); kind < 4 {
					m.fork(rt, kind)
				} else {
					n = m.forkInsertMerge(rt, n)
				}
			},
			"mergeBranch": func(rt *rapid.T) {
				var w []int
				for i, s := range m.sides[1:] {
					if s.branch.writable {
						w = append(w, i+1)
					}
				}
				if len(w) == 0 {
					rt.Skip("no writable branch")
				}
				m.mergeBranch(rt, rapid.SampledFrom(w).Draw(rt, "branch"))
			},
			"drop": func(rt *rapid.T) {
				if len(m.sides) == 1 {
					rt.Skip("no branch")
				}
				m.drop(rapid.IntRange(1, len(m.sides)-1).Draw(rt, "branch"))
			},
			"writeReadOnly": func(rt *rapid.T) {
				var ro []*side
				for _, s := range m.sides[1:] {
					if !s.branch.writable {
						ro = append(ro, s)
					}
				}
				if len(ro) == 0 {
					rt.Skip("no read-only branch")
				}
				s := rapid.SampledFrom(ro).Draw(rt, "branch")
				err := s.view.tryCommit(func(sn snap) []string { return []string{snapshotSQL(sn, sn.nextFile)} })
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "25006" {
					rt.Fatalf("a commit on read-only branch %s: %v, want 25006", s.name, err)
				}
			},
			"": func(rt *rapid.T) { m.check(rt) },
		})
		sameLoad(t, l, m.names()...)
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
	created  int64 // the snapshot that created m
	admin    *pgconn.PgConn
	sides    []*side // the lake first, then the live branches
	forks    int
	outcomes map[string]int // "merge refused", "expire done", …
}

func (m *branchModel) names() []string {
	out := make([]string, len(m.sides))
	for i, s := range m.sides {
		out[i] = s.name
	}
	return out
}

// pick draws the side a step writes: the lake or a writable branch.
func (m *branchModel) pick(rt *rapid.T) *side {
	w := []*side{m.sides[0]}
	for _, s := range m.sides[1:] {
		if s.branch.writable {
			w = append(w, s)
		}
	}
	return rapid.SampledFrom(w).Draw(rt, "side")
}

// refusers names who refuses a maintenance commit of s that removes or
// schedules files ids (and, expiring, snapshots victims): on the lake, the
// branches that read any of them (or were forked at a victim); on a
// branch, the branch itself if any of them is one it inherited.
func (m *branchModel) refusers(s *side, ids, victims []int64) []string {
	var out []string
	if s.branch != nil {
		for _, id := range ids {
			if id < s.branch.nextFile {
				return []string{s.name}
			}
		}
		return nil
	}
	for _, b := range m.sides[1:] {
		reads := slices.Contains(victims, b.branch.fork)
		for _, id := range ids {
			reads = reads || b.branch.files[id]
		}
		if reads {
			out = append(out, b.name)
		}
	}
	return out
}

func fileWithoutDeletes(rt *rapid.T, v *lake) (catFile, bool) {
	files, dels := v.live()
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

// expectRefusal checks that a maintenance commit failed (55006) exactly
// when the model says it must.
func (m *branchModel) expectRefusal(rt *rapid.T, what string, err error, refusers []string) {
	outcome := strings.Fields(what)[0] + " done"
	if err != nil {
		outcome = strings.Fields(what)[0] + " refused"
	}
	m.outcomes[outcome]++
	if len(refusers) == 0 {
		if err != nil {
			rt.Fatalf("%s, which no branch reads: %v", what, err)
		}
		return
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55006" {
		rt.Fatalf("%s, refused by %v: %v, want 55006", what, refusers, err)
	}
}

// merge is merge_adjacent_files over two or more live files without
// deletes, adjacent in row ids.
func (m *branchModel) merge(rt *rapid.T, s *side) {
	v := s.view
	files, dels := v.live()
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
	err := v.tryCommit(v.adjacentMerge(srcs))
	m.expectRefusal(rt, fmt.Sprintf("merging files %v on %s", ids, s.name), err, m.refusers(s, ids, nil))
}

// rewrite is rewrite_data_files over one live file with a live delete
// file: the survivors in a new file, the source and its delete file
// ended (not removed: that is expire's).
func (m *branchModel) rewrite(rt *rapid.T, s *side) {
	v := s.view
	files, dels := v.live()
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
	for _, p := range readDeletes(v.t, v.local(d.path)) {
		deleted[p.pos] = true
	}
	if len(deleted) == int(f.records) {
		rt.Skip("every row deleted: nothing to rewrite")
	}
	v.commit(func(sn snap) []string {
		c := sn.id + 1
		var rows []dataRow
		for pos, r := range readData(v.t, v.local(f.path)) {
			if !deleted[int64(pos)] {
				rows = append(rows, dataRow{id: r.id, rowID: f.rowIDStart + int64(pos), hasRowID: true})
			}
		}
		path := fmt.Sprintf("ducklake-rewritten-%d.parquet", sn.nextFile)
		n := writeData(v.t, v.local(path), rows, true, false)
		records, next, size, _ := v.tableStats()
		stmts := []string{snapshotSQL(sn, sn.nextFile+1)}
		stmts = append(stmts, v.fileSQL(sn.nextFile, c, path, rows, n, 0, false, 0, false)...)
		return append(stmts,
			fmt.Sprintf("UPDATE %s.ducklake_delete_file SET end_snapshot = %d WHERE delete_file_id = %d", q, c, d.id),
			fmt.Sprintf("UPDATE %s.ducklake_data_file SET end_snapshot = %d WHERE data_file_id = %d", q, c, f.id),
			fmt.Sprintf("UPDATE %s.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d", q, records-int64(len(deleted)), size, next, v.table),
			changesSQL(c, fmt.Sprintf("rewrite_delete:%d", v.table)))
	})
}

// expire is expire_snapshots of the snapshots older than a random cutoff,
// or of a random set of them (never the newest).
func (m *branchModel) expire(rt *rapid.T, s *side) {
	v := s.view
	last := v.latest().id
	var retained []int64
	for _, r := range v.scan("ducklake_snapshot", "snapshot_id") {
		if id, _ := i8(r[0]); id != last {
			retained = append(retained, id)
		}
	}
	if len(retained) == 0 {
		rt.Skip("only the newest snapshot")
	}
	sort.Slice(retained, func(i, j int) bool { return retained[i] < retained[j] })
	// expire_snapshots(older_than => …) or (versions => [...]).
	victims := retained[:rapid.IntRange(1, len(retained)).Draw(rt, "expired")]
	if rapid.Bool().Draw(rt, "byVersion") {
		victims = rapid.SliceOfNDistinct(rapid.SampledFrom(retained), 1, len(retained), rapid.ID[int64]).Draw(rt, "versions")
		slices.Sort(victims)
	}
	purged, err := v.tryExpire(victims...)
	m.expectRefusal(rt, fmt.Sprintf("expiring %v (purging %v) on %s", victims, purged, s.name), err, m.refusers(s, purged, victims))
}

// deleteOrphans is delete_orphaned_files(cleanup_all => true) on v: every
// Parquet file under its data path that no data-file, delete-file or
// schedule row of its catalog names goes.
func deleteOrphans(v *lake) {
	known := map[string]bool{}
	for _, table := range []string{"ducklake_data_file", "ducklake_delete_file"} {
		for _, r := range v.scan(table, "path") {
			known[v.local(string(r[0]))] = true // every table's directory is m's
		}
	}
	for _, r := range v.scan("ducklake_files_scheduled_for_deletion", "path") {
		known[filepath.Join(v.data, string(r[0]))] = true
	}
	err := filepath.WalkDir(v.data, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") || known[p] {
			return err
		}
		return os.Remove(p)
	})
	if err != nil {
		v.t.Fatal(err)
	}
}

// fork creates a branch of the lake — kind 0 read-only, 1 writable, 2 at a
// retained earlier snapshot (read-only or writable), 3 writable from a
// read-only branch (a tag) — and records what it reads.
func (m *branchModel) fork(rt *rapid.T, kind int) {
	if kind == 3 {
		var tags []*side
		for _, s := range m.sides[1:] {
			if s.branch.dump != nil {
				tags = append(tags, s)
			}
		}
		if len(tags) == 0 {
			rt.Skip("no tag to fork")
		}
		m.forkTag(rt, rapid.SampledFrom(tags).Draw(rt, "tag"))
		return
	}
	m.forks++
	name := fmt.Sprintf("b%d", m.forks)
	view := *m.l
	latest := m.l.latest()
	at := latest.id
	writable := kind == 1
	sql := "CREATE DATABASE " + name + " TEMPLATE lake"
	switch kind {
	case 1:
		view.data = m.l.t.TempDir()
		sql += " LOCATION '" + view.data + "/'"
	case 2:
		var retained []int64
		for _, r := range m.l.scan("ducklake_snapshot", "snapshot_id") {
			sn, _ := i8(r[0])
			retained = append(retained, sn)
		}
		if writable = rapid.Bool().Draw(rt, "writable"); writable {
			// Writes go to m: a writable branch starts where m exists.
			retained = slices.DeleteFunc(retained, func(sn int64) bool { return sn < m.created })
			if len(retained) == 0 {
				rt.Skip("m's snapshot is expired")
			}
		}
		at = rapid.SampledFrom(retained).Draw(rt, "at")
		sql += fmt.Sprintf(" AT_SNAPSHOT %d", at)
		if writable {
			view.data = m.l.t.TempDir()
			sql += " LOCATION '" + view.data + "/'"
		}
	}
	if _, err := m.admin.Exec(m.l.ctx, sql).ReadAll(); err != nil {
		if kind == 2 && writable && pgCode(err) == "0A000" {
			// The lake compacted, since that snapshot, files it saw.
			m.outcomes["writable fork at an earlier snapshot refused"]++
			return
		}
		m.rt.Fatalf("fork: %v", err)
	}
	view.conn = m.l.connectTo(name)
	// It inherits the files below the lake's next_file_id that it holds;
	// its row ids continue from the lake's next_row_id (a branch at an
	// earlier snapshot keeps the lake's newest).
	_, nextRow, _, _ := view.tableStats()
	b := &modelBranch{fork: at, nextFile: latest.nextFile, files: map[int64]bool{}, writable: writable, nextRow: nextRow}
	s := &side{name: name, view: &view, rows: map[int64]map[int64]int64{}, branch: b}
	for _, r := range m.l.scan("ducklake_snapshot", "snapshot_id") {
		if sn, _ := i8(r[0]); sn <= at {
			s.rows[sn] = m.l.rows(sn)
		}
	}
	if got := view.latest().id; got != at {
		rt.Fatalf("branch %s's newest snapshot is %d, want %d", name, got, at)
	}
	for _, f := range view.dataFiles() {
		if f.id < b.nextFile {
			b.files[f.id] = true
		}
	}
	for _, d := range view.deleteFiles() {
		if d.id < b.nextFile {
			b.files[d.id] = true
		}
	}
	if kind == 0 {
		b.dump = m.dump(m.l.conn)
	}
	if kind == 2 {
		s.want = copyWant(m.sides[0].history[at])
	} else {
		s.want = copyWant(m.sides[0].want)
	}
	b.forkWant = copyWant(s.want)
	m.sides = append(m.sides, s)
}

// forkTag forks tag, a read-only branch, into a writable branch: it
// starts as the tag reads the lake.
func (m *branchModel) forkTag(rt *rapid.T, tag *side) {
	m.forks++
	name := fmt.Sprintf("b%d", m.forks)
	view := *m.l
	view.data = m.l.t.TempDir()
	if _, err := m.admin.Exec(m.l.ctx, "CREATE DATABASE "+name+" TEMPLATE "+tag.name+" LOCATION '"+view.data+"/'").ReadAll(); err != nil {
		rt.Fatalf("fork of tag %s: %v", tag.name, err)
	}
	view.conn = m.l.connectTo(name)
	t := tag.branch
	b := &modelBranch{fork: t.fork, nextFile: t.nextFile, files: t.files, writable: true, nextRow: t.nextRow, forkWant: copyWant(tag.want)}
	s := &side{name: name, view: &view, rows: map[int64]map[int64]int64{}, branch: b, want: copyWant(tag.want)}
	for sn, rows := range tag.rows {
		s.rows[sn] = rows
	}
	if got := view.latest().id; got != t.fork {
		rt.Fatalf("branch %s of tag %s starts at snapshot %d, want %d", name, tag.name, got, t.fork)
	}
	m.sides = append(m.sides, s)
}

func (m *branchModel) drop(i int) {
	s := m.sides[i]
	if _, err := m.admin.Exec(m.l.ctx, "DROP DATABASE "+s.name+" WITH (FORCE)").ReadAll(); err != nil {
		m.rt.Fatalf("drop %s: %v", s.name, err)
	}
	m.sides = slices.Delete(m.sides, i, i+1)
}

// forkInsertMerge forks a writable branch, appends on it and on the lake,
// and merges it: appends on both sides never conflict, so whatever the
// lake went through before, the merge must go through. n is the last row
// value used; it returns the new last.
func (m *branchModel) forkInsertMerge(rt *rapid.T, n int) int {
	m.fork(rt, 1)
	b := m.sides[len(m.sides)-1]
	for _, v := range []*side{b, m.sides[0]} {
		for j := rapid.IntRange(0, 2).Draw(rt, "inserts"); j > 0; j-- {
			n++
			v.insert(int64(n))
		}
	}
	if b.view.latest().id == b.branch.fork {
		n++
		b.insert(int64(n))
	}
	if !m.mergeBranch(rt, len(m.sides)-1) {
		rt.Fatalf("a merge of appends onto appends was refused")
	}
	return n
}

// mergeBranch merges the writable branch m.sides[i] into the lake. It may
// be refused (a conflict, 40001; or what a merge does not carry, 0A000),
// and then nothing changes on either side. Merged, the lake has one new
// snapshot per branch snapshot since the fork, each reading the lake's
// rows before the merge less the rows the branch had deleted by then, plus
// the branch's new rows under row ids moved past those the lake allocated
// since the fork; and the branch is gone.
func (m *branchModel) mergeBranch(rt *rapid.T, i int) (merged bool) {
	s, b := m.sides[i], m.sides[i].branch
	last := s.view.latest().id
	branchAt := map[int64]map[int64]int64{}
	for sn := b.fork + 1; sn <= last; sn++ {
		branchAt[sn] = s.view.rows(sn)
	}
	forkRows := s.rows[b.fork]
	before := m.l.latest().id
	lakeBefore := m.l.rows(before)
	_, lakeNext, _, _ := m.l.tableStats()
	s.view.conn.Close(m.l.ctx)
	_, err := m.admin.Exec(m.l.ctx, "ALTER DATABASE "+s.name+" MERGE_INTO lake").ReadAll()
	if err != nil {
		if c := pgCode(err); c != "40001" && c != "0A000" && c != "55000" {
			rt.Fatalf("merge %s: %v, want merged or refused (40001, 0A000, 55000)", s.name, err)
		}
		m.outcomes["merge refused "+pgCode(err)]++
		if got := m.l.latest().id; got != before {
			rt.Fatalf("a refused merge of %s moved the lake from %d to %d", s.name, before, got)
		}
		s.view.conn = m.l.connectTo(s.name)
		return false
	}
	m.outcomes["merge done"]++
	if got := m.l.latest().id; got != before+last-b.fork {
		rt.Fatalf("the merge of %s's %d snapshots made the lake's head %d, want %d", s.name, last-b.fork, got, before+last-b.fork)
	}
	for sn := b.fork + 1; sn <= last; sn++ {
		want := mergedRows(lakeBefore, forkRows, branchAt[sn], b.nextRow, lakeNext)
		at := before + sn - b.fork
		if got := m.l.rows(at); fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("the lake at %d (%s's snapshot %d merged) reads %v, want %v", at, s.name, sn, got, want)
		}
	}
	// The oracle: the lake's values, less what the branch deleted of
	// what it forked with, plus what it added.
	lake := m.sides[0]
	if lake.want != nil && s.want != nil && b.forkWant != nil {
		for v := range b.forkWant {
			if !s.want[v] {
				delete(lake.want, v)
			}
		}
		for v := range s.want {
			if !b.forkWant[v] {
				lake.want[v] = true
			}
		}
	} else {
		lake.want = nil
	}
	m.sides = slices.Delete(m.sides, i, i+1)
	return true
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
	for _, s := range m.sides {
		v := s.view
		for _, f := range v.dataFiles() {
			if _, err := os.Stat(v.local(f.path)); err != nil {
				rt.Fatalf("%s references data file %d (%s), which is gone: %v", s.name, f.id, f.path, err)
			}
		}
		for _, d := range v.deleteFiles() {
			if _, err := os.Stat(v.local(d.path)); err != nil {
				rt.Fatalf("%s references delete file %d (%s), which is gone: %v", s.name, d.id, d.path, err)
			}
		}
		if b := s.branch; b != nil && b.dump != nil {
			got := m.dump(v.conn)
			for name, want := range b.dump {
				if got[name] != want {
					rt.Fatalf("read-only branch %s: table %s differs from the lake's at the fork", s.name, name)
				}
			}
			if len(got) != len(b.dump) {
				rt.Fatalf("read-only branch %s: %d tables, %d at the fork", s.name, len(got), len(b.dump))
			}
		}
		for _, r := range v.scan("ducklake_snapshot", "snapshot_id") {
			sn, _ := i8(r[0])
			got := v.rows(sn)
			want, seen := s.rows[sn]
			if !seen {
				s.rows[sn] = got
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				rt.Fatalf("%s at snapshot %d reads %v, read %v before", s.name, sn, got, want)
			}
		}
	}
	for _, s := range m.sides {
		if s.want == nil {
			continue
		}
		head := s.view.latest().id
		got := map[int64]bool{}
		for _, v := range s.view.rows(head) {
			got[v] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			rt.Fatalf("%s reads %v at its head %d; its commits alone make it %v", s.name, sortedVals(got), head, sortedVals(s.want))
		}
		if s.history != nil {
			if _, ok := s.history[head]; !ok {
				s.history[head] = copyWant(s.want)
			}
		}
	}
	m.l.verify("model step")
}

func sortedVals(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
