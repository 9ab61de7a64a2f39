package pgwire

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moraine-db/moraine/internal/testenv"
)

func TestVerifiers(t *testing.T) {
	v, err := SCRAMVerifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "SCRAM-SHA-256$4096:") {
		t.Fatalf("verifier %q", v)
	}
	if _, ok := parseSCRAMVerifier(v); !ok {
		t.Fatal("own verifier does not parse")
	}
	for _, bad := range []string{"", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:c2FsdA==$a:b", "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA", "md5abc"} {
		if _, ok := parseSCRAMVerifier(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	md5 := MD5Verifier("carol", "secret")
	cases := []struct {
		u    User
		pw   string
		want bool
	}{
		{User{Name: "a", Secret: v}, "pw", true},
		{User{Name: "a", Secret: v}, "pw2", false},
		{User{Name: "carol", Secret: md5}, "secret", true},
		{User{Name: "other", Secret: md5}, "secret", false}, // md5 is salted with the user name
		{User{Name: "a", Secret: "plain"}, "plain", true},
		{User{Name: "a", Secret: "plain"}, "Plain", false},
	}
	for _, tc := range cases {
		if got := checkCleartext(tc.u, tc.pw); got != tc.want {
			t.Errorf("checkCleartext(%+v, %q) = %v", tc.u, tc.pw, got)
		}
	}
}

func TestValidateUser(t *testing.T) {
	v, _ := SCRAMVerifier("pw")
	cases := []struct {
		u  User
		ok bool
	}{
		{User{Name: "a", Method: AuthTrust}, true},
		{User{Name: "a", Method: AuthPassword, Secret: "x"}, true},
		{User{Name: "a", Method: AuthPassword}, false},
		{User{Name: "a", Method: AuthMD5, Secret: MD5Verifier("a", "x")}, true},
		{User{Name: "a", Method: AuthMD5, Secret: v}, true},
		{User{Name: "a", Method: AuthSCRAM, Secret: v}, true},
		{User{Name: "a", Method: AuthSCRAM, Secret: "plain"}, true},
		{User{Name: "a", Method: AuthSCRAM, Secret: MD5Verifier("a", "x")}, false},
		{User{Name: "a", Method: AuthSCRAM, Secret: "SCRAM-SHA-256$broken"}, false},
		{User{Name: "a", Method: AuthMethod(9), Secret: "x"}, false},
	}
	for _, tc := range cases {
		if err := validateUser(tc.u); (err == nil) != tc.ok {
			t.Errorf("validateUser(%+v) = %v", tc.u, err)
		}
	}
	if _, err := New(Config{Users: []User{{Name: "a"}, {Name: "a"}}}, &toyExec{}); err == nil {
		t.Error("duplicate user accepted")
	}
	for _, m := range []AuthMethod{AuthTrust, AuthPassword, AuthMD5, AuthSCRAM} {
		if got, err := ParseAuthMethod(m.String()); err != nil || got != m {
			t.Errorf("ParseAuthMethod(%q) = %v, %v", m, got, err)
		}
	}
}

// Verifiers copied out of a real PostgreSQL's pg_authid work here, so an
// operator can migrate logins without knowing the passwords.
func TestPostgresVerifiers(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	get := func(enc string) string {
		sql := "SET password_encryption = '" + enc + "'; DROP ROLE IF EXISTS pgwire_verifier_test; " +
			"CREATE ROLE pgwire_verifier_test PASSWORD 'hunter2'; SELECT rolpassword FROM pg_authid WHERE rolname = 'pgwire_verifier_test'; " +
			"DROP ROLE pgwire_verifier_test"
		res, err := conn.Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return string(res[3].Rows[0][0])
	}
	scramV, md5V := get("scram-sha-256"), get("md5")
	if md5V != MD5Verifier("pgwire_verifier_test", "hunter2") {
		t.Errorf("md5: PostgreSQL %q, ours %q", md5V, MD5Verifier("pgwire_verifier_test", "hunter2"))
	}
	u := User{Name: "pgwire_verifier_test", Method: AuthSCRAM, Secret: scramV}
	if err := validateUser(u); err != nil || !checkCleartext(u, "hunter2") || checkCleartext(u, "hunter3") {
		t.Errorf("PostgreSQL verifier %q not usable: %v", scramV, err)
	}
	// And a real SCRAM login against it.
	ts := startServer(t, Config{Users: []User{u}})
	c, err := pgconn.Connect(ctx, ts.connString(u.Name, "hunter2", "disable"))
	if err != nil {
		t.Fatalf("login with PostgreSQL's verifier: %v", err)
	}
	c.Close(ctx)
}
