package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// The probes of an adversarial client, each against a real moraine serve
// over TCP: every one must get PostgreSQL's error (or its answer), leave the
// server serving, and leave a store that loads again.

func connect(t *testing.T, ctx context.Context, conninfo string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// wantCode runs sql and requires PostgreSQL's error code (and, when msg is
// not empty, a message containing it).
func wantCode(t *testing.T, ctx context.Context, c *pgconn.PgConn, sql, code, msg string) {
	t.Helper()
	_, err := c.Exec(ctx, sql).ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, msg) {
		t.Fatalf("%.80s…: got %v, want %s %q", sql, err, code, msg)
	}
}

func alive(t *testing.T, ctx context.Context, c *pgconn.PgConn) {
	t.Helper()
	rs, err := c.Exec(ctx, "SELECT 1").ReadAll()
	if err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 {
		t.Fatalf("the server stopped answering: %v", err)
	}
}

// sum is SELECT 1+1+…+1 with n terms.
func sum(n int) string { return "SELECT " + strings.Repeat("1+", n-1) + "1" }

// TestDeepExpressionRefused: a sum of 30 000 terms crashed the process in
// pg_query's C parser; 5 000–20 000 failed in the protobuf decoder with a
// message no client expects. Both are PostgreSQL's 54001 now, refused before
// the parser, and a sum of 500 terms still runs.
func TestDeepExpressionRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir())
	c := connect(t, ctx, r.Conninfo("lake"))
	for _, n := range []int{5000, 20000, 30000} {
		wantCode(t, ctx, c, sum(n), "54001", "stack depth limit exceeded")
	}
	nested := "SELECT " + strings.Repeat("(", 3000) + "1" + strings.Repeat(")", 3000)
	wantCode(t, ctx, c, nested, "54001", "stack depth limit exceeded")
	rs, err := c.Exec(ctx, sum(500)).ReadAll()
	if err != nil || string(rs[0].Rows[0][0]) != "500" {
		t.Fatalf("sum of 500 terms: %v %v", rs, err)
	}
	// The extended protocol parses through the same door.
	if _, err := c.Prepare(ctx, "", sum(30000), nil); err == nil || !strings.Contains(err.Error(), "54001") {
		t.Fatalf("prepare of 30 000 terms: %v", err)
	}
	// A flat text past the size bound (a VALUES list of 17 MiB) is refused
	// before the scanner holds its tokens.
	flat := "SELECT * FROM (VALUES (1)" + strings.Repeat(",(1)", (17<<20)/4) + ") v"
	wantCode(t, ctx, c, flat, "54000", "statement is too long")
	alive(t, ctx, c)
}

// TestUnloadableTablesRefused: a table DuckLake does not create, or one of
// DuckLake's altered out of its shape, was accepted and then made the store
// unloadable. The commit that would store it is refused now, and the store
// loads after a restart.
func TestUnloadableTablesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := "file://" + t.TempDir()
	r := testserver.Start(t, store)
	c := connect(t, ctx, r.Conninfo("lake"))
	wantCode(t, ctx, c, "CREATE TABLE ducklake_evil (a int)", "0A000", `"ducklake_evil"`)
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_snapshot(snapshot_id bigint primary key, snapshot_time timestamptz, schema_version bigint, next_catalog_id bigint, next_file_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ctx, c, "ALTER TABLE ducklake_snapshot ADD COLUMN x int", "0A000", "ducklake_snapshot")
	wantCode(t, ctx, c, "ALTER TABLE ducklake_snapshot RENAME COLUMN schema_version TO sv", "0A000", "schema_version")
	// In a transaction the refusal comes at COMMIT, and nothing of it lands.
	if _, err := c.Exec(ctx, "BEGIN; INSERT INTO ducklake_snapshot VALUES (0, NOW(), 0, 1, 0); CREATE TABLE ducklake_evil2 (a int)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ctx, c, "COMMIT", "0A000", `"ducklake_evil2"`)
	c.Close(ctx)
	r.Stop(t)

	r = testserver.Start(t, store)
	defer r.Stop(t)
	c = connect(t, ctx, r.Conninfo("lake"))
	rs, err := c.Exec(ctx, "SELECT count(*) FROM ducklake_snapshot").ReadAll()
	if err != nil || string(rs[0].Rows[0][0]) != "0" {
		t.Fatalf("after restart: %v %v (the refused transaction's row must not be there)", rs, err)
	}
}

// metadataRows creates ducklake_metadata with n rows.
func metadataRows(t *testing.T, ctx context.Context, c *pgconn.PgConn, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint); INSERT INTO ducklake_metadata VALUES `)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "('k%d', 'v', NULL, %d)", i, i)
	}
	if _, err := c.Exec(ctx, b.String()).ReadAll(); err != nil {
		t.Fatal(err)
	}
}

// TestCrossJoinBounded: a cross join of two large tables grew the server's
// memory without limit and ignored the statement timeout. Over two 10 000-row
// tables (10⁸ rows) with a 64 MiB statement budget it fails with 53200; a
// join whose condition never holds keeps no rows and runs into the statement
// timeout (57014) instead of evaluating all 10⁸ pairs.
func TestCrossJoinBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir(), "--statement-mem-mib", "64", "--statement-timeout", "1s")
	c := connect(t, ctx, r.Conninfo("lake"))
	metadataRows(t, ctx, c, 10000)
	wantCode(t, ctx, c, "SELECT count(*) FROM ducklake_metadata a, ducklake_metadata b", "53200", "out of memory")
	alive(t, ctx, c)
	wantCode(t, ctx, c, "SELECT count(*) FROM ducklake_metadata a JOIN ducklake_metadata b ON a.scope_id + b.scope_id < 0",
		"57014", "statement timeout")
	alive(t, ctx, c)
}

// TestLikeLinear: '%a%a…%ab' against a string of a's backtracked for a
// minute at twelve %s. Two thousand of them against 5 000 characters are
// answered (PostgreSQL: under a second), false, and true when the string
// ends in b.
func TestLikeLinear(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir())
	c := connect(t, ctx, r.Conninfo("lake"))
	s := strings.Repeat("a", 5000)
	p := strings.Repeat("%a", 2000) + "b"
	for _, tc := range []struct{ s, want string }{{s, "f"}, {s + "b", "t"}} {
		rs, err := c.Exec(ctx, fmt.Sprintf("SELECT '%s' LIKE '%s'", tc.s, p)).ReadAll()
		if err != nil || string(rs[0].Rows[0][0]) != tc.want {
			t.Fatalf("LIKE: %v %v, want %s", rs, err, tc.want)
		}
	}
}

// TestInvalidUTF8Refused: a bound text parameter with invalid UTF-8 and a
// NUL was stored and returned raw; PostgreSQL refuses it with 22021, in the
// simple protocol, the extended one (text and binary parameters) and COPY
// FROM alike.
func TestInvalidUTF8Refused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir())
	c := connect(t, ctx, r.Conninfo("lake"))
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	const msg = `invalid byte sequence for encoding "UTF8": 0xff`
	for _, format := range []int16{0, 1} {
		res := c.ExecParams(ctx, "INSERT INTO ducklake_metadata VALUES ($1, 'v', NULL, NULL)",
			[][]byte{[]byte("k\xff\xfe\x00")}, []uint32{1043}, []int16{format}, nil).Read()
		var pe *pgconn.PgError
		if !errors.As(res.Err, &pe) || pe.Code != "22021" || pe.Message != msg {
			t.Fatalf("format %d: %v, want 22021 %s", format, res.Err, msg)
		}
	}
	res := c.ExecParams(ctx, "INSERT INTO ducklake_metadata VALUES ($1, 'v', NULL, NULL)",
		[][]byte{[]byte("k\x00")}, []uint32{1043}, nil, nil).Read()
	var pe *pgconn.PgError
	if !errors.As(res.Err, &pe) || pe.Code != "22021" || pe.Message != `invalid byte sequence for encoding "UTF8": 0x00` {
		t.Fatalf("NUL: %v", res.Err)
	}
	wantCode(t, ctx, c, "INSERT INTO ducklake_metadata VALUES ('k\xff', 'v', NULL, NULL)", "22021", msg)
	_, err := c.CopyFrom(ctx, strings.NewReader("k\xff\tv\t\\N\t\\N\n"), "COPY ducklake_metadata FROM STDIN")
	if !errors.As(err, &pe) || pe.Code != "22021" || pe.Message != msg {
		t.Fatalf("COPY FROM: %v", err)
	}
	rs, err := c.Exec(ctx, "SELECT count(*) FROM ducklake_metadata").ReadAll()
	if err != nil || string(rs[0].Rows[0][0]) != "0" {
		t.Fatalf("rows stored: %v %v", rs, err)
	}
}

// TestSilentSocketsDoNotExhaustConnections: sockets that never send a
// startup packet took every connection slot; they are not counted until
// they do, so a real client gets in past ten times max-connections' worth
// of silent ones... up to the cap on connections in their startup phase.
func TestSilentSocketsDoNotExhaustConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir(), "--max-connections", "4")
	var silent []net.Conn
	defer func() {
		for _, s := range silent {
			s.Close()
		}
	}()
	for i := 0; i < 6; i++ { // more than max-connections, fewer than twice
		s, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, s)
	}
	c := connect(t, ctx, r.Conninfo("lake"))
	alive(t, ctx, c)
}

// TestSilentSocketsTimeOut: a socket that sends nothing is closed after
// auth-timeout.
func TestSilentSocketsTimeOut(t *testing.T) {
	r := testserver.Start(t, "file://"+t.TempDir(), "--auth-timeout", "200ms")
	s, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := s.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from a connection that sent no startup packet")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a silent socket open past auth-timeout")
	}
}
