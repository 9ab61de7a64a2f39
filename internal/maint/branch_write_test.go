package maint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/server"
)

// connectTo opens a connection to database db of l's server, closed when
// l's test ends.
func (l *lake) connectTo(db string) *pgconn.PgConn {
	l.t.Helper()
	c, err := pgconn.Connect(l.ctx, "postgres://moraine@"+l.conn.Conn().RemoteAddr().String()+"/"+db+"?sslmode=disable")
	if err != nil {
		l.t.Fatalf("connect %s: %v", db, err)
	}
	l.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// admin runs sql on the maintenance database of l's server.
func (l *lake) admin(sql string) error {
	_, err := l.adminNotices(sql)
	return err
}

// adminNotices is admin, returning the notices the server sent.
func (l *lake) adminNotices(sql string) ([]string, error) {
	cfg, err := pgconn.ParseConfig("postgres://moraine@" + l.conn.Conn().RemoteAddr().String() + "/postgres?sslmode=disable")
	if err != nil {
		return nil, err
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	c, err := pgconn.ConnectConfig(l.ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(l.ctx, sql).ReadAll()
	return notices, err
}

// viewOf is the harness on database db of l's server, its data path data
// (l's when empty).
func (l *lake) viewOf(db, data string) *lake {
	v := *l
	v.conn = l.connectTo(db)
	if data != "" {
		v.data = data
	}
	return &v
}

// branchOf forks l into a writable branch called name whose data path is
// a fresh directory, and returns the harness reading and writing it.
func branchOf(t *testing.T, l *lake, name string) *lake {
	t.Helper()
	dir := t.TempDir()
	if err := l.admin("CREATE DATABASE " + name + " TEMPLATE lake LOCATION '" + dir + "/'"); err != nil {
		t.Fatalf("fork: %v", err)
	}
	return l.viewOf(name, dir)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestWritableBranch: a branch forked with a data path of its own takes
// DuckLake's commits — inserts, deletes on the files it inherited, a merge
// of its own files, expiry and cleanup — writing only under its data path,
// reading its inherited files where the lake wrote them; the lake does not
// see its writes nor the branch the lake's; and the branch may not remove
// what it inherited.
func TestWritableBranch(t *testing.T) {
	l := newLake(t)
	_, f1 := l.insert(1, 2, 3)
	l.insert(4, 5)
	lakeRows := l.rows(l.latest().id)
	b := branchOf(t, l, "dev")

	if got := b.scan("ducklake_metadata", "key", "value"); !strings.Contains(strings.Join(flat(got), " "), b.data) {
		t.Fatalf("the branch's data_path is not its own: %q", flat(got))
	}
	for _, f := range b.dataFiles() {
		if !filepath.IsAbs(f.path) || !strings.HasPrefix(f.path, l.data) {
			t.Fatalf("the branch is served inherited file %d as %q, want an absolute path in %s", f.id, f.path, l.data)
		}
	}
	sameRows(t, "the branch at the fork", b.rows(b.latest().id), lakeRows)

	// The branch writes.
	bs, bf := b.insert(10, 11)
	if _, err := os.Stat(filepath.Join(b.data, "main", "m", fmt.Sprintf("ducklake-ins-%d.parquet", bf))); err != nil {
		t.Fatalf("the branch's file is not under its data path: %v", err)
	}
	want := map[int64]int64{}
	for k, v := range lakeRows {
		want[k] = v
	}
	n := int64(len(lakeRows))
	want[n], want[n+1] = 10, 11
	sameRows(t, "the branch after its insert", b.rows(bs), want)
	sameRows(t, "the lake after the branch's insert", l.rows(l.latest().id), lakeRows)

	// The lake writes; the branch does not see it.
	l.insert(20)
	sameRows(t, "the branch after the lake's insert", b.rows(b.latest().id), want)

	// A delete on a file the branch inherited: its delete file is the
	// branch's, the data file stays the lake's.
	var inherited catFile
	for _, f := range b.dataFiles() {
		if f.id == f1 {
			inherited = f
		}
	}
	ds, _ := b.deleteRows(inherited, 0)
	delete(want, inherited.rowIDStart)
	sameRows(t, "the branch after deleting a row of an inherited file", b.rows(ds), want)

	// A merge of files the lake wrote is refused.
	var inh []catFile
	for _, f := range b.dataFiles() {
		if f.id < f1+2 && f.end == nil {
			inh = append(inh, f)
		}
	}
	err := b.tryCommit(func(s snap) []string {
		rows := b.mergeRows(inh)
		path := "ducklake-merged-inherited.parquet"
		n := writeData(t, b.local(path), rows, false, true)
		return b.mergeSQL(s, inh, path, rows, n, inh[0].rowIDStart, true)
	})
	if pgCode(err) != "55006" {
		t.Fatalf("a merge of inherited files on the branch: %v, want 55006", err)
	}
	// A merge of its own files is the branch's business; so are their
	// cleanup and the expiry of snapshots it inherited when that purges
	// nothing the lake wrote.
	b.insert(12)
	var own []catFile
	for _, f := range b.dataFiles() {
		if f.id >= bf && f.end == nil {
			own = append(own, f)
		}
	}
	if len(own) != 2 {
		t.Fatalf("the branch's own live files: %+v", own)
	}
	b.compact(own)
	removed := b.cleanup()
	if len(removed) != 2 || !strings.HasPrefix(removed[0], b.data) {
		t.Fatalf("the branch's cleanup removed %v, want its two merged sources under %s", removed, b.data)
	}
	if purged, err := b.tryExpire(0); err != nil || len(purged) != 0 {
		t.Fatalf("expiring the inherited snapshot 0 on the branch: purged %v, %v", purged, err)
	}
	for _, f := range l.dataFiles() {
		if _, err := os.Stat(l.local(f.path)); err != nil {
			t.Fatalf("the lake's file %d is gone: %v", f.id, err)
		}
	}
	if got := len(l.scan("ducklake_snapshot", "snapshot_id")); got < 5 {
		t.Fatalf("the lake lost snapshots to the branch's expiry: %d left", got)
	}
	b.verify("after the branch's writes")
	l.verify("after the branch's writes")

	// A load of the store (a replica opening) reads the branch exactly as
	// the writer holds it: the lake's keys at the fork under the branch's
	// own, hidden where it deleted.
	sameLoad(t, l, "dev", "lake")

	// Dropped, the branch leaves its files to the lake's schedule, and the
	// lake's own cleanup deletes them: all but the file of the merge that
	// never committed (delete_orphaned_files on the branch was for that).
	b.conn.Close(l.ctx)
	if err := l.admin("DROP DATABASE dev WITH (FORCE)"); err != nil {
		t.Fatalf("drop the branch: %v", err)
	}
	removed = l.cleanup()
	for _, p := range removed {
		if !strings.HasPrefix(p, b.data) {
			t.Fatalf("the lake's cleanup after the drop removed %s, not the branch's", p)
		}
	}
	left, err := filepath.Glob(filepath.Join(b.data, "main", "m", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || filepath.Base(left[0]) != "ducklake-merged-inherited.parquet" || len(removed) != 2 {
		t.Fatalf("after the drop and the lake's cleanup (which removed %v) the branch's data path holds %v", removed, left)
	}
	for _, f := range l.dataFiles() {
		if _, err := os.Stat(l.local(f.path)); err != nil {
			t.Fatalf("the lake's file %d is gone: %v", f.id, err)
		}
	}
	l.verify("after the branch's drop and the lake's cleanup")
}

// sameLoad fails t unless a fresh load of l's store holds each database of
// dbs row for row as l's server does.
func sameLoad(t *testing.T, l *lake, dbs ...string) {
	t.Helper()
	st, err := server.OpenStackOn(l.ctx, l.st.Store, server.StackOptions{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.KV.Close(context.Background())
	rows := func(cat *catalog.Server, name string) map[string][]string {
		db, ok := cat.Lookup(name)
		if !ok {
			t.Fatalf("no database %s", name)
		}
		out := map[string][]string{}
		for name, rs := range commit.StoredOf(db.Current(), name, "public").Rows {
			for _, r := range rs {
				out[name] = append(out[name], string(r))
			}
			sort.Strings(out[name])
		}
		return out
	}
	for _, name := range dbs {
		want, got := rows(l.st.Cat, name), rows(st.Cat, name)
		for table, w := range want {
			if fmt.Sprint(got[table]) != fmt.Sprint(w) {
				t.Fatalf("%s.%s: a load of the store holds %d rows, the server %d", name, table, len(got[table]), len(w))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: a load of the store holds %d tables, the server %d", name, len(got), len(want))
		}
	}
}

func flat(rows [][][]byte) []string {
	var out []string
	for _, r := range rows {
		for _, c := range r {
			out = append(out, string(c))
		}
	}
	return out
}

// TestBranchAtEarlierSnapshot: a branch forked at an earlier snapshot of
// the lake reads, through DuckLake's own reads, the lake as that snapshot
// did — the later snapshots hidden, every table read as of it — from the
// lake's files; the lake keeps that snapshot and what it sees.
func TestBranchAtEarlierSnapshot(t *testing.T) {
	l := newLake(t)
	s1, _ := l.insert(1, 2, 3)
	files, _ := l.live()
	l.insert(4, 5)
	l.deleteRows(files[0], 1)
	head := l.latest().id
	want := l.rows(s1)

	exec := l.admin
	if err := exec(fmt.Sprintf("CREATE DATABASE old TEMPLATE lake AT_SNAPSHOT %d", head+5)); pgCode(err) != "22023" {
		t.Fatalf("a fork at a snapshot the lake does not have: %v, want 22023", err)
	}
	if err := exec(fmt.Sprintf("CREATE DATABASE old TEMPLATE lake AT_SNAPSHOT %d", s1)); err != nil {
		t.Fatalf("fork at snapshot %d: %v", s1, err)
	}
	o := l.viewOf("old", "")
	if got := o.latest().id; got != s1 {
		t.Fatalf("the branch's newest snapshot is %d, want %d", got, s1)
	}
	sameRows(t, "the branch at its snapshot", o.rows(o.latest().id), want)
	if n := len(o.scan("ducklake_snapshot_changes", "snapshot_id")); n != int(s1)+1 {
		t.Fatalf("the branch shows %d snapshot changes, want %d", n, s1+1)
	}
	if err := o.tryCommit(func(s snap) []string { return []string{snapshotSQL(s, s.nextFile)} }); pgCode(err) != "25006" {
		t.Fatalf("a commit on the branch: %v, want 25006", err)
	}
	if _, err := l.tryExpire(s1); pgCode(err) != "55006" {
		t.Fatalf("expiring the branch's snapshot on the lake: %v, want 55006", err)
	}
	var desc string
	res, err := l.connectTo("postgres").Exec(l.ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = 'old'").ReadAll()
	if err == nil && len(res[0].Rows) == 1 {
		desc = string(res[0].Rows[0][0])
	}
	if want := fmt.Sprintf("branch of lake at snapshot %d (read-only)", s1); desc != want {
		t.Fatalf("\\l+ describes the branch as %q, want %q", desc, want)
	}
	l.verify("with a branch at an earlier snapshot")
	sameLoad(t, l, "old", "lake")
}

// TestBranchOfATag: a read-only branch is a tag of the lake; a writable
// branch forked from it reads the lake where the tag does, and keeps
// reading there once the tag is dropped and the store compacted, with the
// lake's commits in between.
func TestBranchOfATag(t *testing.T) {
	l := newLake(t)
	l.must("INSERT INTO public.ducklake_metadata (key, value) VALUES ('tag_test', 'before')")
	tagged, _ := l.insert(1, 2, 3)
	want := l.rows(tagged)
	exec := l.admin
	if err := exec("CREATE DATABASE tag TEMPLATE lake"); err != nil {
		t.Fatal(err)
	}
	l.insert(4, 5) // the lake moves on, and changes a row the branch reads
	l.must("UPDATE public.ducklake_metadata SET value = 'after' WHERE key = 'tag_test'")
	dir := t.TempDir()
	if err := exec("CREATE DATABASE dev TEMPLATE tag LOCATION '" + dir + "/'"); err != nil {
		t.Fatalf("a writable branch of the tag: %v", err)
	}
	if err := exec("DROP DATABASE tag"); err != nil {
		t.Fatalf("drop the tag: %v", err)
	}
	b := l.viewOf("dev", dir)
	if got := b.latest().id; got != tagged {
		t.Fatalf("the branch of the tag starts at snapshot %d, want %d", got, tagged)
	}
	sameRows(t, "the branch of the tag", b.rows(tagged), want)
	s, _ := b.insert(10)
	want[int64(len(want))] = 10
	sameRows(t, "the branch of the tag after its insert", b.rows(s), want)
	l.insert(6)
	if err := l.st.KV.Rewrite(l.ctx); err != nil {
		t.Fatal(err)
	}
	b.verify("a branch of a dropped tag")
	sameLoad(t, l, "dev", "lake")
	if got := flat(b.scan("ducklake_metadata", "key", "value")); !strings.Contains(strings.Join(got, " "), "tag_test before") {
		t.Fatalf("the branch of the tag reads the lake's later metadata: %v", got)
	}
}
