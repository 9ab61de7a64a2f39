package pgwire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/moraine-db/moraine/internal/testenv"
)

// Password guessing was unlimited and left no trace. Every failure is now
// logged with its user and address, and past AuthFailuresPerMinute failures
// the address is refused before authentication — even with the right
// password — until the minute has passed.
func TestAuthFailuresLimitedAndLogged(t *testing.T) {
	var logs testenv.SyncBuffer
	ts := startServer(t, Config{AuthFailuresPerMinute: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := func(password string) string {
		c, err := pgx.Connect(ctx, ts.connString("dave", password, "disable"))
		if err == nil {
			c.Close(ctx)
			return ""
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code + " " + pe.Message
		}
		t.Fatalf("connect: %v", err)
		return ""
	}
	for i := 0; i < 3; i++ {
		if got := code("wrong"); !strings.HasPrefix(got, "28P01 password authentication failed") {
			t.Fatalf("guess %d: %q", i, got)
		}
	}
	if got := code(pwDave); !strings.HasPrefix(got, "28000 too many failed authentication attempts from 127.0.0.1") {
		t.Fatalf("after three failures: %q", got)
	}
	if n := strings.Count(logs.String(), `msg="pgwire: authentication failed"`); n != 3 {
		t.Fatalf("%d failures logged, want 3:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "user=dave") {
		t.Fatalf("the log does not name the user:\n%s", logs.String())
	}
}

// The limiter's window slides: failures older than a minute no longer count.
func TestAuthLimiterWindow(t *testing.T) {
	l := newAuthLimiter(2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5432}
	l.failed(addr)
	now = now.Add(30 * time.Second)
	l.failed(addr)
	if _, blocked := l.blocked(addr); !blocked {
		t.Fatal("two failures within a minute did not block")
	}
	now = now.Add(31 * time.Second) // the first failure is past the window
	if _, blocked := l.blocked(addr); blocked {
		t.Fatal("a failure older than a minute still counts")
	}
	now = now.Add(time.Minute)
	l.blocked(addr)
	if len(l.fails) != 0 {
		t.Fatalf("an address without recent failures is remembered: %v", l.fails)
	}
}

// saltOf runs the first SCRAM round for user and returns the salt the
// server announces.
func saltOf(t *testing.T, ts *testServer, user string) string {
	t.Helper()
	rc := dialRaw(t, ts)
	rc.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": user, "database": "lake"}})
	if msg, err := rc.fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := msg.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("got %T, want AuthenticationSASL", msg)
	}
	rc.send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=clientnonce")})
	msg, err := rc.fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	cont, ok := msg.(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		t.Fatalf("got %T, want AuthenticationSASLContinue", msg)
	}
	for _, f := range strings.Split(string(cont.Data), ",") {
		if s, ok := strings.CutPrefix(f, "s="); ok {
			return s
		}
	}
	t.Fatalf("no salt in %q", cont.Data)
	return ""
}

// An unknown user's fake salt was drawn anew at every start, while a real
// user's stays: watching salts across a restart told them apart. With the
// same MockAuthKey (the server derives it from the users file) a restarted
// server announces the same fake salt; another key, another salt.
func TestMockSaltStableAcrossRestarts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	first := saltOf(t, startServer(t, Config{MockAuthKey: key}), "nobody")
	again := saltOf(t, startServer(t, Config{MockAuthKey: key}), "nobody")
	other := saltOf(t, startServer(t, Config{MockAuthKey: []byte("another key")}), "nobody")
	if first != again {
		t.Fatalf("the fake salt changed across a restart: %q, %q", first, again)
	}
	if first == other {
		t.Fatal("two keys gave the same fake salt")
	}
}

// ssl-require refuses a TCP client without TLS, with PostgreSQL's pg_hba
// wording, and admits the same client over TLS.
func TestRequireTLS(t *testing.T) {
	ts := startServer(t, Config{RequireTLS: true, TLS: selfSignedTLS(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pgx.Connect(ctx, ts.connString("alice", "", "disable"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" || !strings.Contains(pe.Message, `no pg_hba.conf entry for host "127.0.0.1", user "alice", database "lake", no encryption`) {
		t.Fatalf("without TLS: %v", err)
	}
	pgxConnect(t, ts, "alice", "", "require")
}

// A message out of place during authentication is named by its protocol
// type byte, as PostgreSQL names it, not by a Go type.
func TestAuthProtocolErrorNamesMessageType(t *testing.T) {
	ts := startServer(t, Config{})
	rc := dialRaw(t, ts)
	rc.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "dave", "database": "lake"}})
	if _, err := rc.fe.Receive(); err != nil { // AuthenticationSASL
		t.Fatal(err)
	}
	rc.send(&pgproto3.Query{String: "SELECT 1"})
	got := rc.until('E')
	if want := "expected SASL response, got message type 81"; !strings.Contains(got[len(got)-1], want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
