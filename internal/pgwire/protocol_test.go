package pgwire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/moraine-db/moraine/internal/testenv"
)

// Exact message sequences for the protocol paths, checked with a raw
// frontend. Each case sends its messages on a fresh, logged-in connection.
// copyHdr is the binary COPY header in hex.
const copyHdr = "5047434f50590aff0d0a000000000000000000"

type exchangeCase struct {
	name string
	send []pgproto3.FrontendMessage
	want []string
}

func exchangeCases() []exchangeCase {
	P := func(name, sql string) *pgproto3.Parse { return &pgproto3.Parse{Name: name, Query: sql} }
	B := func(portal, stmt string, rf ...int16) *pgproto3.Bind {
		return &pgproto3.Bind{DestinationPortal: portal, PreparedStatement: stmt, ResultFormatCodes: rf}
	}
	E := func(portal string, n uint32) *pgproto3.Execute { return &pgproto3.Execute{Portal: portal, MaxRows: n} }
	S := &pgproto3.Sync{}
	Q := func(sql string) *pgproto3.Query { return &pgproto3.Query{String: sql} }
	return []exchangeCase{
		// Cases named "pg: ..." are SQL PostgreSQL runs identically; they
		// are replayed against a real server in TestProtocolAgainstPostgres.
		{"pg: select 1", []pgproto3.FrontendMessage{Q("SELECT 1")},
			[]string{"T ?column?:23/0", `D "1"`, "C SELECT 1", "Z I"}},
		{"pg: empty query", []pgproto3.FrontendMessage{Q("")}, []string{"I", "Z I"}},
		{"pg: blank query", []pgproto3.FrontendMessage{Q("  ;\n ")}, []string{"I", "Z I"}},
		{"pg: trailing whitespace is no empty query", []pgproto3.FrontendMessage{Q("SELECT 1;\n\n  ")},
			[]string{"T ?column?:23/0", `D "1"`, "C SELECT 1", "Z I"}},
		{"pg: multi statement, zero-row select still described", []pgproto3.FrontendMessage{
			Q("BEGIN;\nSELECT * FROM t WHERE false;\nSELECT 1;\n")},
			[]string{"C BEGIN", "T id:20/0,name:25/0", "C SELECT 0", "T ?column?:23/0", `D "1"`, "C SELECT 1", "Z T"}},
		{"pg: stop at first error", []pgproto3.FrontendMessage{Q("SELECT 1; SELECT 1/0; SELECT 1")},
			[]string{"T ?column?:23/0", `D "1"`, "C SELECT 1", `E ERROR 22012 division by zero`, "Z I"}},
		// PostgreSQL parses the whole string first, so a syntax error runs
		// nothing; the toy splits naively, hence no "pg:" here.
		{"stop at first syntax error", []pgproto3.FrontendMessage{Q("SELECT 1; bogus; SELECT 1")},
			[]string{"T ?column?:23/0", `D "1"`, "C SELECT 1", `E ERROR 42601 syntax error at or near "bogus"`, "Z I"}},
		{"pg: aborted transaction until rollback", []pgproto3.FrontendMessage{
			Q("BEGIN"), Q("bogus"), Q("SELECT 1"), Q("ROLLBACK"), Q("SELECT 1")},
			[]string{"C BEGIN", "Z T",
				`E ERROR 42601 syntax error at or near "bogus"`, "Z E",
				"E ERROR 25P02 current transaction is aborted, commands ignored until end of transaction block", "Z E",
				"C ROLLBACK", "Z I",
				"T ?column?:23/0", `D "1"`, "C SELECT 1", "Z I"}},
		{"notice", []pgproto3.FrontendMessage{Q("NOTICE hello")}, []string{"N NOTICE hello", "C NOTICE", "Z I"}},
		{"executor misuse is an internal error", []pgproto3.FrontendMessage{Q("misuse"), Q("unfinished"), Q("SELECT 1")},
			[]string{"E ERROR XX000 pgwire: ResultWriter method called out of order", "Z I",
				"T x:23/0", "E ERROR XX000 executor left a statement result unfinished", "Z I",
				"T ?column?:23/0", `D "1"`, "C SELECT 1", "Z I"}},
		{"DataRow fast path", []pgproto3.FrontendMessage{Q("SELECT fastrows")},
			[]string{"T id:20/0,name:25/0", `D "0","x"`, `D "1",NULL`, "C SELECT 2", "Z I"}},
		{"pg: parameter status after SET", []pgproto3.FrontendMessage{Q("SET application_name = 'lake'")},
			[]string{"C SET", "S application_name=lake", "Z I"}},
		{"pg: extended unnamed", []pgproto3.FrontendMessage{
			P("", "SELECT 1"), &pgproto3.Describe{ObjectType: 'S'}, B("", "", 1), &pgproto3.Describe{ObjectType: 'P'}, E("", 0), S},
			[]string{"1", "t []", "T ?column?:23/0", "2", "T ?column?:23/1", `D "\x00\x00\x00\x01"`, "C SELECT 1", "Z I"}},
		{"pg: row limit suspends portal", []pgproto3.FrontendMessage{
			P("s1", "SELECT generate_series(1,5)"), B("p1", "s1"), E("p1", 2), E("p1", 2), E("p1", 2), S},
			[]string{"1", "2", `D "1"`, `D "2"`, "s", `D "3"`, `D "4"`, "s", `D "5"`, "C SELECT 1", "Z I"}},
		{"parse of several statements answers NoData", []pgproto3.FrontendMessage{
			P("", "BEGIN; SELECT 1; COMMIT"), &pgproto3.Describe{ObjectType: 'S'}, S},
			[]string{"1", "t []", "n", "Z I"}},
		{"executing a NoData multi-statement portal sends no rows", []pgproto3.FrontendMessage{
			P("", "BEGIN; SELECT 1; COMMIT"), B("", ""), &pgproto3.Describe{ObjectType: 'P'}, E("", 0), S},
			[]string{"1", "2", "n", "C BEGIN", "C SELECT 1", "C COMMIT", "Z I"}},
		{"error skips until sync", []pgproto3.FrontendMessage{
			P("", "SELECT nonsense"), B("", ""), E("", 0), S, Q("SELECT 1")},
			[]string{"E ERROR 42601 toy cannot prepare SELECT nonsense", "Z I", "T ?column?:23/0", `D "1"`, "C SELECT 1", "Z I"}},
		{"pg: unknown statement and portal", []pgproto3.FrontendMessage{
			B("", "nope"), S, E("nope", 0), S, &pgproto3.Describe{ObjectType: 'S', Name: "x"}, S},
			[]string{`E ERROR 26000 prepared statement "nope" does not exist`, "Z I",
				`E ERROR 34000 portal "nope" does not exist`, "Z I",
				`E ERROR 26000 prepared statement "x" does not exist`, "Z I"}},
		{"pg: duplicate named statement", []pgproto3.FrontendMessage{P("a", "SELECT 1"), P("a", "SELECT 1"), S},
			[]string{"1", `E ERROR 42P05 prepared statement "a" already exists`, "Z I"}},
		{"pg: close then reuse name", []pgproto3.FrontendMessage{
			P("a", "SELECT 1"), &pgproto3.Close{ObjectType: 'S', Name: "a"}, P("a", "SELECT 1"), S},
			[]string{"1", "3", "1", "Z I"}},
		{"pg: bind parameter count checked", []pgproto3.FrontendMessage{
			P("", "SELECT $1::int8"), &pgproto3.Bind{Parameters: [][]byte{[]byte("1"), []byte("2")}}, S},
			[]string{"1", `E ERROR 08P01 bind message supplies 2 parameters, but prepared statement "" requires 1`, "Z I"}},
		{"pg: text parameter echoed in binary", []pgproto3.FrontendMessage{
			P("", "SELECT $1::int8"), &pgproto3.Bind{Parameters: [][]byte{[]byte("42")}, ResultFormatCodes: []int16{1}}, E("", 0), S},
			[]string{"1", "2", `D "\x00\x00\x00\x00\x00\x00\x00*"`, "C SELECT 1", "Z I"}},
		{"pg: copy out text", []pgproto3.FrontendMessage{Q("INSERT INTO t VALUES (7, 'a\tb'); INSERT INTO t VALUES (8, null); COPY t TO STDOUT")},
			[]string{"C INSERT 0 1", "C INSERT 0 1", "H 0", "d 3709615c74620a", "d 38095c4e0a", "c", "C COPY 2", "Z I"}},
		// Binary COPY OUT framing: the header rides in the first CopyData
		// with the first row, one row per CopyData, the trailer alone; an
		// empty table sends header+trailer in one message (what DuckDB's
		// reader needs).
		{"pg: copy out binary, empty", []pgproto3.FrontendMessage{Q("COPY t TO STDOUT (FORMAT binary)")},
			[]string{"H 1", "d " + copyHdr + "ffff", "c", "C COPY 0", "Z I"}},
		{"pg: copy out binary", []pgproto3.FrontendMessage{Q("INSERT INTO t VALUES (1, 'main'); INSERT INTO t VALUES (2, null); INSERT INTO t VALUES (3, 'x'); COPY t TO STDOUT (FORMAT binary)")},
			[]string{"C INSERT 0 1", "C INSERT 0 1", "C INSERT 0 1", "H 1",
				"d " + copyHdr + "0002" + "00000008" + "0000000000000001" + "00000004" + "6d61696e",
				"d 0002" + "00000008" + "0000000000000002" + "ffffffff",
				"d 0002" + "00000008" + "0000000000000003" + "00000001" + "78",
				"d ffff", "c", "C COPY 3", "Z I"}},
		{"pg: copy in text with CopyFail", []pgproto3.FrontendMessage{Q("COPY t FROM STDIN"), &pgproto3.CopyData{Data: []byte("1\tx\n")}, &pgproto3.CopyFail{Message: "client gave up"}},
			[]string{"G 0", "E ERROR 57014 COPY from stdin failed: client gave up", "Z I"}},
		{"pg: empty execute is EmptyQueryResponse", []pgproto3.FrontendMessage{P("", ""), B("", ""), E("", 0), S},
			[]string{"1", "2", "I", "Z I"}},
		{"function call refused", []pgproto3.FrontendMessage{&pgproto3.FunctionCall{Function: 1}, S},
			[]string{"E ERROR 0A000 fastpath function calls are not supported", "Z I"}},
	}
}

func TestProtocolExchanges(t *testing.T) {
	for _, tc := range exchangeCases() {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{}) // a fresh toy table per case
			rc := dialRaw(t, ts)
			rc.startup()
			runExchange(t, rc, tc)
		})
	}
}

func runExchange(t *testing.T, rc *rawClient, tc exchangeCase) {
	t.Helper()
	rc.send(tc.send...)
	var got []string
	wantZ := 0
	for _, w := range tc.want {
		if strings.HasPrefix(w, "Z ") {
			wantZ++
		}
	}
	for range wantZ {
		got = append(got, rc.until('Z')...)
	}
	if !slices.Equal(got, tc.want) {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
	}
}

// TestProtocolAgainstPostgres replays the "pg:" exchanges against a real
// PostgreSQL (MORAINE_TEST_POSTGRES), which must answer with the very same
// message sequence: the expectations above are PostgreSQL's behaviour, not
// just pgwire's.
func TestProtocolAgainstPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range exchangeCases() {
		if !strings.HasPrefix(tc.name, "pg: ") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			rc := &rawClient{t: t, conn: c, fe: pgproto3.NewFrontend(c, c)}
			rc.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
				Parameters: map[string]string{"user": cfg.User, "database": cfg.Database}})
			rc.until('Z')
			rc.send(&pgproto3.Query{String: "SET client_min_messages = warning; CREATE TEMP TABLE t (id int8, name text)"})
			rc.until('Z')
			runExchange(t, rc, tc)
		})
	}
}

func TestStartupSequence(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	got := rc.startup()
	want := []string{"R ok", "S application_name=", "S client_encoding=UTF8", "S DateStyle=ISO, MDY",
		"S default_transaction_read_only=off", "S in_hot_standby=off", "S integer_datetimes=on",
		"S IntervalStyle=postgres", "S is_superuser=on", "S server_encoding=UTF8", "S server_version=16.4",
		"S session_authorization=alice", "S standard_conforming_strings=on", "S TimeZone=UTC", "K", "Z I"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestProtocolVersions(t *testing.T) {
	ts := startServer(t, Config{})
	t.Run("2.0 refused", func(t *testing.T) {
		rc := dialRaw(t, ts)
		if _, err := rc.conn.Write(startupBytes(2<<16, "user", "alice")); err != nil {
			t.Fatal(err)
		}
		got := rc.until('E')
		if !strings.Contains(got[0], "0A000 unsupported frontend protocol 2.0") {
			t.Errorf("got %q", got)
		}
		expectClosed(t, rc.conn)
	})
	t.Run("3.2 negotiated down", func(t *testing.T) {
		rc := dialRaw(t, ts)
		if _, err := rc.conn.Write(startupBytes(3<<16|2, "user", "alice", "_pq_.foo", "1")); err != nil {
			t.Fatal(err)
		}
		got := rc.until('Z')
		if got[0] != "v 0 [_pq_.foo]" || got[1] != "R ok" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("no user", func(t *testing.T) {
		rc := dialRaw(t, ts)
		if _, err := rc.conn.Write(startupBytes(3<<16, "database", "x")); err != nil {
			t.Fatal(err)
		}
		got := rc.until('E')
		if !strings.Contains(got[0], "FATAL 28000 no PostgreSQL user name") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("unknown database from executor", func(t *testing.T) {
		rc := dialRaw(t, ts)
		if _, err := rc.conn.Write(startupBytes(3<<16, "user", "alice", "database", "nodb")); err != nil {
			t.Fatal(err)
		}
		got := rc.until('E')
		if !strings.Contains(got[0], `FATAL 3D000 database "nodb" does not exist`) {
			t.Errorf("got %q", got)
		}
		expectClosed(t, rc.conn)
	})
	t.Run("SSLRequest and GSSENCRequest without TLS answer N", func(t *testing.T) {
		rc := dialRaw(t, ts)
		for _, code := range []uint32{gssEncRequestCode, sslRequestCode} {
			req := []byte{0, 0, 0, 8, byte(code >> 24), byte(code >> 16), byte(code >> 8), byte(code)}
			if _, err := rc.conn.Write(req); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if _, err := rc.conn.Read(b[:]); err != nil || b[0] != 'N' {
				t.Fatalf("answer %q %v", b, err)
			}
		}
		rc.startup()
	})
}

func TestLimits(t *testing.T) {
	// Limits that end the session: a FATAL error, then the server closes.
	for _, tc := range []struct {
		name string
		cfg  Config
		send pgproto3.FrontendMessage // nil: send nothing and wait
		want string
	}{
		{"max message size", Config{MaxMessageSize: 1024}, &pgproto3.Query{String: "SELECT 1 " + strings.Repeat(" ", 2000)}, "FATAL 54000"},
		{"idle timeout", Config{IdleTimeout: 100 * time.Millisecond}, nil, "FATAL 57P05 terminating connection due to idle-session timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.cfg)
			rc := dialRaw(t, ts)
			rc.startup()
			if tc.send != nil {
				rc.send(tc.send)
			}
			got := rc.until('E')
			if !strings.Contains(got[0], tc.want) {
				t.Errorf("got %q", got)
			}
			expectClosed(t, rc.conn)
		})
	}
	t.Run("statement timeout", func(t *testing.T) {
		ts := startServer(t, Config{StatementTimeout: 100 * time.Millisecond})
		rc := dialRaw(t, ts)
		rc.startup()
		start := time.Now()
		rc.send(&pgproto3.Query{String: "SELECT pg_sleep(3600)"})
		got := rc.until('Z')
		// The sleep is an hour: ended by the timeout, not by itself.
		if got[0] != "E ERROR 57014 canceling statement due to statement timeout" || time.Since(start) > time.Minute {
			t.Errorf("got %q after %v", got, time.Since(start))
		}
	})
	t.Run("max connections", func(t *testing.T) {
		ts := startServer(t, Config{MaxConnections: 2})
		a, b := dialRaw(t, ts), dialRaw(t, ts)
		a.startup()
		b.startup()
		c := dialRaw(t, ts)
		c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "alice"}})
		got := c.until('E')
		if got[0] != "E FATAL 53300 sorry, too many clients already" {
			t.Errorf("got %q", got)
		}
		expectClosed(t, c.conn)
		a.send(&pgproto3.Terminate{})
		expectClosed(t, a.conn)
		// The slot is free again.
		deadline := time.Now().Add(5 * time.Second)
		for ts.srv.active.Load() > 1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		dialRaw(t, ts).startup()
	})
	t.Run("executor panic closes only that connection", func(t *testing.T) {
		ts := startServer(t, Config{})
		rc := dialRaw(t, ts)
		rc.startup()
		rc.send(&pgproto3.Query{String: "PANIC"})
		got := rc.until('Z')
		if got[0] != "E ERROR XX000 internal error: toy panic" {
			t.Errorf("got %q", got)
		}
		expectClosed(t, rc.conn)
		other := dialRaw(t, ts)
		other.startup()
	})
	t.Run("garbage after startup", func(t *testing.T) {
		ts := startServer(t, Config{})
		rc := dialRaw(t, ts)
		rc.startup()
		if _, err := rc.conn.Write([]byte{'?', 0, 0, 0, 4}); err != nil {
			t.Fatal(err)
		}
		got := rc.until('E')
		if !strings.Contains(got[0], "FATAL 08P01") {
			t.Errorf("got %q", got)
		}
		expectClosed(t, rc.conn)
	})
	t.Run("garbage startup", func(t *testing.T) {
		ts := startServer(t, Config{})
		rc := dialRaw(t, ts)
		if _, err := rc.conn.Write([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, rc.conn)
	})
}

func TestShutdownClosesIdleConnections(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.startup()
	busy := dialRaw(t, ts)
	busy.startup()
	silent := dialRaw(t, ts) // connected, never sends a startup packet
	busy.send(&pgproto3.Query{String: "SELECT pg_sleep(0.3)"})
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(t.Context()) }()
	got := rc.until('E')
	if got[0] != "E FATAL 57P01 terminating connection due to administrator command" {
		t.Errorf("idle got %q", got)
	}
	// The busy one finishes its statement first.
	got = busy.until('Z')
	if got[0] != "T pg_sleep:25/0" {
		t.Errorf("busy got %q", got)
	}
	got = busy.until('E')
	if got[0] != "E FATAL 57P01 terminating connection due to administrator command" {
		t.Errorf("busy then got %q", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	expectClosed(t, silent.conn)
}

// A CancelRequest (or the statement timeout) during COPY IN ends the COPY
// with 57014 even though the client is still sending; the rest of its COPY
// data is dropped and the connection stays usable.
func TestCancelDuringCopyIn(t *testing.T) {
	for _, timeout := range []bool{false, true} {
		name := "cancel request"
		cfg := Config{}
		if timeout {
			name, cfg.StatementTimeout = "statement timeout", 200*time.Millisecond
		}
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, cfg)
			rc := dialRaw(t, ts)
			rc.startup()
			rc.send(&pgproto3.Query{String: "COPY t FROM STDIN"}, &pgproto3.CopyData{Data: []byte("1\tx\n")})
			if got := rc.until('G'); got[0] != "G 0" {
				t.Fatalf("got %q", got)
			}
			if !timeout {
				time.Sleep(50 * time.Millisecond)
				rc.cancel(ts)
			}
			want := "E ERROR 57014 canceling statement due to user request"
			if timeout {
				want = "E ERROR 57014 canceling statement due to statement timeout"
			}
			if got := rc.until('Z'); !slices.Equal(got, []string{want, "Z I"}) {
				t.Fatalf("got %q", got)
			}
			rc.send(&pgproto3.CopyData{Data: []byte("2\ty\n")}, &pgproto3.CopyDone{}, &pgproto3.Query{String: "SELECT * FROM t"})
			if got := rc.until('Z'); !slices.Equal(got, []string{"T id:20/0,name:25/0", "C SELECT 0", "Z I"}) {
				t.Fatalf("after cancel: %q", got)
			}
		})
	}
}

// Answers are written at Sync or Flush, not per message; Flush makes them
// visible without ending the implicit transaction.
func TestFlushWithoutSync(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.startup()
	rc.send(&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}, &pgproto3.Execute{})
	_ = rc.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if n, err := rc.conn.Read(b[:]); n != 0 || err == nil {
		t.Fatalf("answer before Flush/Sync: %d %v", n, err)
	}
	_ = rc.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rc.send(&pgproto3.Flush{})
	if got := rc.until('C'); !slices.Equal(got, []string{"1", "2", `D "1"`, "C SELECT 1"}) {
		t.Fatalf("after Flush: %q", got)
	}
	rc.send(&pgproto3.Sync{})
	if got := rc.until('Z'); !slices.Equal(got, []string{"Z I"}) {
		t.Fatalf("after Sync: %q", got)
	}
}

// When Shutdown's context ends first, running statements are canceled and
// their connections closed; Shutdown returns the context's error promptly.
func TestShutdownDeadline(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.startup()
	rc.send(&pgproto3.Query{String: "SELECT pg_sleep(3600)"})
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := ts.srv.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Shutdown = %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Shutdown took %v, waiting for an hour-long statement", d)
	}
	expectClosed(t, rc.conn)
}

// lateListener is a listener whose first Accept returns its connection
// only when released, even after Close: a connection the kernel accepted
// just as the server closed its listeners.
type lateListener struct {
	conn     net.Conn
	waiting  chan struct{} // closed once the first Accept is waiting
	release  chan struct{}
	closed   chan struct{}
	closeOne sync.Once
	handed   atomic.Bool
}

func (l *lateListener) Accept() (net.Conn, error) {
	if l.handed.CompareAndSwap(false, true) {
		close(l.waiting)
		<-l.release
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *lateListener) Close() error {
	l.closeOne.Do(func() { close(l.closed) })
	return nil
}

func (l *lateListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// A connection accepted while the server closes is closed unserved: Close
// waits for every connection the server admits, so one admitted after Close
// returned would be served by a goroutine Close no longer waits for. Such a
// goroutine logs the connection's arrival before it reads anything, so the
// log shows whether one ran.
func TestConnectionAcceptedDuringCloseIsRefused(t *testing.T) {
	var log testenv.SyncBuffer
	srv, err := New(Config{Users: testUsers(t), LogConnections: true, Logger: slog.New(slog.NewTextHandler(&log, nil))}, &toyExec{})
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer client.Close()
	l := &lateListener{conn: server, waiting: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	<-l.waiting
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	close(l.release)
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve = %v, want ErrServerClosed", err)
	}
	// net.Pipe's writes wait for the other end to read: a served
	// connection reads the startup packet, a refused one is closed.
	fe := pgproto3.NewFrontend(client, client)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "alice", "database": "lake"}})
	if err := fe.Flush(); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("startup after Close: %v, want the connection closed unserved", err)
	}
	if got := log.String(); strings.Contains(got, "connection received") {
		t.Fatalf("a connection was served after Close returned:\n%s", got)
	}
}

// An unauthenticated client cannot make the server allocate a large
// message buffer: during authentication the limit is 64 KiB.
func TestAuthMessageLimit(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "bob"}})
	if got := rc.until('R'); got[0] != "R cleartext" {
		t.Fatalf("got %q", got)
	}
	if _, err := rc.conn.Write([]byte{'p', 0x00, 0x10, 0x00, 0x00}); err != nil { // 1 MiB declared
		t.Fatal(err)
	}
	expectClosed(t, rc.conn)
}

// A client that stops reading a large COPY OUT is disconnected after
// WriteTimeout instead of holding its goroutine forever.
func TestWriteTimeout(t *testing.T) {
	ts := startServer(t, Config{WriteTimeout: 300 * time.Millisecond})
	rc := dialRaw(t, ts)
	rc.startup()
	rc.send(&pgproto3.Query{String: "COPY fast(2000000) TO STDOUT"})
	time.Sleep(time.Second) // do not read: the socket buffers fill up
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ts.srv.active.Load(); n != 0 {
		t.Fatalf("%d connections still served", n)
	}
}

// A statement whose client closed its connection is abandoned at the next
// client check, not run to its end: the executor's context ends with the
// client-gone cause while the statement (an hour's sleep) is still running.
func TestStatementAbandonedWhenClientLeaves(t *testing.T) {
	ts := startServer(t, Config{ClientCheckInterval: 20 * time.Millisecond})
	ts.exec.slept = make(chan error, 1)
	rc := dialRaw(t, ts)
	rc.startup()
	rc.send(&pgproto3.Query{String: "SELECT pg_sleep(3600)"})
	rc.conn.Close()
	select {
	case cause := <-ts.exec.slept:
		if !errors.Is(cause, errClientGoneCause) {
			t.Fatalf("the statement ended with %v, want the client-gone cause", cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("the statement of a closed connection ran on")
	}
}
