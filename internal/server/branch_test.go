package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/workload"
)

// dumpDB is every table of database db's public schema as its rows in
// COPY's text form, sorted (a load lays rows out in key order, not in the
// order they were written), by table name: what a client reads of the
// catalog.
func dumpDB(t *testing.T, ctx context.Context, conninfo string) map[string]string {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, row := range res[0].Rows {
		name := string(row[0])
		var b bytes.Buffer
		if _, err := c.CopyTo(ctx, &b, fmt.Sprintf(`COPY (SELECT * FROM "public".%q) TO STDOUT`, name)); err != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
		lines := strings.Split(b.String(), "\n")
		sort.Strings(lines)
		out[name] = strings.Join(lines, "\n")
	}
	if len(out) < 20 {
		t.Fatalf("%d tables in %s: not a DuckLake catalog", len(out), conninfo)
	}
	return out
}

// sameTables fails t unless two dumps hold the same tables with the same
// rows.
func sameTables(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	if diff := differingKeys(want, got); len(diff) > 0 {
		t.Fatalf("%s: tables differ: %v", what, diff)
	}
}

// execErr runs sql on conninfo and returns the server's error, if any.
func execErr(ctx context.Context, conninfo, sql string) error {
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql).ReadAll()
	return err
}

// wantCode fails t unless err is a server error with SQLSTATE code whose
// message contains text.
func wantCode(t *testing.T, what string, err error, code, text string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, text) {
		t.Fatalf("%s: got %v, want SQLSTATE %s mentioning %q", what, err, code, text)
	}
}

// queryOne runs a query returning one value.
func queryOne(t *testing.T, ctx context.Context, conninfo, sql string) string {
	t.Helper()
	rows := queryAll(t, ctx, conninfo, sql)
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows", sql, len(rows))
	}
	return string(rows[0][0])
}

// queryAll is the rows sql returns (one statement), as text.
func queryAll(t *testing.T, ctx context.Context, conninfo, sql string) [][][]byte {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(res) != 1 {
		t.Fatalf("%s: %d results", sql, len(res))
	}
	return res[0].Rows
}

// TestBranch forks a lake DuckLake built (the captured commit mix) and
// checks what a branch promises: it reads the lake as it was at the fork,
// whatever the lake commits afterwards and across a restart after the
// store was compacted down to one version per key; it refuses writes; the
// lake can neither expire the fork's snapshot nor delete or schedule a file
// the branch reads, nor be dropped under it; a replica follows the fork;
// a backup holds the branch; and dropping the branch releases all of it.
func TestBranch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	store := "file://" + dir
	w := start(t, store, "--row-id-hold=false")
	stopped := false
	defer func() {
		if !stopped {
			w.Stop(t)
		}
	}()
	replica, err := OpenStack(ctx, store, StackOptions{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(context.Background())

	tr, err := replay.LoadFixture("s11_commit_mix")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&replay.Fresh{Admin: w.Conninfo("postgres")}).Prepare(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if res := replay.Replay(ctx, tr, replay.Options{Addr: w.Addr, Timeout: 30 * time.Second}); !res.Passed() {
		t.Fatalf("replay: %v", res.Err)
	}
	lake := tr.Databases()[0]
	admin := w.Conninfo("postgres")
	// A row the lake changes after the fork: the store then holds two
	// versions of its key, and only the pin keeps the branch's.
	if err := execErr(ctx, w.Conninfo(lake), "INSERT INTO public.ducklake_metadata (key, value) VALUES ('branch_test', 'before')"); err != nil {
		t.Fatalf("commit on the lake: %v", err)
	}
	atFork := dumpDB(t, ctx, w.Conninfo(lake))
	head := queryOne(t, ctx, w.Conninfo(lake), "SELECT max(snapshot_id) FROM public.ducklake_snapshot")

	if err := execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE "+lake); err != nil {
		t.Fatalf("fork: %v", err)
	}
	wantCode(t, "fork onto an existing name", execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE "+lake), "42P04", `"dev" already exists`)
	wantCode(t, "fork of a missing database", execErr(ctx, admin, "CREATE DATABASE dev2 TEMPLATE nosuch"), "3D000", `"nosuch" does not exist`)
	sameTables(t, "the branch at the fork", atFork, dumpDB(t, ctx, w.Conninfo("dev")))
	// A fork of the read-only branch reads the lake where it does.
	if err := execErr(ctx, admin, "CREATE DATABASE dev2 TEMPLATE dev"); err != nil {
		t.Fatalf("fork of the branch: %v", err)
	}
	sameTables(t, "a branch of the branch", atFork, dumpDB(t, ctx, w.Conninfo("dev2")))
	if err := execErr(ctx, admin, "DROP DATABASE dev2"); err != nil {
		t.Fatal(err)
	}
	desc := queryOne(t, ctx, admin, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = 'dev'")
	if want := fmt.Sprintf("branch of %s at snapshot %s (read-only)", lake, head); desc != want {
		t.Fatalf("\\l+ describes the branch as %q, want %q", desc, want)
	}

	// The lake goes on; the branch does not follow.
	if err := execErr(ctx, w.Conninfo(lake), "UPDATE public.ducklake_metadata SET value = 'after' WHERE key = 'branch_test'; INSERT INTO public.ducklake_metadata (key, value) VALUES ('after_fork', '1')"); err != nil {
		t.Fatalf("commit on the lake: %v", err)
	}
	afterFork := dumpDB(t, ctx, w.Conninfo(lake))
	if afterFork["ducklake_metadata"] == atFork["ducklake_metadata"] {
		t.Fatal("the lake's commit changed nothing")
	}
	sameTables(t, "the branch after the lake's commit", atFork, dumpDB(t, ctx, w.Conninfo("dev")))

	wantCode(t, "a write on the branch", execErr(ctx, w.Conninfo("dev"), "INSERT INTO public.ducklake_metadata (key, value) VALUES ('x', '1')"), "25006", "read-only")

	// What the branch reads, the lake keeps.
	wantCode(t, "expiring the fork snapshot", execErr(ctx, w.Conninfo(lake), "DELETE FROM public.ducklake_snapshot WHERE snapshot_id = "+head), "55006", "snapshot "+head)
	c, err := pgconn.Connect(ctx, w.Conninfo("dev"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, "SELECT data_file_id, path FROM public.ducklake_data_file ORDER BY data_file_id LIMIT 1").ReadAll()
	c.Close(context.Background())
	if err != nil || len(res[0].Rows) != 1 {
		t.Fatalf("a file of the branch: %v", err)
	}
	id, path := string(res[0].Rows[0][0]), string(res[0].Rows[0][1])
	wantCode(t, "deleting a file's row", execErr(ctx, w.Conninfo(lake), "DELETE FROM public.ducklake_data_file WHERE data_file_id = "+id), "55006", path)
	wantCode(t, "scheduling a file for deletion", execErr(ctx, w.Conninfo(lake),
		fmt.Sprintf("INSERT INTO public.ducklake_files_scheduled_for_deletion VALUES (%s, '%s', true, now())", id, path)), "55006", path)
	wantCode(t, "dropping the parent", execErr(ctx, admin, "DROP DATABASE "+lake), "2BP01", "other objects depend on it")
	sameTables(t, "the lake after the refusals", afterFork, dumpDB(t, ctx, w.Conninfo(lake)))

	// A replica follows the fork commit by commit.
	if err := replica.KV.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.catchUp(ctx, NewMetrics(), t.Logf); err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, ctx, replica, "dev", lake)

	// moraine inspect lists the branch and what it reads.
	var insp bytes.Buffer
	obj, err := objurl.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	err = Inspect(ctx, obj, &insp)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := insp.String(); !strings.Contains(got, "branch dev") || !strings.Contains(got, "of "+lake) || !strings.Contains(got, "at snapshot "+head) {
		t.Fatalf("inspect lacks the branch of %s at snapshot %s:\n%s", lake, head, got)
	}

	// Compacted down to one version per key but the fork's, the store
	// still loads the branch as it was.
	w.Stop(t)
	stopped = true
	rewriteStore(t, ctx, store)
	w = start(t, store, "--row-id-hold=false")
	stopped = false
	sameTables(t, "the branch after a restart", atFork, dumpDB(t, ctx, w.Conninfo("dev")))
	sameTables(t, "the lake after a restart", afterFork, dumpDB(t, ctx, w.Conninfo(lake)))

	// A backup holds the branch: it is ordinary store contents.
	backup := "file://" + t.TempDir()
	backupStore(t, ctx, store, backup)
	b := start(t, backup, "--row-id-hold=false")
	sameTables(t, "the branch in a backup", atFork, dumpDB(t, ctx, b.Conninfo("dev")))
	b.Stop(t)

	admin = w.Conninfo("postgres")
	if err := execErr(ctx, admin, "DROP DATABASE dev"); err != nil {
		t.Fatalf("drop the branch: %v", err)
	}
	if err := execErr(ctx, w.Conninfo("dev"), "SELECT 1"); err == nil {
		t.Fatal("the dropped branch still accepts connections")
	}
	if err := execErr(ctx, admin, "DROP DATABASE "+lake); err != nil {
		t.Fatalf("drop the lake once its branch is gone: %v", err)
	}
}

// rewriteStore compacts the whole store at url into one version per key
// except those the branch records pin.
func rewriteStore(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	s, err := objurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := slate.Open(ctx, s, slate.Options{GCInterval: -1, PinPrefix: keyspace.BranchPrefix(), PinValue: keyspace.BranchBase})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// backupStore checkpoints the store at url (live) and copies the
// checkpoint to the empty store at to, as moraine backup does.
func backupStore(t *testing.T, ctx context.Context, url, to string) {
	t.Helper()
	src, err := objurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := objurl.Open(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	cp, err := slate.CreateCheckpoint(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slate.CopyCheckpoint(ctx, src, cp.ID, dst, nil); err != nil {
		t.Fatal(err)
	}
}

// sameCatalog fails t unless the replica serves branch as a branch of
// lake, row for row as a fresh load of the store reads it, and without the
// lake's commit after the fork (metadata key after_fork).
func sameCatalog(t *testing.T, ctx context.Context, st *Stack, branch, lake string) {
	t.Helper()
	db, ok := st.Cat.Lookup(branch)
	if !ok || db.Branch() == nil || db.Branch().Parent != lake {
		t.Fatalf("the replica does not serve %s as a branch of %s", branch, lake)
	}
	for _, r := range sameBranchAsStore(t, ctx, st, branch)["ducklake_metadata"] {
		if strings.Contains(r, "after_fork") {
			t.Fatal("the replica's branch holds the lake's commit after the fork")
		}
	}
}

// TestBranchSurvivesPromotion: a replica follows a fork, and once promoted
// serves the branch and keeps guarding what it reads.
func TestBranchSurvivesPromotion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store := "file://" + t.TempDir()
	a := start(t, store)
	cfg := workload.Config{ConnString: a.Conninfo("lake"), Writers: 1, CommitsPerWriter: 5, Tables: 1, Seed: 3}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := workload.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := execErr(ctx, a.Conninfo("postgres"), "CREATE DATABASE dev TEMPLATE lake"); err != nil {
		t.Fatal(err)
	}
	head := queryOne(t, ctx, a.Conninfo("dev"), "SELECT max(snapshot_id) FROM ducklake_snapshot")
	r := start(t, store, "--replica", "--replica-poll", "20ms")
	defer r.Stop(t)
	if got := queryOne(t, ctx, r.Conninfo("dev"), "SELECT max(snapshot_id) FROM ducklake_snapshot"); got != head {
		t.Fatalf("the replica's branch is at snapshot %s, want %s", got, head)
	}
	opened := time.Now()
	if got := queryOne(t, ctx, r.Conninfo("postgres"), "SELECT pg_promote()"); got != "t" {
		t.Fatalf("pg_promote() = %q", got)
	}
	awaitFenced(t, a, "the old writer", opened, time.Minute)
	if got := queryOne(t, ctx, r.Conninfo("dev"), "SELECT max(snapshot_id) FROM ducklake_snapshot"); got != head {
		t.Fatalf("the promoted server's branch is at snapshot %s, want %s", got, head)
	}
	wantCode(t, "a write on the branch after promotion", execErr(ctx, r.Conninfo("dev"), "INSERT INTO ducklake_metadata (key, value) VALUES ('x', '1')"), "25006", "read-only")
	wantCode(t, "expiring the fork after promotion", execErr(ctx, r.Conninfo("lake"), "DELETE FROM ducklake_snapshot WHERE snapshot_id = "+head), "55006", "snapshot "+head)
}

// TestForkUnderConcurrentCommits forks a lake while writers commit to it.
// Each branch holds what its fork read in memory; after a restart the
// store must give back exactly that — no commit of the lake slipped
// between the version a fork read and the record that pins the store.
func TestForkUnderConcurrentCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store := "file://" + t.TempDir()
	w := start(t, store)
	cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 2, CommitsPerWriter: 40, Tables: 2, RetryWait: time.Millisecond, Seed: 5}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ran := workload.Go(ctx, cfg)
	forks := map[string]map[string]string{}
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("b%d", i)
		if err := execErr(ctx, w.Conninfo("postgres"), "CREATE DATABASE "+name+" TEMPLATE lake"); err != nil {
			t.Fatalf("fork %s: %v", name, err)
		}
		forks[name] = dumpDB(t, ctx, w.Conninfo(name))
	}
	if out := <-ran; out.Err != nil {
		t.Fatal(out.Err)
	}
	heads := map[string]bool{}
	for name := range forks {
		heads[queryOne(t, ctx, w.Conninfo(name), "SELECT max(snapshot_id) FROM ducklake_snapshot")] = true
	}
	if len(heads) < 2 {
		t.Fatalf("every fork read the same snapshot (%v): the writers did not run beside them", heads)
	}
	w.Stop(t)
	w = start(t, store)
	for name, want := range forks {
		sameTables(t, name+" after a restart", want, dumpDB(t, ctx, w.Conninfo(name)))
	}
	w.Stop(t)

	// Loaded, a branch shares with its parent every table the parent did
	// not change since the fork, and only those.
	st, err := OpenStack(ctx, store, StackOptions{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	lake, _ := st.Cat.Lookup("lake")
	for name := range forks {
		b, _ := st.Cat.Lookup(name)
		shared := 0
		sc, _ := b.Current().Schema("public")
		for _, tb := range sc.Tables() {
			pt, err := lake.Current().Table("public", tb.Name())
			if err != nil || pt != tb {
				continue
			}
			shared++
		}
		snaps, _ := b.Current().Table("public", "ducklake_snapshot")
		psnaps, _ := lake.Current().Table("public", "ducklake_snapshot")
		if shared == 0 || (snaps == psnaps) != (snaps.Len() == psnaps.Len()) {
			t.Fatalf("%s shares %d tables with lake; its snapshot table (%d rows, lake's %d) shared: %v", name, shared, snaps.Len(), psnaps.Len(), snaps == psnaps)
		}
	}
}

// TestBranchResidentMetrics: a branch's resident rows count only what it
// holds apart from its parent — nothing right after the fork, the tables
// the parent changed since.
func TestBranchResidentMetrics(t *testing.T) {
	r, maddr := startWithMetrics(t, "file://"+t.TempDir())
	defer r.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := workload.Config{ConnString: r.Conninfo("lake"), Writers: 1, CommitsPerWriter: 3, Tables: 1, Seed: 9}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := execErr(ctx, r.Conninfo("postgres"), "CREATE DATABASE dev TEMPLATE lake"); err != nil {
		t.Fatal(err)
	}
	series := func() []string {
		var out []string
		for _, line := range strings.Split(httpGet(t, "http://"+maddr+"/metrics"), "\n") {
			if strings.HasPrefix(line, `moraine_resident_rows{database="dev"`) {
				out = append(out, line)
			}
		}
		return out
	}
	if got := series(); len(got) != 0 {
		t.Fatalf("right after the fork the branch counts rows of its own: %v", got)
	}
	if _, err := workload.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(series(), "\n")
	if !strings.Contains(got, `table="ducklake_snapshot"`) || strings.Contains(got, `table="ducklake_metadata"`) {
		t.Fatalf("after the lake's commits the branch counts:\n%s\nwant its snapshot table, not its metadata", got)
	}
}

// TestWritableBranchOnAReplica: a replica serves a writable branch as the
// writer holds it, following its fork, its commits (whose keys overlay
// what it reads of its parent) and its drop commit by commit; and the
// writer refuses data paths that overlap another lake's.
func TestWritableBranchOnAReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, st := writerAndReplica(t, ctx)
	cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 1, CommitsPerWriter: 3, Tables: 1, Seed: 4}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := workload.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	admin := w.Conninfo("postgres")
	wantCode(t, "a LOCATION inside the lake's data path", execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE lake LOCATION '/lake/workload/dev/'"), "22023", "overlaps")
	wantCode(t, "a LOCATION without a TEMPLATE", execErr(ctx, admin, "CREATE DATABASE dev LOCATION '/elsewhere/'"), "0A000", "TEMPLATE")
	if err := execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE lake LOCATION '/lake/dev/'"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a second branch on the first one's data path", execErr(ctx, admin, "CREATE DATABASE dev2 TEMPLATE lake LOCATION '/lake/dev/more/'"), "22023", "dev.public")
	if got := queryOne(t, ctx, w.Conninfo("dev"), "SELECT value FROM ducklake_metadata WHERE key = 'data_path'"); got != "/lake/dev/" {
		t.Fatalf("the branch's data_path is %q", got)
	}
	if err := execErr(ctx, w.Conninfo("dev"), "INSERT INTO ducklake_metadata (key, value) VALUES ('on_the_branch', '1')"); err != nil {
		t.Fatalf("a write on the writable branch: %v", err)
	}
	// A row whose identity the branch inherited is stored already: the
	// branch's keys are checked against the parent's at the fork.
	dup := execErr(ctx, w.Conninfo("dev"), "INSERT INTO ducklake_metadata (key, value) VALUES ('version', 'again')")
	if dup == nil || !strings.Contains(dup.Error(), "same identity") {
		t.Fatalf("a second row with an inherited identity on the branch: %v", dup)
	}
	m := NewMetrics()
	if err := st.KV.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.catchUp(ctx, m, t.Logf); err != nil {
		t.Fatal(err)
	}
	db, ok := st.Cat.Lookup("dev")
	if !ok || db.Branch() == nil || !db.Branch().Writable() {
		t.Fatal("the replica does not serve dev as a writable branch")
	}
	rows := commit.StoredOf(db.Current(), "dev", "public").Rows["ducklake_metadata"]
	var found, path bool
	for _, r := range rows {
		found = found || strings.Contains(string(r), "on_the_branch")
		path = path || strings.Contains(string(r), "/lake/dev/")
	}
	if !found || !path {
		t.Fatalf("the replica's branch lacks its own writes (on_the_branch %v, data_path %v)", found, path)
	}
	lake, _ := st.Cat.Lookup("lake")
	for _, r := range commit.StoredOf(lake.Current(), "lake", "public").Rows["ducklake_metadata"] {
		if strings.Contains(string(r), "on_the_branch") || strings.Contains(string(r), "/lake/dev/") {
			t.Fatal("the replica's lake holds the branch's writes")
		}
	}
	if n := testutil.ToFloat64(m.ReplicaReloads); n != 0 {
		t.Fatalf("the replica reloaded %v times to follow a writable branch", n)
	}
	sameAsStore(t, ctx, st)
	sameBranchAsStore(t, ctx, st, "dev")

	// The branch's later commits (a delete of an inherited row: a hidden
	// key) and its drop, followed commit by commit too.
	if err := execErr(ctx, w.Conninfo("dev"), "DELETE FROM ducklake_metadata WHERE key = 'created_by'"); err != nil {
		t.Fatal(err)
	}
	if err := st.KV.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.catchUp(ctx, m, t.Logf); err != nil {
		t.Fatal(err)
	}
	sameBranchAsStore(t, ctx, st, "dev")
	if err := execErr(ctx, admin, "DROP DATABASE dev"); err != nil {
		t.Fatal(err)
	}
	if err := st.KV.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.catchUp(ctx, m, t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Cat.Lookup("dev"); ok {
		t.Fatal("the replica still serves the dropped branch")
	}
	sameAsStore(t, ctx, st)
	if n := testutil.ToFloat64(m.ReplicaReloads); n != 0 {
		t.Fatalf("the replica reloaded %v times to follow a writable branch", n)
	}
}

// sameBranchAsStore fails t unless the replica's branch holds, row for
// row, what a fresh load of the store at its seq does, a branch in both;
// it returns the branch's rows, sorted, by table.
func sameBranchAsStore(t *testing.T, ctx context.Context, st *Stack, name string) map[string][]string {
	t.Helper()
	snap, err := st.KV.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	it := snap.ScanPrefix(ctx, nil)
	fresh, err := catalog.Load(ctx, it, catalog.Options{ReadAt: st.readAt})
	it.Close()
	if err != nil {
		t.Fatal(err)
	}
	rows := func(cat *catalog.Server) map[string][]string {
		db, ok := cat.Lookup(name)
		if !ok || db.Branch() == nil {
			t.Fatalf("no branch %s", name)
		}
		out := map[string][]string{}
		for table, rs := range commit.StoredOf(db.Current(), name, "public").Rows {
			for _, r := range rs {
				out[table] = append(out[table], string(r))
			}
			sort.Strings(out[table])
		}
		return out
	}
	got, want := rows(st.Cat), rows(fresh)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		for table := range want {
			if fmt.Sprint(got[table]) != fmt.Sprint(want[table]) {
				t.Fatalf("the replica's branch %s differs from a load of the store in %s: %d rows, want %d", name, table, len(got[table]), len(want[table]))
			}
		}
		t.Fatalf("the replica's branch %s differs from a load of the store", name)
	}
	return got
}

// TestMergeOnAReplica: a merge is one batch — the lake's merge snapshot
// and the branch's erasure — and a replica follows it commit by commit:
// the lake's rows as a fresh load of the store holds them, the branch
// gone, no reload.
func TestMergeOnAReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, st := writerAndReplica(t, ctx)
	cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 1, CommitsPerWriter: 3, Tables: 1, Seed: 4}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := workload.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	admin := w.Conninfo("postgres")
	if err := execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE lake LOCATION '/lake/dev/'"); err != nil {
		t.Fatal(err)
	}
	dev := cfg
	dev.ConnString = w.Conninfo("dev")
	if _, err := workload.Run(ctx, dev); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	catchUp := func() {
		t.Helper()
		if err := st.KV.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.catchUp(ctx, m, t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	// A writable fork at an earlier snapshot: its fork commit rewrites
	// the lake's later rows away on the branch, and the replica follows
	// that too.
	first := queryOne(t, ctx, w.Conninfo("lake"), "SELECT min(snapshot_id) + 1 FROM ducklake_snapshot")
	if err := execErr(ctx, admin, "CREATE DATABASE old TEMPLATE lake LOCATION '/lake/old/' AT_SNAPSHOT "+first); err != nil {
		t.Fatal(err)
	}
	catchUp()
	sameBranchAsStore(t, ctx, st, "old")
	if got := queryOne(t, ctx, w.Conninfo("old"), "SELECT max(snapshot_id) FROM ducklake_snapshot"); got != first {
		t.Fatalf("the branch at snapshot %s reads the head %s", first, got)
	}
	if err := execErr(ctx, admin, "DROP DATABASE old"); err != nil {
		t.Fatal(err)
	}
	catchUp()
	before := queryOne(t, ctx, w.Conninfo("lake"), "SELECT max(snapshot_id) FROM ducklake_snapshot")
	if err := execErr(ctx, admin, "ALTER DATABASE dev MERGE_INTO lake"); err != nil {
		t.Fatal(err)
	}
	after := queryOne(t, ctx, w.Conninfo("lake"), "SELECT max(snapshot_id) FROM ducklake_snapshot")
	if after == before {
		t.Fatalf("the merge made no snapshot (head %s)", after)
	}
	catchUp()
	if _, ok := st.Cat.Lookup("dev"); ok {
		t.Fatal("the replica still serves the merged branch")
	}
	lake, _ := st.Cat.Lookup("lake")
	found := false
	for _, r := range commit.StoredOf(lake.Current(), "lake", "public").Rows["ducklake_data_file"] {
		found = found || strings.Contains(string(r), "/lake/dev/")
	}
	if !found {
		t.Fatal("the replica's lake names no file of the merged branch")
	}
	sameAsStore(t, ctx, st)
	if n := testutil.ToFloat64(m.ReplicaReloads); n != 0 {
		t.Fatalf("the replica reloaded %v times to follow a merge", n)
	}
}

// TestFixtureOnABranch replays captured conversations on a writable
// branch: the concurrent DuckLake writers of s08 (inserts racing a delete
// of a row the branch inherited) and of s12 (eight writers on three
// tables) run, message for message, against a branch forked from the lake
// their first connection created, and every answer matches what
// PostgreSQL gave them on the lake itself. The lake's data path is moved
// first and the branch given the recorded one, so that the branch's
// answers hold the bytes the recording does (the first connection writes
// no file, so no inherited path is served absolute). Then the branch
// merges back: the lake's head is the branch's, and it reads the branch's
// rows.
func TestFixtureOnABranch(t *testing.T) {
	for _, name := range []string{"s08_contention", "s12_writers8"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			w := start(t, "file://"+t.TempDir())
			defer w.Stop(t)
			tr, err := replay.LoadFixture(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := (&replay.Fresh{Admin: w.Conninfo("postgres")}).Prepare(ctx, tr); err != nil {
				t.Fatal(err)
			}
			lake := tr.Databases()[0]
			// The first connection attaches (creating the catalog) and
			// sets the lake up; the others connect after it closed.
			first, rest := *tr, *tr
			first.Messages, rest.Messages = nil, nil
			for _, m := range tr.Messages {
				if m.Conn == 1 {
					first.Messages = append(first.Messages, m)
				} else {
					rest.Messages = append(rest.Messages, m)
				}
			}
			if rest.Messages[0].Seq < first.Messages[len(first.Messages)-1].Seq {
				t.Fatalf("%s: another connection opens before the first one closes", name)
			}
			if res := replay.Replay(ctx, &first, replay.Options{Addr: w.Addr, Timeout: 30 * time.Second}); !res.Passed() {
				t.Fatalf("replay of the lake's creation: %v", res.Err)
			}
			recorded := queryOne(t, ctx, w.Conninfo(lake), "SELECT value FROM ducklake_metadata WHERE key = 'data_path'")
			if err := execErr(ctx, w.Conninfo(lake), "UPDATE ducklake_metadata SET value = '/moraine-test/lake/' WHERE key = 'data_path'"); err != nil {
				t.Fatal(err)
			}
			if err := execErr(ctx, w.Conninfo("postgres"), "CREATE DATABASE dev TEMPLATE "+lake+" LOCATION '"+recorded+"'"); err != nil {
				t.Fatal(err)
			}
			before := queryOne(t, ctx, w.Conninfo(lake), "SELECT max(snapshot_id) FROM ducklake_snapshot")
			res := replay.Replay(ctx, &rest, replay.Options{Addr: w.Addr, Timeout: 30 * time.Second, Databases: map[string]string{lake: "dev"}})
			if !res.Passed() {
				t.Fatalf("replay of the writers on the branch: %v", replay.Explain(res.Err))
			}
			if got := queryOne(t, ctx, w.Conninfo(lake), "SELECT max(snapshot_id) FROM ducklake_snapshot"); got != before {
				t.Fatalf("the lake moved from snapshot %s to %s while the writers wrote on the branch", before, got)
			}
			devHead := queryOne(t, ctx, w.Conninfo("dev"), "SELECT max(snapshot_id) FROM ducklake_snapshot")
			devRows := inlinedRows(t, ctx, w.Conninfo("dev"))
			if err := execErr(ctx, w.Conninfo("postgres"), "ALTER DATABASE dev MERGE_INTO "+lake); err != nil {
				t.Fatalf("merge: %v", err)
			}
			if got := queryOne(t, ctx, w.Conninfo(lake), "SELECT max(snapshot_id) FROM ducklake_snapshot"); got != devHead {
				t.Fatalf("after the merge the lake's head is %s, want the branch's %s (nothing else committed on the lake)", got, devHead)
			}
			if got := inlinedRows(t, ctx, w.Conninfo(lake)); fmt.Sprint(got) != fmt.Sprint(devRows) || len(got) == 0 {
				t.Fatalf("the lake's inlined rows after the merge %v, the branch's %v", got, devRows)
			}
		})
	}
}

// queryRows is every row sql returns, as text.
func queryRows(t *testing.T, ctx context.Context, conninfo, sql string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range queryAll(t, ctx, conninfo, sql) {
		for _, v := range r {
			b.WriteString(string(v))
			b.WriteByte('|')
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// changeSets returns the changes_made of a lake's snapshots after after,
// in snapshot order.
func changeSets(t *testing.T, ctx context.Context, conninfo, after string) []string {
	t.Helper()
	var out []string
	for _, r := range queryAll(t, ctx, conninfo, "SELECT changes_made FROM ducklake_snapshot_changes WHERE snapshot_id > "+after+" ORDER BY snapshot_id") {
		out = append(out, string(r[0]))
	}
	return out
}

// inlinedRows counts the live rows of each inlined data table a lake
// names.
func inlinedRows(t *testing.T, ctx context.Context, conninfo string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range queryAll(t, ctx, conninfo, "SELECT table_name FROM ducklake_inlined_data_tables") {
		name := string(r[0])
		out[name] = queryOne(t, ctx, conninfo, fmt.Sprintf("SELECT count(*) FROM %q WHERE _ducklake_end_snapshot IS NULL", name))
	}
	return out
}

// TestMergeUnderConcurrentCommits: a branch merges while writers commit
// on the lake. The merge builds on the lake's commits that landed while it
// planned, or is refused as a concurrent transaction is (40001) and
// retried, until it goes through; the lake's writers never fail; the
// branch's every snapshot is on the lake; and a replica's load of the
// store equals the server. The race detector runs it in CI.
func TestMergeUnderConcurrentCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, st := writerAndReplica(t, ctx)
	lakeCfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 2, CommitsPerWriter: 150, Tables: 2, Seed: 7}
	if err := workload.Prepare(ctx, lakeCfg); err != nil {
		t.Fatal(err)
	}
	admin := w.Conninfo("postgres")
	if err := execErr(ctx, admin, "CREATE DATABASE dev TEMPLATE lake LOCATION '/lake/dev/'"); err != nil {
		t.Fatal(err)
	}
	fork := queryOne(t, ctx, w.Conninfo("dev"), "SELECT max(snapshot_id) FROM ducklake_snapshot")
	devCfg := lakeCfg
	devCfg.ConnString, devCfg.Writers, devCfg.CommitsPerWriter, devCfg.Seed = w.Conninfo("dev"), 1, 10, 8
	if _, err := workload.Run(ctx, devCfg); err != nil {
		t.Fatal(err)
	}
	devChanges := changeSets(t, ctx, w.Conninfo("dev"), fork)
	var wg sync.WaitGroup
	var lakeErr error
	wg.Add(1)
	go func() { defer wg.Done(); _, lakeErr = workload.Run(ctx, lakeCfg) }()
	// Merge once the lake's writers are under way.
	for queryOne(t, ctx, w.Conninfo("lake"), "SELECT max(snapshot_id) FROM ducklake_snapshot") == fork {
		time.Sleep(time.Millisecond)
	}
	var merged error
	refused := 0
	for i := 0; i < 500; i++ {
		if merged = execErr(ctx, admin, "ALTER DATABASE dev MERGE_INTO lake"); merged == nil {
			break
		}
		var pe *pgconn.PgError
		if !errors.As(merged, &pe) || pe.Code != "40001" {
			t.Fatalf("merge under concurrent commits: %v, want done or refused as a concurrent transaction is (40001)", merged)
		}
		refused++
	}
	wg.Wait()
	t.Logf("merge attempts refused before it went through: %d", refused)
	if merged != nil {
		t.Fatalf("the merge never went through: %v", merged)
	}
	if lakeErr != nil {
		t.Fatalf("the lake's writers: %v", lakeErr)
	}
	// The lake's snapshots since the fork are dense, and the branch's
	// change sets are among them, one after another, in order.
	lake := changeSets(t, ctx, w.Conninfo("lake"), fork)
	if n := queryOne(t, ctx, w.Conninfo("lake"), "SELECT max(snapshot_id) - "+fork+" FROM ducklake_snapshot"); n != fmt.Sprint(len(lake)) {
		t.Fatalf("the lake holds %d snapshots after the fork, and its head is %s past it", len(lake), n)
	}
	run := strings.Join(devChanges, "\n")
	found := false
	for i := 0; i+len(devChanges) <= len(lake) && !found; i++ {
		found = strings.Join(lake[i:i+len(devChanges)], "\n") == run
	}
	if !found || len(devChanges) == 0 {
		t.Fatalf("the branch's %d change sets are not a run of the lake's %d since the fork", len(devChanges), len(lake))
	}
	if err := execErr(ctx, w.Conninfo("dev"), "SELECT 1"); err == nil || !strings.Contains(err.Error(), "3D000") {
		t.Fatalf("connecting to the merged branch: %v, want 3D000", err)
	}
	if err := st.KV.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.catchUp(ctx, NewMetrics(), t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Cat.Lookup("dev"); ok {
		t.Fatal("the replica still serves the merged branch")
	}
	sameAsStore(t, ctx, st)
}

// TestMergeAfterRestart: a branch loaded from the store merges as one
// merged in the process that forked it (its fork is then read back from
// the store, not diffed in memory): the lake ends with the same rows
// either way.
func TestMergeAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(restart bool) map[string]string {
		store := "file://" + t.TempDir()
		w := start(t, store)
		cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 1, CommitsPerWriter: 5, Tables: 2, Seed: 11}
		if err := workload.Prepare(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := workload.Run(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if err := execErr(ctx, w.Conninfo("postgres"), "CREATE DATABASE dev TEMPLATE lake LOCATION '/lake/dev/'"); err != nil {
			t.Fatal(err)
		}
		dev := cfg
		dev.ConnString, dev.Seed = w.Conninfo("dev"), 12
		if _, err := workload.Run(ctx, dev); err != nil {
			t.Fatal(err)
		}
		if restart {
			w.Stop(t)
			w = start(t, store)
		}
		defer w.Stop(t)
		if err := execErr(ctx, w.Conninfo("postgres"), "ALTER DATABASE dev MERGE_INTO lake"); err != nil {
			t.Fatalf("merge (restart %v): %v", restart, err)
		}
		out := dumpDB(t, ctx, w.Conninfo("lake"))
		// The runs' own: snapshot times, uuids, file names.
		for _, table := range []string{"ducklake_snapshot", "ducklake_schema", "ducklake_table", "ducklake_data_file"} {
			delete(out, table)
		}
		out["ids"] = queryRows(t, ctx, w.Conninfo("lake"), "SELECT data_file_id, table_id, begin_snapshot, end_snapshot, row_id_start, record_count FROM ducklake_data_file ORDER BY data_file_id")
		out["tables"] = queryRows(t, ctx, w.Conninfo("lake"), "SELECT table_id, table_name, begin_snapshot FROM ducklake_table ORDER BY table_id")
		out["head"] = queryRows(t, ctx, w.Conninfo("lake"), "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot ORDER BY snapshot_id")
		return out
	}
	inProcess, restarted := run(false), run(true)
	sameTables(t, "the lake merged after a restart", inProcess, restarted)
}
