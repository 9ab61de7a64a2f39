package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// query runs sql on c and returns the first column of its first row.
func query(t *testing.T, ctx context.Context, c *pgconn.PgConn, sql string) string {
	t.Helper()
	rs, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(rs) == 0 || len(rs[len(rs)-1].Rows) == 0 {
		t.Fatalf("%s: no row", sql)
	}
	return string(rs[len(rs)-1].Rows[0][0])
}

// TestPromoteReplica: pg_promote() on a replica that follows a busy writer
// fences the writer and makes the replica the writer of the store in
// place, without loading the catalog again: every commit the old writer
// acknowledged is there, sessions open on the replica stay connected and
// their next transactions may write (one begun before the promotion stays
// read-only, as on PostgreSQL), new connections are told in_hot_standby is
// off, a second promotion is refused as PostgreSQL refuses it, and what the
// promoted server commits survives its restart.
func TestPromoteReplica(t *testing.T) {
	store := "file://" + t.TempDir()
	a := start(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := workload.Config{ConnString: a.Conninfo("lake"), Writers: 3, CommitsPerWriter: 100000, Tables: 2, RetryWait: time.Millisecond, Seed: 17}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	log := &testenv.SyncBuffer{}
	rcfg, err := ParseConfig([]string{"--store", store, "--listen", "127.0.0.1:0", "--replica", "--replica-poll", "20ms"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rsrv := New(rcfg, slog.New(slog.NewTextHandler(log, nil)))
	r := testenv.Start(t, rsrv)
	defer r.Stop(t)

	connect := func(db string) *pgconn.PgConn {
		c, err := pgconn.Connect(ctx, r.Conninfo(db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	idle := connect("lake")
	pinned := connect("lake")
	if got := query(t, ctx, pinned, "BEGIN; SELECT count(*) FROM ducklake_snapshot"); got == "" {
		t.Fatal("no snapshot count")
	}
	if got := idle.ParameterStatus("in_hot_standby"); got != "on" {
		t.Fatalf("replica reports in_hot_standby=%q", got)
	}

	before, err := head(ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	ran := workload.Go(ctx, cfg)
	// Promote mid-run: once the replica has followed some of the
	// workload's commits, while the writers go on committing.
	for {
		h, err := head(ctx, idle)
		if err != nil {
			t.Fatal(err)
		}
		if h >= before+5 {
			break
		}
	}
	promoter := connect("postgres")
	if got := query(t, ctx, promoter, "SELECT pg_promote()"); got != "t" {
		t.Fatalf("pg_promote() = %q", got)
	}
	awaitFenced(t, a, "the old writer", time.Now(), time.Minute)
	var out workload.Outcome
	select {
	case out = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("workload still running after the old writer exited")
	}
	if out.Result == nil || len(out.Result.Landed()) < 3 {
		t.Fatalf("workload against the fenced writer ended with %v", out.Err)
	}
	if n := testutil.ToFloat64(rsrv.Metrics().ReplicaReloads); n != 0 {
		t.Fatalf("the replica reloaded its catalog %v times", n)
	}
	if got := testutil.ToFloat64(rsrv.Metrics().Promotions); got != 1 {
		t.Fatalf("moraine_promotions_total = %v", got)
	}
	if !strings.Contains(log.String(), "promoted: this server is the writer of its store") {
		t.Fatalf("the promotion is not logged:\n%s", log.String())
	}

	// Every acknowledged commit of the old writer is on the promoted one.
	check := connect("lake")
	if err := out.Result.Verify(ctx, check); err != nil {
		t.Fatalf("after promotion (%d acknowledged commits): %v", len(out.Result.Landed()), err)
	}
	if got := check.ParameterStatus("in_hot_standby"); got != "off" {
		t.Fatalf("a new connection to the promoted server is told in_hot_standby=%q", got)
	}

	// Sessions that were open: the idle one writes at its next
	// transaction; the one whose transaction began in recovery stays
	// read-only until it ends.
	for q, want := range map[string]string{"SELECT pg_is_in_recovery()": "f", "SHOW transaction_read_only": "off", "SHOW in_hot_standby": "off"} {
		if got := query(t, ctx, idle, q); got != want {
			t.Errorf("open session after promotion: %s = %q, want %q", q, got, want)
		}
	}
	if _, err := idle.Exec(ctx, "CREATE DATABASE after_promotion").ReadAll(); err != nil {
		t.Fatalf("a session open across the promotion cannot write: %v", err)
	}
	_, err = pinned.Exec(ctx, "INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)").ReadAll()
	if pgCode(err) != "25006" {
		t.Fatalf("a write in a transaction begun before the promotion: %v, want 25006", err)
	}
	if _, err := pinned.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, err = promoter.Exec(ctx, "SELECT pg_promote()").ReadAll()
	if pgCode(err) != "55000" || !strings.Contains(err.Error(), "recovery is not in progress") {
		t.Fatalf("a second pg_promote(): %v, want 55000 recovery is not in progress", err)
	}

	// The promoted server takes DuckLake commits (into the database the
	// open session created), and they are durable.
	cfg2 := workload.Config{ConnString: r.Conninfo("after_promotion"), Writers: 2, CommitsPerWriter: 15, Tables: 2, RetryWait: time.Millisecond, Seed: 18}
	if err := workload.Prepare(ctx, cfg2); err != nil {
		t.Fatal(err)
	}
	res, err := workload.Run(ctx, cfg2)
	if err != nil {
		t.Fatalf("commits on the promoted server: %v", err)
	}
	r.Stop(t)
	c := start(t, store)
	defer c.Stop(t)
	for db, res := range map[string]*workload.Result{"after_promotion": res, "lake": out.Result} {
		conn, err := pgconn.Connect(ctx, c.Conninfo(db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := res.Verify(ctx, conn); err != nil {
			t.Fatalf("%s, on a writer restarted on the promoted server's store: %v", db, err)
		}
	}
}
