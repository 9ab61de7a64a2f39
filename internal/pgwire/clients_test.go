package pgwire

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/moraine-db/moraine/internal/testenv"
)

var authCases = []struct {
	user, password string
}{
	{"alice", ""},
	{"bob", pwBob},
	{"carol", pwCarol},
	{"dave", pwDave},
}

func TestPgxAuthAndTLS(t *testing.T) {
	ts := startServer(t, Config{TLS: selfSignedTLS(t)})
	for _, sslmode := range []string{"disable", "require"} {
		for _, ac := range authCases {
			t.Run(ac.user+"/"+sslmode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, ts.connString(ac.user, ac.password, sslmode))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				var one int
				if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
					t.Fatalf("SELECT 1 = %d, %v", one, err)
				}
				if got := conn.PgConn().ParameterStatus("server_version"); got != "16.4" {
					t.Errorf("server_version %q", got)
				}
				tlsOn := fmt.Sprintf("%T", conn.PgConn().Conn()) == "*tls.Conn"
				if tlsOn != (sslmode == "require") {
					t.Errorf("TLS %v with sslmode %s", tlsOn, sslmode)
				}
			})
		}
		for _, user := range []string{"bob", "carol", "dave", "nobody"} {
			t.Run("wrong password "+user+"/"+sslmode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := pgx.Connect(ctx, ts.connString(user, "wrong", sslmode))
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != pgcode.InvalidPassword {
					t.Fatalf("got %v, want 28P01", err)
				}
			})
		}
	}
	t.Run("SCRAM-SHA-256-PLUS channel binding over TLS", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, ts.connString("dave", pwDave, "require")+" channel_binding=require")
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		// A client that does not bind still logs in with plain SCRAM.
		conn, err = pgx.Connect(ctx, ts.connString("dave", pwDave, "require")+" channel_binding=disable")
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		// A wrong password is still refused on the PLUS path.
		_, err = pgx.Connect(ctx, ts.connString("dave", "wrong", "require")+" channel_binding=require")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != pgcode.InvalidPassword {
			t.Fatalf("got %v, want 28P01", err)
		}
	})
	t.Run("trusted network skips passwords", func(t *testing.T) {
		trusted := startServer(t, Config{TrustedNets: loopback})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, trusted.connString("dave", "", "disable"))
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	})
	t.Run("unix socket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=dave password=%s dbname=lake", ts.sockDir, ts.port, pwDave))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var v string
		if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil || !strings.HasPrefix(v, "PostgreSQL 16") {
			t.Fatalf("version() = %q, %v", v, err)
		}
	})
}

func TestPsqlAuthAndTLS(t *testing.T) {
	psql := testenv.Psql(t)
	ts := startServer(t, Config{TLS: selfSignedTLS(t)})
	run := func(t *testing.T, conninfo, password string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append([]string{conninfo, "-X", "-At", "-v", "ON_ERROR_STOP=1"}, args...)...)
		cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10", "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, sslmode := range []string{"disable", "require"} {
		for _, ac := range authCases {
			t.Run(ac.user+"/"+sslmode, func(t *testing.T) {
				ci := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=lake sslmode=%s", ts.port, ac.user, sslmode)
				out, err := run(t, ci, ac.password, "-c", "SELECT 1", "-c", "SELECT version()")
				if err != nil || out != "1\nPostgreSQL 16.4 (moraine toy)\n" {
					t.Fatalf("psql: %v\n%s", err, out)
				}
			})
		}
		if sslmode == "require" {
			t.Run("channel_binding=require", func(t *testing.T) {
				ci := fmt.Sprintf("host=127.0.0.1 port=%d user=dave dbname=lake sslmode=require channel_binding=require", ts.port)
				out, err := run(t, ci, pwDave, "-c", "SELECT 1")
				if err != nil || out != "1\n" {
					t.Fatalf("psql: %v\n%s", err, out)
				}
			})
		}
		t.Run("wrong password/"+sslmode, func(t *testing.T) {
			ci := fmt.Sprintf("host=127.0.0.1 port=%d user=dave dbname=lake sslmode=%s", ts.port, sslmode)
			out, err := run(t, ci, "wrong", "-c", "SELECT 1")
			if err == nil || !strings.Contains(out, `password authentication failed for user "dave"`) {
				t.Fatalf("psql: %v\n%s", err, out)
			}
		})
	}
	t.Run("unix socket", func(t *testing.T) {
		out, err := run(t, fmt.Sprintf("host=%s port=%d user=carol dbname=lake", ts.sockDir, ts.port), pwCarol, "-c", "SELECT 1")
		if err != nil || out != "1\n" {
			t.Fatalf("psql: %v\n%s", err, out)
		}
	})
	t.Run("copy both directions", func(t *testing.T) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in.txt")
		if err := os.WriteFile(in, []byte("10\tten\n11\t\\N\n12\ttab\\there\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ci := fmt.Sprintf("host=127.0.0.1 port=%d user=alice dbname=lake sslmode=require", ts.port)
		out, err := run(t, ci, "", "-c", `\copy t from '`+in+`'`)
		if err != nil || out != "COPY 3\n" {
			t.Fatalf("copy in: %v\n%s", err, out)
		}
		outText := filepath.Join(dir, "out.txt")
		outBin := filepath.Join(dir, "out.bin")
		if out, err := run(t, ci, "", "-c", `\copy t to '`+outText+`'`, "-c", `\copy t to '`+outBin+`' with (format binary)`); err != nil {
			t.Fatalf("copy out: %v\n%s", err, out)
		}
		text, _ := os.ReadFile(outText)
		if string(text) != "10\tten\n11\t\\N\n12\ttab\\there\n" {
			t.Errorf("text copy out %q", text)
		}
		bin, _ := os.ReadFile(outBin)
		// Load the binary file back through COPY FROM STDIN (binary).
		if !strings.HasPrefix(string(bin), "PGCOPY\n\xff\r\n\x00") || !strings.HasSuffix(string(bin), "\xff\xff") {
			t.Fatalf("binary copy out %q", bin)
		}
		before := len(ts.exec.snapshot())
		out, err = run(t, ci, "", "-c", `\copy t from '`+outBin+`' with (format binary)`)
		if err != nil || out != "COPY 3\n" {
			t.Fatalf("binary copy in: %v\n%s", err, out)
		}
		if got := ts.exec.snapshot()[before:]; len(got) != 3 || got[2].id != 12 || *got[2].name != "tab\there" || got[1].name != nil {
			t.Errorf("rows after binary round trip: %+v", got)
		}
	})
}

func pgxConnect(t *testing.T, ts *testServer, user, password, sslmode string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, ts.connString(user, password, sslmode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Binary parameters and results through pgx's extended protocol, and the
// same values through the simple protocol (text).
func TestPgxValues(t *testing.T) {
	ts := startServer(t, Config{})
	conn := pgxConnect(t, ts, "alice", "", "disable")
	ctx := context.Background()

	tstz := time.Date(2026, 1, 2, 3, 4, 5, 678000000, time.UTC)
	uuid := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	var (
		i2  int16
		i4  int32
		i8  int64
		f8  float64
		b   bool
		s   string
		by  []byte
		u   [16]byte
		ts_ time.Time
		num pgtype.Numeric
		d   time.Time
		iv  pgtype.Interval
		ia  []int32
		ta  []string
		nul *string
	)
	err := conn.QueryRow(ctx,
		"SELECT $1::int2, $2::int4, $3::int8, $4::float8, $5::bool, $6::text, $7::bytea, $8::uuid, $9::timestamptz, $10::numeric, $11::date, $12::interval, $13::_int4, $14::_text, $15::text",
		int16(-3), int32(70000), int64(-1)<<50, 3.5, true, "héllo", []byte{0, 1, 255}, uuid, tstz,
		pgtype.Numeric{Int: big.NewInt(-12345), Exp: -2, Valid: true}, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC),
		pgtype.Interval{Months: 14, Days: -3, Microseconds: 3723000001, Valid: true}, []int32{1, -2, 3}, []string{"a", "b,c", `q"`}, nil,
	).Scan(&i2, &i4, &i8, &f8, &b, &s, &by, &u, &ts_, &num, &d, &iv, &ia, &ta, &nul)
	if err != nil {
		t.Fatal(err)
	}
	if i2 != -3 || i4 != 70000 || i8 != -1<<50 || f8 != 3.5 || !b || s != "héllo" || string(by) != "\x00\x01\xff" ||
		u != uuid || !ts_.Equal(tstz) || num.Int.Int64() != -12345 || num.Exp != -2 || d.Year() != 1999 ||
		iv.Months != 14 || iv.Days != -3 || iv.Microseconds != 3723000001 || fmt.Sprint(ia) != "[1 -2 3]" ||
		fmt.Sprint(ta) != `[a b,c q"]` || nul != nil {
		t.Errorf("round trip: %v %v %v %v %v %q %x %x %v %v %v %v %v %v %v %v", i2, i4, i8, f8, b, s, by, u, ts_, num, d, iv, ia, ta, nul, err)
	}

	// Every supported type, binary (extended) and text (simple protocol),
	// must scan to the same values.
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		rows, err := conn.Query(ctx, "SELECT types", mode)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		got := fmt.Sprintf("%v", vals)
		want := "[-2 40000 1099511627776 1.5 2.25 {12345678 -3 false finite true} true hello varchar aname 99 [222 173] " +
			"[160 238 188 153 156 11 78 248 187 109 107 185 189 56 10 17] 2026-01-02 00:00:00 +0000 UTC {11045500000 true} " +
			"2026-01-02 03:04:05.678 +0000 UTC 2026-01-02 03:04:05.678 +0000 UTC {5400000000 0 0 true} 2200 {3 4 true} [1 2 3] [a b c] <nil>]"
		if got != want {
			t.Errorf("%v:\n got  %s\n want %s", mode, got, want)
		}
	}
}

// Text encodings as psql prints them must match PostgreSQL's output.
func TestPsqlTextValues(t *testing.T) {
	psql := testenv.Psql(t)
	ts := startServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, psql, fmt.Sprintf("host=127.0.0.1 port=%d user=alice dbname=lake sslmode=disable", ts.port),
		"-X", "-A", "-F", "|", "-t", "-c", "SELECT types")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := `-2|40000|1099511627776|1.5|2.25|12345.678|t|hello|varchar|aname|c|\xdead|a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11|2026-01-02|03:04:05.5|2026-01-02 03:04:05.678|2026-01-02 03:04:05.678+00|01:30:00|2200|(3,4)|{1,2,3}|{a,"b c"}|` + "\n"
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestPgxCopy(t *testing.T) {
	ts := startServer(t, Config{TLS: selfSignedTLS(t)})
	conn := pgxConnect(t, ts, "dave", pwDave, "require")
	ctx := context.Background()
	src := [][]any{{int64(1), "one"}, {int64(2), nil}, {int64(3), "three\nlines"}}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "name"}, pgx.CopyFromRows(src))
	if err != nil || n != 3 {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	for _, format := range []string{"text", "binary"} {
		var buf strings.Builder
		tag, err := conn.PgConn().CopyTo(ctx, &buf, "COPY t TO STDOUT (FORMAT "+format+")")
		if err != nil || tag.String() != "COPY 3" {
			t.Fatalf("CopyTo %s = %v, %v", format, tag, err)
		}
		if format == "text" && buf.String() != "1\tone\n2\t\\N\n3\tthree\\nlines\n" {
			t.Errorf("text copy %q", buf.String())
		}
		if format == "binary" {
			want := "PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
				"\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x03one" +
				"\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x02\xff\xff\xff\xff" +
				"\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x0bthree\nlines" +
				"\xff\xff"
			if buf.String() != want {
				t.Errorf("binary copy %q", buf.String())
			}
		}
	}
	// COPY IN through pgconn in text format.
	tag, err := conn.PgConn().CopyFrom(ctx, strings.NewReader("4\tfour\n5\t\\N\n\\.\n"), "COPY t FROM STDIN")
	if err != nil || tag.String() != "COPY 2" {
		t.Fatalf("text CopyFrom = %v, %v", tag, err)
	}
	// A failing COPY IN leaves the connection usable.
	_, err = conn.PgConn().CopyFrom(ctx, strings.NewReader("notanumber\tx\n"), "COPY t FROM STDIN")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgcode.InvalidTextRepresentation {
		t.Fatalf("bad CopyFrom err = %v", err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after failed copy: %v", err)
	}
}

func TestPgxCancel(t *testing.T) {
	ts := startServer(t, Config{TLS: selfSignedTLS(t)})
	for _, sslmode := range []string{"disable", "require"} {
		t.Run(sslmode, func(t *testing.T) {
			conn := pgxConnect(t, ts, "alice", "", sslmode)
			go func() {
				time.Sleep(200 * time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := conn.PgConn().CancelRequest(ctx); err != nil {
					t.Errorf("CancelRequest: %v", err)
				}
			}()
			start := time.Now()
			_, err := conn.Exec(context.Background(), "SELECT pg_sleep(3600)")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != pgcode.QueryCanceled || pe.Message != "canceling statement due to user request" {
				t.Fatalf("err = %v", err)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("cancel of an hour-long statement took %v", d)
			}
			if _, err := conn.Exec(context.Background(), "SELECT 1"); err != nil {
				t.Fatalf("after cancel: %v", err)
			}
		})
	}
	t.Run("wrong key is ignored", func(t *testing.T) {
		conn := pgxConnect(t, ts, "alice", "", "disable")
		other := pgxConnect(t, ts, "alice", "", "disable")
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = other.PgConn().CancelRequest(context.Background()) // cancels other's (idle) backend only
		}()
		if _, err := conn.Exec(context.Background(), "SELECT pg_sleep(0.4)"); err != nil {
			t.Fatalf("statement of another backend was canceled: %v", err)
		}
	})
}

func TestPgxTransactionStatus(t *testing.T) {
	ts := startServer(t, Config{})
	conn := pgxConnect(t, ts, "alice", "", "disable")
	ctx := context.Background()
	pc := conn.PgConn()
	if _, err := pc.Exec(ctx, "BEGIN; SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if s := pc.TxStatus(); s != 'T' {
		t.Errorf("after BEGIN: %c", s)
	}
	_, err := pc.Exec(ctx, "bogus").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42601" || pe.Position != 1 {
		t.Errorf("bogus: %v", err)
	}
	if s := pc.TxStatus(); s != 'E' {
		t.Errorf("after error: %c", s)
	}
	if _, err := pc.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if s := pc.TxStatus(); s != 'I' {
		t.Errorf("after ROLLBACK: %c", s)
	}
	// Row limits through pgconn's portal API are exercised in
	// TestProtocolExchanges; here: a multi-result batch through pgx.
	results, err := pc.Exec(ctx, "SELECT 1; SELECT * FROM t WHERE false; SELECT generate_series(1,3)").ReadAll()
	if err != nil || len(results) != 3 || results[1].CommandTag.String() != "SELECT 0" || len(results[2].Rows) != 3 {
		for _, r := range results {
			t.Logf("result: %s fields=%d rows=%d err=%v", r.CommandTag, len(r.FieldDescriptions), len(r.Rows), r.Err)
		}
		t.Fatalf("batch: %v", err)
	}
}
