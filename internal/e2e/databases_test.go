package e2e

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// TestDatabases: databases exist explicitly, as in PostgreSQL. A fresh
// store serves postgres and lake; an unknown name is FATAL 3D000; CREATE
// DATABASE makes one a DuckLake conversation can fill; DROP DATABASE
// refuses while others are connected, ends them WITH (FORCE), and erases
// every key the database had, durably: after a restart the name is gone
// and can be created afresh.
func TestDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := replay.Load(filepath.Join(dir, "s01_basic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	store := "file://" + t.TempDir()
	r := testserver.Start(t, store, "--row-id-hold=false")
	admin := r.Conninfo("postgres")
	out, err := psqlRun(t, admin, `\l`)
	if err != nil || !strings.Contains(out, "lake") || !strings.Contains(out, "postgres") {
		t.Fatalf("\\l on a fresh store: %v\n%s", err, out)
	}
	wantCode := func(err error, code, msg string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code || (msg != "" && pe.Message != msg) {
			t.Fatalf("got %v, want %s %q", err, code, msg)
		}
	}
	_, err = pgconn.Connect(ctx, r.Conninfo("s01_basic"))
	wantCode(err, pgcode.InvalidCatalogName, `database "s01_basic" does not exist`)

	before := storeKeys(t, ctx, r)
	if err := (&replay.Fresh{Admin: admin}).Prepare(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if res := replay.Replay(ctx, tr, replay.Options{Addr: r.Addr, Timeout: 30 * time.Second}); !res.Passed() {
		t.Fatalf("replay into the created database: %v\n%s", res.Err, replay.Explain(res.Err))
	}
	if len(storeKeys(t, ctx, r)) <= len(before) {
		t.Fatal("the replayed lake wrote no keys")
	}
	c, err := pgconn.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	exec := func(sql string) error {
		_, err := c.Exec(ctx, sql).ReadAll()
		return err
	}
	wantCode(exec(`CREATE DATABASE s01_basic`), pgcode.DuplicateDatabase, `database "s01_basic" already exists`)
	wantCode(exec(`BEGIN; DROP DATABASE s01_basic`), pgcode.ActiveSQLTransaction, "DROP DATABASE cannot run inside a transaction block")
	if err := exec(`ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	wantCode(exec(`DROP DATABASE postgres`), pgcode.ObjectInUse, "cannot drop the currently open database")
	wantCode(exec(`DROP DATABASE nosuch`), pgcode.InvalidCatalogName, `database "nosuch" does not exist`)
	if err := exec(`DROP DATABASE IF EXISTS nosuch`); err != nil {
		t.Fatal(err)
	}

	user, err := pgconn.Connect(ctx, r.Conninfo("s01_basic"))
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close(ctx)
	err = exec(`DROP DATABASE s01_basic`)
	wantCode(err, pgcode.ObjectInUse, `database "s01_basic" is being accessed by other users`)
	if d := err.(*pgconn.PgError).Detail; d != "There is 1 other session using the database." {
		t.Fatalf("detail %q", d)
	}
	if err := exec(`DROP DATABASE s01_basic WITH (FORCE)`); err != nil {
		t.Fatal(err)
	}
	_, err = user.Exec(ctx, `SELECT 1`).ReadAll()
	wantCode(err, pgcode.AdminShutdown, "terminating connection due to administrator command")
	if after := storeKeys(t, ctx, r); !maps.Equal(after, before) {
		t.Fatalf("the dropped database left keys behind: %d keys before it was created, %d after its drop", len(before), len(after))
	}

	// Durable: after a restart the name is unknown, and a new database of
	// that name starts empty (the transcript replays from the beginning).
	r.Stop(t)
	r = testserver.Start(t, store, "--row-id-hold=false")
	_, err = pgconn.Connect(ctx, r.Conninfo("s01_basic"))
	wantCode(err, pgcode.InvalidCatalogName, `database "s01_basic" does not exist`)
	if err := (&replay.Fresh{Admin: r.Conninfo("postgres")}).Prepare(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if res := replay.Replay(ctx, tr, replay.Options{Addr: r.Addr, Timeout: 30 * time.Second}); !res.Passed() {
		t.Fatalf("replay into the database created again: %v\n%s", res.Err, replay.Explain(res.Err))
	}
	r.Stop(t)
	r = testserver.Start(t, store, "--row-id-hold=false")
	defer r.Stop(t)
	out, err = psqlRun(t, r.Conninfo("postgres"), `SELECT datname FROM pg_database ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(out)
	for _, w := range []string{"lake", "postgres", "s01_basic"} {
		if !slices.Contains(got, w) {
			t.Fatalf("pg_database after restarts lacks %s:\n%s", w, out)
		}
	}
}

// storeKeys is every key and value the server's store holds now.
func storeKeys(t *testing.T, ctx context.Context, r *testserver.Running) map[string]string {
	t.Helper()
	sn, err := r.Srv.Stack().KV.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	it := sn.ScanPrefix(ctx, nil)
	defer it.Close()
	out := map[string]string{}
	for it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
