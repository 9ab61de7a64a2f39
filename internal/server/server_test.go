package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/workload"
)

// running is a moraine started in-process on a store URL.
type running struct {
	srv    *Server
	cancel context.CancelFunc
	done   chan error
	addr   string
}

func start(t *testing.T, store string, extra ...string) *running {
	t.Helper()
	args := append([]string{"--store", store, "--listen", "127.0.0.1:0"}, extra...)
	cfg, err := ParseConfig(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := New(cfg, log, func(st *Stack) pgwire.Executor { return sql.New(memcat.On(st.Cat)) })
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-r.done:
		t.Fatalf("server exited before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready after 30s")
	}
	r.addr = srv.Addr().String()
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("server run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
}

func (r *running) conninfo(db string) string {
	host, port, _ := net.SplitHostPort(r.addr)
	return "host=" + host + " port=" + port + " user=moraine dbname=" + db + " sslmode=disable"
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
		ConnString: r.conninfo("lake"), Writers: 4, CommitsPerWriter: 15, Tables: 3,
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
	verify(r.conninfo("lake"))
	r.stop(t)

	r2 := start(t, store)
	defer r2.stop(t)
	verify(r2.conninfo("lake"))
}
