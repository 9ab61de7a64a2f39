package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// start runs moraine serve in-process on store (plus extra flags) on a free
// loopback port, with its log discarded.
func start(t *testing.T, store string, extra ...string) *testenv.Running {
	t.Helper()
	args := append([]string{"--store", store, "--listen", "127.0.0.1:0"}, extra...)
	return startWith(t, slog.New(slog.DiscardHandler), args...)
}

// startWith runs the server with args as its command line and log as its
// logger. (The server's own tests cannot use testenv/testserver: it imports
// this package.)
func startWith(t *testing.T, log *slog.Logger, args ...string) *testenv.Running {
	t.Helper()
	cfg, err := ParseConfig(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Start(t, New(cfg, log))
}

// TestDuckLakeWorkloadSurvivesRestart drives DuckLake's commit protocol (4
// writers and a merge compactor) against moraine serve on a local directory,
// verifies the catalog, restarts the server on the same store and verifies
// that exactly the acknowledged commits are there.
func TestDuckLakeWorkloadSurvivesRestart(t *testing.T) {
	store := "file://" + t.TempDir()
	r := start(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := workload.Config{
		ConnString: r.Conninfo("lake"), Writers: 4, CommitsPerWriter: 15, Tables: 3,
		Compactor: true, RetryWait: 5 * time.Millisecond, Seed: 7,
		// Real Parquet files, so that the server's row-id hold (on by
		// default) reads every merge's row ids.
		DataDir: t.TempDir(),
	}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// A writer commit may legitimately fail on a true conflict with the
	// compactor (DuckLake does not retry those) or exhaust its retries
	// on a loaded machine; every other one must land. Verify below checks
	// that exactly the acknowledged ones are there.
	if len(res.Landed()) < 4*15-res.Failed || res.Failed > 4*15/4 {
		t.Fatalf("%d commits landed and %d failed, want at least %d landed and few failures", len(res.Landed()), res.Failed, 4*15-res.Failed)
	}
	verify := func(addr string) {
		t.Helper()
		conn, err := pgconn.Connect(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := res.Verify(ctx, conn); err != nil {
			t.Fatalf("verify: %v", err)
		}
	}
	verify(r.Conninfo("lake"))
	r.Stop(t)

	r2 := start(t, store)
	defer r2.Stop(t)
	verify(r2.Conninfo("lake"))
}
