package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/workload"
)

func runMain(t *testing.T, main func(context.Context, []string, io.Writer, io.Writer) int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := main(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

// TestBackupRestore: write, checkpoint (beside the live server), write
// more, back the checkpoint up, restore the backup, and compare: the
// restored catalog equals the catalog as it was at the checkpoint, and
// holds exactly the commits acknowledged before it.
func TestBackupRestore(t *testing.T) {
	live := "file://" + t.TempDir()
	bak := "file://" + t.TempDir()
	rest := "file://" + t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ts := testserver.Start(t, live)
	cfg := workload.Config{ConnString: ts.Conninfo("lake"), Writers: 2, CommitsPerWriter: 8, Tables: 2, Compactor: true, RetryWait: time.Millisecond, Seed: 1,
		DataDir: t.TempDir()} // real Parquet files for the server's row-id hold
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res1, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cat := ts.Srv.Stack().Cat
	atCheckpoint := map[string]*catalog.Version{}
	for _, name := range cat.Databases() {
		db, _ := cat.Lookup(name)
		atCheckpoint[name] = db.Current()
	}
	out := runMain(t, checkpointMain, "--store", live)
	id, _, _ := strings.Cut(out, "\t")
	if len(id) != 26 {
		t.Fatalf("checkpoint output %q", out)
	}
	cfg.Seed = 2
	res2, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(runMain(t, checkpointMain, "--store", live, "--list"), id) {
		t.Fatal("checkpoint --list lacks the checkpoint")
	}
	runMain(t, backupMain, "--store", live, "--to", bak, "--checkpoint", id)
	var errb bytes.Buffer
	if code := backupMain(ctx, []string{"--store", live, "--to", bak, "--checkpoint", id}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "already holds a database") {
		t.Fatalf("backup into a non-empty store: exit %d: %s", code, errb.String())
	}
	runMain(t, restoreMain, "--from", bak, "--to", rest)

	// The operator views of the live store.
	insp := runMain(t, inspectMain, "--store", live)
	for _, want := range []string{"catalog lake.public", "ducklake_data_file", "checkpoint " + id, "manifest/", "wal/", "head snapshot"} {
		if !strings.Contains(insp, want) {
			t.Errorf("inspect lacks %q:\n%s", want, insp)
		}
	}
	snaps := runMain(t, snapshotsMain, "--store", live, "--db", "lake", "--schema", "public")
	if got, want := strings.Count(snaps, "\nlake.public"), 2+len(res1.Landed())+len(res2.Landed()); got != want {
		t.Errorf("snapshots lists %d snapshots, want %d:\n%s", got, want, snaps)
	}
	var eb bytes.Buffer
	if code := snapshotsMain(ctx, []string{"--store", live, "--db", "nope"}, io.Discard, &eb); code != 1 {
		t.Errorf("snapshots of an unknown database: exit %d", code)
	}
	if !strings.Contains(runMain(t, gcMain, "--store", live, "--dry-run", "--grace", "0s"), "objects") {
		t.Error("gc --dry-run printed no summary")
	}
	final := map[string]*catalog.Version{}
	for _, name := range cat.Databases() {
		db, _ := cat.Lookup(name)
		final[name] = db.Current()
	}
	ts.Stop(t)
	// A real GC of the stopped store leaves a store that checks and opens.
	runMain(t, gcMain, "--store", live, "--grace", "0s")
	ls, err := server.OpenStore(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := slate.Check(ctx, ls); err != nil {
		t.Fatalf("after gc: %v", err)
	}
	ls.Close()
	if out := runMain(t, gcMain, "--store", live, "--dry-run", "--grace", "0s"); !strings.HasPrefix(out, "0 objects") {
		t.Fatalf("gc left collectable objects:\n%s", out)
	}

	// The restored store holds the checkpoint's catalog, not the final one.
	rs := testserver.Start(t, rest)
	defer rs.Stop(t)
	rcat := rs.Srv.Stack().Cat
	for name, want := range atCheckpoint {
		db, ok := rcat.Lookup(name)
		if !ok {
			t.Fatalf("restored store lacks database %s", name)
		}
		if d := catalog.Diff(db.Current(), want, 5); d != nil {
			t.Fatalf("restored %s differs from the checkpoint: %v", name, d)
		}
		// The workload after the checkpoint wrote to lake only.
		if name == "lake" && catalog.Diff(db.Current(), final[name], 1) == nil && len(res2.Landed()) > 0 {
			t.Fatalf("restored %s equals the final state: the checkpoint pinned nothing", name)
		}
	}
	conn, err := pgconn.Connect(ctx, rs.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := res1.Verify(ctx, conn); err != nil {
		t.Fatalf("restored store vs the commits acknowledged before the checkpoint: %v", err)
	}
}

// TestToolsRefuseWALGap: with a WAL object missing in the middle, serve
// refuses the store, and so must every read-only tool: verify said
// consistent, inspect showed an older sequence and backup dropped the
// commits after the gap without a word.
func TestToolsRefuseWALGap(t *testing.T) {
	dir := t.TempDir()
	live := "file://" + dir
	bak := "file://" + t.TempDir()
	restDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := testserver.Start(t, live)
	c, err := pgconn.Connect(ctx, ts.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ { // one WAL object each
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO ducklake_metadata VALUES ('k%d', 'v', NULL, NULL)", i)).ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	wal, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(wal) < 4 {
		t.Fatalf("WAL objects %v, %v", wal, err)
	}
	sort.Strings(wal)
	if err := os.Remove(wal[len(wal)-3]); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []struct {
		name string
		main func(context.Context, []string, io.Writer, io.Writer) int
		args []string
	}{
		{"verify", verifyMain, []string{"--store", live}},
		{"inspect", inspectMain, []string{"--store", live}},
		{"backup", backupMain, []string{"--store", live, "--to", bak}},
		{"restore", restoreMain, []string{"--from", live, "--to", "file://" + restDir}},
	} {
		var errb bytes.Buffer
		code := tool.main(ctx, tool.args, io.Discard, &errb)
		if code == 0 || !strings.Contains(errb.String(), "missing inside the WAL range") {
			t.Errorf("%s over a store with a WAL gap: exit %d: %s", tool.name, code, errb.String())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(restDir, "*", "*")); len(left) > 0 {
		t.Errorf("a refused restore wrote %v", left)
	}
}

// TestRepairDropTable: a store an older moraine wrote with a table no
// loader accepts cannot be served, verified or inspected; every one of them
// names the table and the way out, and `moraine repair drop-table` takes
// it, after which the store serves its catalog again.
func TestRepairDropTable(t *testing.T) {
	live := "file://" + t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := testserver.Start(t, live)
	c, err := pgconn.Connect(ctx, ts.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint); INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	ts.Stop(t)

	// What an older moraine stored for CREATE TABLE ducklake_evil (a int).
	s, err := server.OpenStore(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	d, err := slate.Open(ctx, s, slate.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rk := keyspace.RegistryKey("lake", "public")
	rv, err := d.Get(ctx, rk)
	if err != nil {
		t.Fatal(err)
	}
	_, _, cid, err := keyspace.DecodeRegistry(rk, rv)
	if err != nil {
		t.Fatal(err)
	}
	b := slate.NewBatch()
	b.Put(keyspace.TableDefKey(cid, "ducklake_evil"), keyspace.EncodeTableDef(&keyspace.TableDef{Schema: "public", Name: "ducklake_evil",
		Columns: []keyspace.ColumnDef{{Name: "a", Type: datum.Int4}}}))
	if _, err := d.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	d.Close(ctx)
	s.Close()

	const way = "moraine repair drop-table --store <the store URL> --database lake --table public.ducklake_evil"
	var errb bytes.Buffer
	if code := verifyMain(ctx, []string{"--store", live}, io.Discard, &errb); code == 0 || !strings.Contains(errb.String(), way) {
		t.Fatalf("verify of the store: exit %d: %s", code, errb.String())
	}
	cfg, err := server.ParseConfig([]string{"--store", live, "--listen", "127.0.0.1:0"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.New(cfg, slog.New(slog.DiscardHandler)).Run(ctx); err == nil || !strings.Contains(err.Error(), way) {
		t.Fatalf("serve of the store: %v", err)
	}
	errb.Reset()
	if code := repairMain(ctx, []string{"drop-table", "--store", live, "--database", "lake", "--table", "public.ducklake_metadata"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "loads; drop it with DROP TABLE") {
		t.Fatalf("repair of a table that loads: exit %d: %s", code, errb.String())
	}
	runMain(t, repairMain, "drop-table", "--store", live, "--database", "lake", "--table", "public.ducklake_evil")

	ts = testserver.Start(t, live)
	defer ts.Stop(t)
	c, err = pgconn.Connect(ctx, ts.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, "SELECT value FROM ducklake_metadata").ReadAll()
	if err != nil || len(rs[0].Rows) != 1 || string(rs[0].Rows[0][0]) != "v" {
		t.Fatalf("after the repair: %v %v", rs, err)
	}
}

// TestBackupLeavesNothingBehind: a backup that takes its own checkpoint
// deletes it after copying; a backup into a store that holds a database is
// refused before any checkpoint is taken; deleting a checkpoint that does
// not exist is an error; a restore from a store that does not exist
// restores nothing.
func TestBackupLeavesNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live := "file://" + t.TempDir()
	ts := testserver.Start(t, live)
	c, err := pgconn.Connect(ctx, ts.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	bak := "file://" + t.TempDir() + "/new/backup" // created by the backup
	out := runMain(t, backupMain, "--store", live, "--to", bak)
	if !strings.Contains(out, "backed up checkpoint") {
		t.Fatalf("backup: %s", out)
	}
	if list := runMain(t, checkpointMain, "--store", live, "--list"); list != "" {
		t.Fatalf("the backup left its checkpoint behind:\n%s", list)
	}
	var errb bytes.Buffer
	if code := backupMain(ctx, []string{"--store", live, "--to", bak}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "already holds a database") {
		t.Fatalf("backup into a non-empty store: exit %d: %s", code, errb.String())
	}
	if list := runMain(t, checkpointMain, "--store", live, "--list"); list != "" {
		t.Fatalf("a refused backup left a checkpoint:\n%s", list)
	}
	errb.Reset()
	if code := checkpointMain(ctx, []string{"--store", live, "--delete", "NOPE"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "no such checkpoint") {
		t.Fatalf("delete of an unknown checkpoint: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := restoreMain(ctx, []string{"--from", "file://" + t.TempDir() + "/missing", "--to", "file://" + t.TempDir()}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "no such file or directory") {
		t.Fatalf("restore from a missing store: exit %d: %s", code, errb.String())
	}
	ts.Stop(t)
}
