package pgwire

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/moraine-db/moraine/internal/testenv"
)

// copyOutEach runs a COPY on a raw connection and calls fn with each
// CopyData payload (valid only during the call).
func copyOutEach(t testing.TB, rc *rawClient, sql string, fn func(data []byte)) {
	t.Helper()
	rc.send(&pgproto3.Query{String: sql})
	for {
		msg, err := rc.fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			fn(m.Data)
		case *pgproto3.ErrorResponse:
			t.Fatalf("copy: %s", m.Message)
		case *pgproto3.ReadyForQuery:
			return
		}
	}
}

// copyOutRaw runs a COPY on a raw connection and discards the stream,
// so that only the server's work is measured.
func copyOutRaw(t testing.TB, rc *rawClient, sql string) (bytes int64) {
	t.Helper()
	copyOutEach(t, rc, sql, func(data []byte) { bytes += int64(len(data)) })
	return bytes
}

// The fast path must not allocate per row: a 200k-row binary COPY OUT
// stays under a fixed allocation budget for the whole process (server and
// the raw client reading it).
func TestCopyOutFastPathAllocations(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("the race detector's instrumentation allocates per row; the budget is for the code")
	}
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.startup()
	copyOutRaw(t, rc, "COPY fast(1000) TO STDOUT") // warm up buffers
	const rows = 200_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := copyOutRaw(t, rc, fmt.Sprintf("COPY fast(%d) TO STDOUT", rows))
	runtime.ReadMemStats(&after)
	allocs := after.Mallocs - before.Mallocs
	t.Logf("COPY fast(%d): %d bytes, %d allocations in the process (%.4f per row)", rows, n, allocs, float64(allocs)/rows)
	// The client side (pgproto3 Frontend) reuses its flyweights too, so
	// anything proportional to the row count would show up here.
	if allocs > rows/100 {
		t.Errorf("%d allocations for %d rows", allocs, rows)
	}
}

// BenchmarkCopyOut1M measures a 1,000,000-row binary COPY OUT through the
// fast path. With MORAINE_TEST_POSTGRES set it also copies a 1M-row table
// of the same shape out of that PostgreSQL and reports moraine/PostgreSQL
// as the metric "ratio" (lower is faster than PostgreSQL).
func BenchmarkCopyOut1M(b *testing.B) {
	ts := startServer(b, Config{})
	rc := dialRaw(b, ts)
	rc.startup()
	const rows = 1_000_000
	var pgTime time.Duration
	if dsn := os.Getenv(testenv.PostgresEnv); dsn != "" {
		pgTime = postgresCopyTime(b, dsn, rows)
	}
	b.ResetTimer()
	b.ReportAllocs()
	var n int64
	start := time.Now()
	for range b.N {
		_ = rc.conn.SetDeadline(time.Now().Add(time.Minute))
		n = copyOutRaw(b, rc, fmt.Sprintf("COPY fast(%d) TO STDOUT", rows))
	}
	per := time.Since(start) / time.Duration(b.N)
	b.SetBytes(n)
	b.ReportMetric(float64(rows)/per.Seconds(), "rows/s")
	if pgTime > 0 {
		b.ReportMetric(float64(per)/float64(pgTime), "ratio")
		b.Logf("moraine %v, PostgreSQL %v per 1M-row binary COPY", per, pgTime)
	}
}

// postgresCopyTime loads rows into a temp table of a real PostgreSQL and
// times the same binary COPY OUT, best of three.
func postgresCopyTime(b *testing.B, dsn string, rows int) time.Duration {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatalf("MORAINE_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf(
		"CREATE TEMP TABLE fast AS SELECT i::int8 AS id, 'duckdb-lake-row'::text AS name FROM generate_series(0, %d) i", rows-1)); err != nil {
		b.Fatal(err)
	}
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY fast TO STDOUT (FORMAT binary)"); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// BenchmarkSelect1 measures simple-query round trips ("SELECT 1") through
// pgconn; with MORAINE_TEST_POSTGRES it reports moraine/PostgreSQL as
// "ratio". Extended-protocol round trips ($1 binary) are measured too.
func BenchmarkSelect1(b *testing.B) {
	ts := startServer(b, Config{})
	for _, extended := range []bool{false, true} {
		name := "simple"
		if extended {
			name = "extended"
		}
		b.Run(name, func(b *testing.B) {
			run := func(b *testing.B, dsn string, n int) time.Duration {
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close(ctx)
				start := time.Now()
				for i := range n {
					if extended {
						var v int64
						if err := conn.QueryRow(ctx, "SELECT $1::int8", int64(i)).Scan(&v); err != nil || v != int64(i) {
							b.Fatal(err)
						}
					} else if _, err := conn.PgConn().Exec(ctx, "SELECT 1").ReadAll(); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			var pg time.Duration
			if dsn := os.Getenv(testenv.PostgresEnv); dsn != "" {
				pg = run(b, dsn, 2000) / 2000
			}
			b.ResetTimer()
			b.ReportAllocs()
			per := run(b, ts.connString("alice", "", "disable"), b.N) / time.Duration(b.N)
			if pg > 0 {
				b.ReportMetric(float64(per)/float64(pg), "ratio")
			}
		})
	}
}

// copyOutData returns the payloads of a COPY OUT's CopyData messages.
func copyOutData(t testing.TB, rc *rawClient, sql string) (out [][]byte) {
	t.Helper()
	copyOutEach(t, rc, sql, func(data []byte) { out = append(out, append([]byte(nil), data...)) })
	return out
}

// Rows framed beforehand and sent k at a time (AppendMessages, the SQL
// layer's cached rows) reach the client exactly as AppendRow sends them:
// the binary COPY header in the first row's message, one message per row.
func TestCopyOutAppendMessages(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.startup()
	for _, n := range []int{0, 1, 10, 3000} {
		want := copyOutData(t, rc, fmt.Sprintf("COPY fast(%d) TO STDOUT", n))
		if len(want) != n+1 { // the rows and the trailer
			t.Fatalf("fast(%d): %d messages", n, len(want))
		}
		for _, k := range []int{1, 3, 7, 5000} {
			got := copyOutData(t, rc, fmt.Sprintf("COPY framed(%d,%d) TO STDOUT", n, k))
			if len(got) != len(want) {
				t.Fatalf("framed(%d,%d): %d messages, want %d", n, k, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("framed(%d,%d): message %d\n got %x\nwant %x", n, k, i, got[i], want[i])
				}
			}
		}
	}
}
