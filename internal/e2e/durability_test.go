package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	dto "github.com/prometheus/client_model/go"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/workload"
)

func reopens(r *testserver.Running) float64 {
	var m dto.Metric
	if err := r.Srv.Metrics().Reopens.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestFailedWALWrite makes the store's WAL writes fail (the wal/ directory
// of the local store is swapped for a plain file, so creating a WAL object
// fails with ENOTDIR) while a workload commits through the in-process
// moraine serve. The commit whose WAL write failed and every commit after
// it fail; the server reopens the store; afterwards it serves exactly the
// durable state: everything acknowledged before, nothing of the failed
// commits; and it takes new commits again.
func TestFailedWALWrite(t *testing.T) {
	dir := t.TempDir()
	// A fixed port: the reopened server listens again on the configured
	// address.
	r := testserver.Start(t, "file://"+dir, "--listen", testenv.FreeAddr(t))
	defer r.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	cfg := func(db string, writers, commits int) workload.Config {
		// Real Parquet files: moraine serve's row-id hold reads them.
		return workload.Config{ConnString: conninfo(r.Addr, db), DataDir: filepath.Join(dataDir, db), Writers: writers, CommitsPerWriter: commits, Tables: 2,
			Compactor: true, RetryWait: 2 * time.Millisecond, Seed: 3}
	}
	before := runWorkload(t, ctx, cfg("before", 4, 10))
	if err := prepare(ctx, cfg("failing", 4, 10)); err != nil {
		t.Fatal(err)
	}
	if n := reopens(r); n != 0 {
		t.Fatalf("%v reopens before any failure", n)
	}

	wal := filepath.Join(dir, "wal")
	if fi, err := os.Stat(wal); err != nil || !fi.IsDir() {
		t.Fatalf("store has no wal directory at %s: %v", wal, err)
	}
	if err := os.Rename(wal, wal+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wal, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failing, err := workload.Run(ctx, cfg("failing", 4, 10))
	// Put the WAL back at once: the server reopens only after its
	// reopen backoff, and must find the durable WAL then.
	if rerr := errors.Join(os.Remove(wal), os.Rename(wal+".away", wal)); rerr != nil {
		t.Fatal(rerr)
	}
	// Every commit fails: the run ends with the store's error, or — when
	// the failure reached its writers as a lost connection, which DuckLake
	// retries — with every commit counted failed after its retries.
	if err == nil && (failing == nil || failing.Failed == 0) {
		t.Fatal("the workload committed through a failing WAL")
	}
	if n := len(failing.Landed()); n != 0 {
		t.Fatalf("%d commits acknowledged while every WAL write failed", n)
	}
	t.Logf("workload over the failing WAL ended with: %v", err)

	deadline := time.Now().Add(20 * time.Second)
	for reopens(r) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the server did not reopen the store after the failed write")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The reopened server serves the durable state: the acknowledged run in
	// full, and not a trace of the failed commits — first read-only, then,
	// once it opened the store for writing again, with writes.
	waitServing(t, ctx, r.Addr)
	waitWritable(t, ctx, r.Addr)
	if err := verifyAt(ctx, r.Addr, "before", before); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	present, err := checkAt(ctx, r.Addr, "failing", failing, 8)
	if err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if present != 0 {
		t.Fatalf("%d commits whose WAL write failed are present after the reopen", present)
	}
	after := runWorkload(t, ctx, cfg("after", 2, 10))
	if err := verifyAt(ctx, r.Addr, "after", after); err != nil {
		t.Fatalf("commits after the reopen: %v", err)
	}
	if n := reopens(r); n != 1 {
		t.Fatalf("%v reopens, want exactly 1", n)
	}
}

// waitWritable waits until the server at addr takes a write again (while
// the store is reopened for writing it refuses writes with 58030).
func waitWritable(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgconn.Connect(ctx, conninfo(addr, "postgres"))
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)").ReadAll()
			conn.Close(context.Background())
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server takes no writes after reopen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitServing waits until addr accepts a connection again.
func waitServing(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := pgconn.Connect(ctx, conninfo(addr, "postgres"))
		if err == nil {
			conn.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not serving after reopen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
