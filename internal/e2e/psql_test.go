package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// psqlRun runs psql (the real libpq client) with conninfo and one command,
// and returns its output.
func psqlRun(t *testing.T, conninfo, command string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.Psql(t), "-X", "-v", "ON_ERROR_STOP=1", conninfo, "-c", command)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPsqlInspection: psql's everyday inspection commands answer — \du,
// \dt+, \d+, \l+, pg_stat_activity with the sessions that are really open
// (their state and statement), SHOW ALL.
func TestPsqlInspection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := testserver.Start(t, "file://"+t.TempDir())
	ci := r.Conninfo("lake")
	other, err := pgconn.Connect(ctx, ci)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `CREATE TABLE ducklake_snapshot(snapshot_id bigint primary key, snapshot_time timestamptz, schema_version bigint, next_catalog_id bigint, next_file_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `BEGIN; SELECT count(*) FROM ducklake_snapshot`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	for cmd, wants := range map[string][]string{
		`\du`:                   {"List of roles", "moraine", "Superuser"},
		`\dt+`:                  {"ducklake_snapshot", "table", "bytes"},
		`\d+ ducklake_snapshot`: {`Table "public.ducklake_snapshot"`, "snapshot_id", "bigint", "PRIMARY KEY"},
		`\l+`:                   {"List of databases", "lake", "UTF8", "pg_default"},
		`SHOW ALL`:              {"search_path", "server_version", "15.18"},
		`SELECT state, query FROM pg_stat_activity ORDER BY pid`: {
			"idle in transaction | BEGIN; SELECT count(*) FROM ducklake_snapshot", // the other session, in its block
			"active              | SELECT state, query FROM pg_stat_activity ORDER BY pid"},
	} {
		out, err := psqlRun(t, ci, cmd)
		if err != nil {
			t.Errorf("psql -c %q: %v\n%s", cmd, err, out)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("psql -c %q lacks %q:\n%s", cmd, w, out)
			}
		}
	}
}

// TestTargetSessionAttrs: a replica is a standby in libpq's eyes. With a
// multi-host connection string naming the writer and a replica (in either
// order), every target_session_attrs value picks the server PostgreSQL's
// primary or standby would be picked for.
func TestTargetSessionAttrs(t *testing.T) {
	store := "file://" + t.TempDir()
	w := testserver.Start(t, store)
	rep := testserver.Start(t, store, "--replica")
	hostport := func(addr string) (string, string) {
		i := strings.LastIndex(addr, ":")
		return addr[:i], addr[i+1:]
	}
	wh, wp := hostport(w.Addr)
	rh, rp := hostport(rep.Addr)
	for _, order := range []string{"writer first", "replica first"} {
		hosts, ports := wh+","+rh, wp+","+rp
		if order == "replica first" {
			hosts, ports = rh+","+wh, rp+","+wp
		}
		for attrs, want := range map[string]string{
			"read-write": "f", "primary": "f", "read-only": "t", "standby": "t", "prefer-standby": "t",
		} {
			ci := "host=" + hosts + " port=" + ports + " user=moraine dbname=lake sslmode=disable target_session_attrs=" + attrs
			out, err := psqlRun(t, ci, "SELECT pg_is_in_recovery()")
			if err != nil {
				t.Errorf("%s, target_session_attrs=%s: %v\n%s", order, attrs, err, out)
				continue
			}
			if got := strings.Fields(out); len(got) < 3 || got[2] != want {
				t.Errorf("%s, target_session_attrs=%s: pg_is_in_recovery() = %q, want %s", order, attrs, out, want)
			}
		}
		// any takes the first that answers.
		out, err := psqlRun(t, "host="+hosts+" port="+ports+" user=moraine dbname=lake sslmode=disable target_session_attrs=any", "SELECT pg_is_in_recovery()")
		want := "f"
		if order == "replica first" {
			want = "t"
		}
		if got := strings.Fields(out); err != nil || len(got) < 3 || got[2] != want {
			t.Errorf("%s, target_session_attrs=any: %q %v, want %s", order, out, err, want)
		}
	}
}
