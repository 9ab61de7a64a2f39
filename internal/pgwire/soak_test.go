package pgwire

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSoak (MORAINE_SOAK=1) opens 1,000 concurrent connections over
// loopback — a quarter of them TLS + SCRAM — each running a bounded mix of
// simple queries, multi-statement batches, extended-protocol queries with
// binary parameters, COPY IN and COPY OUT (text and binary). It requires no
// error at all, and that goroutines and heap come back to their baseline
// after every connection closed. MORAINE_SOAK_CONNS and MORAINE_SOAK_ITERS
// override the size.
func TestSoak(t *testing.T) {
	if os.Getenv("MORAINE_SOAK") != "1" {
		t.Skip("set MORAINE_SOAK=1 to run the soak test")
	}
	conns, iters := 1000, 20
	if v := os.Getenv("MORAINE_SOAK_CONNS"); v != "" {
		fmt.Sscan(v, &conns)
	}
	if v := os.Getenv("MORAINE_SOAK_ITERS"); v != "" {
		fmt.Sscan(v, &iters)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()

	func() {
		ts := startServer(t, Config{TLS: selfSignedTLS(t), MaxConnections: conns + 10})
		var statements, copyRows atomic.Int64
		var peakGoroutines atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		ready := make(chan struct{})
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				cs := ts.connString("alice", "", "disable")
				if i%4 == 0 {
					cs = ts.connString("dave", pwDave, "require")
				}
				// 250 concurrent SCRAM handshakes are CPU-bound on the
				// client (PBKDF2); under -race they need more than 10 s.
				cs = strings.Replace(cs, "connect_timeout=10", "connect_timeout=120", 1)
				conn, err := pgx.Connect(ctx, cs)
				if err != nil {
					errs <- fmt.Errorf("conn %d: connect: %w", i, err)
					return
				}
				defer conn.Close(ctx)
				<-ready // every connection open at once before traffic starts
				if err := soakTraffic(ctx, conn, i, iters, &statements, &copyRows); err != nil {
					errs <- fmt.Errorf("conn %d: %w", i, err)
				}
				if g := int64(runtime.NumGoroutine()); g > peakGoroutines.Load() {
					peakGoroutines.Store(g)
				}
			}()
		}
		// Wait until all are connected (the server counts them).
		deadline := time.Now().Add(3 * time.Minute)
		for ts.srv.active.Load() < int64(conns) && time.Now().Before(deadline) && len(errs) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		connected := time.Since(start)
		open := ts.srv.active.Load()
		close(ready)
		wg.Wait()
		close(errs)
		n := 0
		for err := range errs {
			if n < 10 {
				t.Error(err)
			}
			n++
		}
		if n > 0 {
			t.Fatalf("%d connections failed", n)
		}
		elapsed := time.Since(start)
		t.Logf("soak: %d concurrent connections (%d open at peak) connected in %v; %d statements, %d COPY rows in %v (%.0f statements/s); peak goroutines %d",
			conns, open, connected.Round(time.Millisecond), statements.Load(), copyRows.Load(), elapsed.Round(time.Millisecond),
			float64(statements.Load())/elapsed.Seconds(), peakGoroutines.Load())
		if open != int64(conns) {
			t.Errorf("only %d of %d connections were open at once", open, conns)
		}
	}() // the server's Cleanup checks sessions and goroutines; here the process totals:

	waitGoroutines(t, goroutinesBefore)
	var after runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("soak: goroutines %d → %d; heap %d KiB → %d KiB (growth %d KiB)",
		goroutinesBefore, runtime.NumGoroutine(), before.HeapAlloc>>10, after.HeapAlloc>>10, growth>>10)
	// The toy table keeps the rows COPY IN added (iters*conns*2 small
	// rows); allow for them plus 8 MiB of slack.
	if limit := int64(iters*conns*2*80) + 8<<20; growth > limit {
		t.Errorf("heap grew by %d KiB after all connections closed (limit %d KiB)", growth>>10, limit>>10)
	}
}

func soakTraffic(ctx context.Context, conn *pgx.Conn, id, iters int, statements, copyRows *atomic.Int64) error {
	pc := conn.PgConn()
	for it := range iters {
		switch (id + it) % 5 {
		case 0: // simple, several statements
			res, err := pc.Exec(ctx, "BEGIN; SELECT 1; SELECT generate_series(1,10); COMMIT").ReadAll()
			if err != nil || len(res) != 4 || len(res[2].Rows) != 10 {
				return fmt.Errorf("batch: %v", err)
			}
			statements.Add(4)
		case 1: // extended with binary parameters and results
			var a int64
			var b string
			var c time.Time
			want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := conn.QueryRow(ctx, "SELECT $1::int8, $2::text, $3::timestamptz", int64(id*1000+it), "soak", want).Scan(&a, &b, &c); err != nil ||
				a != int64(id*1000+it) || b != "soak" || !c.Equal(want) {
				return fmt.Errorf("extended: %v %v %v %v", a, b, c, err)
			}
			statements.Add(1)
		case 2: // COPY IN, binary
			n, err := conn.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "name"},
				pgx.CopyFromRows([][]any{{int64(id), "a"}, {int64(it), nil}}))
			if err != nil || n != 2 {
				return fmt.Errorf("copy in: %d %v", n, err)
			}
			statements.Add(1)
			copyRows.Add(2)
		case 3: // COPY OUT, binary
			tag, err := pc.CopyTo(ctx, io.Discard, "COPY series(500) TO STDOUT (FORMAT binary)")
			if err != nil || tag.String() != "COPY 500" {
				return fmt.Errorf("copy out: %v %v", tag, err)
			}
			statements.Add(1)
			copyRows.Add(500)
		case 4: // COPY OUT text, then an error and recovery
			var sb strings.Builder
			tag, err := pc.CopyTo(ctx, &sb, "COPY series(50) TO STDOUT")
			if err != nil || tag.String() != "COPY 50" || strings.Count(sb.String(), "\n") != 50 {
				return fmt.Errorf("copy out text: %v %v", tag, err)
			}
			if _, err := pc.Exec(ctx, "bogus").ReadAll(); err == nil {
				return fmt.Errorf("bogus statement succeeded")
			}
			statements.Add(2)
			copyRows.Add(50)
		}
	}
	return nil
}
