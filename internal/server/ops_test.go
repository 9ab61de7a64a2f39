package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// startLogged is start with the server's log, text or JSON, captured in buf.
func startLogged(t *testing.T, buf *testenv.SyncBuffer, format string, args ...string) *testenv.Running {
	t.Helper()
	var h slog.Handler = slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	if format == "json" {
		h = slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return startWith(t, slog.New(h), args...)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestUsersFileSCRAM: a user added with AddUser logs in with its password
// over SCRAM; a wrong password and an unknown user get 28P01; the file holds
// only the verifier. The log, text and JSON, never carries the password or
// the store URL's secret parameters.
func TestUsersFileSCRAM(t *testing.T) {
	const password = "s3cret-pass-phrase"
	const s3secret = "AKIAVERYSECRETKEY123"
	users := filepath.Join(t.TempDir(), "users")
	if err := AddUser(users, "alice", password); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(users, "bob", "other"); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(users, "alice", password); err != nil { // replaces, no duplicate
		t.Fatal(err)
	}
	raw, err := os.ReadFile(users)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), password) || strings.Count(string(raw), "alice:SCRAM-SHA-256$") != 1 || !strings.Contains(string(raw), "bob:SCRAM-SHA-256$") {
		t.Fatalf("users file:\n%s", raw)
	}
	if fi, _ := os.Stat(users); fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v, want 0600", fi.Mode().Perm())
	}
	for _, bad := range []struct{ name, pw string }{{"", "x"}, {"a:b", "x"}, {"a b", "x"}, {"carol", ""}} {
		if err := AddUser(users, bad.name, bad.pw); !errors.Is(err, ErrBadUser) {
			t.Errorf("AddUser(%q, %q) = %v, want ErrBadUser", bad.name, bad.pw, err)
		}
	}

	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var logs testenv.SyncBuffer
			dir := t.TempDir()
			store := "file://" + dir + "?secret_access_key=" + s3secret
			// file:// ignores unknown query parameters? If not, use the
			// plain directory and check the redaction separately.
			if _, err := ParseConfig([]string{"--store", store}, nil, io.Discard); err != nil {
				t.Fatal(err)
			}
			r := startLogged(t, &logs, format, "--store", "file://"+dir, "--listen", "127.0.0.1:0", "--users-file", users, "--log-format", format)
			defer r.Stop(t)
			host, port, _ := net.SplitHostPort(r.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dial := func(user, pw string) error {
				c, err := pgconn.Connect(ctx, "host="+host+" port="+port+" dbname=lake sslmode=disable user="+user+" password="+pw)
				if err == nil {
					defer c.Close(context.Background())
					_, err = c.Exec(ctx, "SELECT 1").ReadAll()
				}
				return err
			}
			if err := dial("alice", password); err != nil {
				t.Fatalf("right password refused: %v", err)
			}
			if err := dial("bob", "other"); err != nil {
				t.Fatalf("bob refused: %v", err)
			}
			for _, c := range []struct{ user, pw string }{{"alice", "Wr0ng-pa55-zq"}, {"alice", "other"}, {"nobody", password}} {
				if err := dial(c.user, c.pw); pgCode(err) != "28P01" {
					t.Fatalf("%s/%s: got %v, want SQLSTATE 28P01", c.user, c.pw, err)
				}
			}
			if !strings.Contains(logs.String(), ReadyMessage) {
				t.Fatalf("log lacks the ready line:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), password) || strings.Contains(logs.String(), "Wr0ng-pa55-zq") {
				t.Fatalf("log leaks the password:\n%s", logs.String())
			}
		})
	}
	if got := redactURL("s3://AKIA:" + s3secret + "@bucket/p?region=x&secret_access_key=" + s3secret); strings.Contains(got, s3secret) {
		t.Fatalf("redactURL leaks: %s", got)
	}
}

// TestServeHelpListsEverySetting: --help documents every setting with its
// environment variable, and a bad value names the setting.
func TestServeHelpListsEverySetting(t *testing.T) {
	for _, args := range [][]string{{"--replica"}, {"--replica=true"}, {"--replica", "--replica-poll", "5ms"}} {
		c, err := ParseConfig(args, nil, io.Discard)
		if err != nil || !c.Replica {
			t.Errorf("%v: %+v, %v", args, c, err)
		}
	}
	if c, err := ParseConfig([]string{"--wal-in-flight", "3"}, nil, io.Discard); err != nil || c.WALInFlight != 3 {
		t.Errorf("--wal-in-flight 3: %+v, %v", c, err)
	}
	var out bytes.Buffer
	if _, err := ParseConfig([]string{"--help"}, nil, &out); err == nil {
		t.Fatal("--help: no error")
	}
	for _, name := range append(Settings(), "config") {
		if !strings.Contains(out.String(), "-"+name+" ") && !strings.Contains(out.String(), "-"+name+"\n") {
			t.Errorf("--help lacks -%s:\n%s", name, out.String())
		}
		if !strings.Contains(out.String(), "MORAINE_"+envName(name)) {
			t.Errorf("--help lacks MORAINE_%s", envName(name))
		}
	}
	for _, c := range []struct {
		args []string
		env  []string
		name string
	}{
		{[]string{"--max-connections", "0"}, nil, "max-connections"},
		{nil, []string{"MORAINE_LOG_FORMAT=xml"}, "log-format"},
		{[]string{"--listen", "0.0.0.0:5433"}, nil, "listen"},
		{[]string{"--replica-poll", "soon"}, nil, "replica-poll"},
		{[]string{"--replica=maybe"}, nil, "replica"},
		{[]string{"--wal-in-flight", "5"}, nil, "wal-in-flight"},
		{nil, []string{"MORAINE_WAL_IN_FLIGHT=-1"}, "wal-in-flight"},
		{[]string{"--metrics-listen", "0.0.0.0:9187"}, nil, "metrics-listen"},
		{[]string{"--ssl-require"}, nil, "ssl-require"},
		{[]string{"--statement-mem-mib", "-1"}, nil, "statement-mem-mib"},
		{[]string{"--auth-failures-per-minute", "-1"}, nil, "auth-failures-per-minute"},
	} {
		_, err := ParseConfig(c.args, c.env, io.Discard)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%v %v: %v, want ErrUsage naming %s", c.args, c.env, err, c.name)
		}
	}
	if _, err := ParseConfig([]string{"--metrics-listen", "0.0.0.0:9187", "--metrics-remote"}, nil, io.Discard); err != nil {
		t.Errorf("metrics-listen beyond loopback with metrics-remote: %v", err)
	}
}

// startWithMetrics starts the server on store with /metrics on a free
// loopback port, and returns that port's address too.
func startWithMetrics(t *testing.T, store string, extra ...string) (*testenv.Running, string) {
	t.Helper()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ml.Addr().String()
	ml.Close()
	return start(t, store, append([]string{"--metrics-listen", maddr}, extra...)...), maddr
}

// TestMetricsSeries: the /metrics endpoint exposes the series operators
// rely on, with live values after some traffic.
func TestMetricsSeries(t *testing.T) {
	r, maddr := startWithMetrics(t, "file://"+t.TempDir())
	defer r.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := workload.Config{ConnString: r.Conninfo("lake"), Writers: 3, CommitsPerWriter: 5, Tables: 1, RetryWait: time.Millisecond, Seed: 3}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := httpGet(t, "http://"+maddr+"/metrics")
	var conflicts float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "moraine_conflicts_total{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			conflicts += v
		}
	}
	t.Logf("workload retries %d, conflicts %d; moraine_conflicts_total sums to %v", res.Retries, res.Conflicts, conflicts)
	if (res.Retries+res.Conflicts > 0) != (conflicts > 0) {
		t.Errorf("workload saw %d retries and %d conflicts, moraine_conflicts_total sums to %v", res.Retries, res.Conflicts, conflicts)
	}
	for _, want := range []string{
		`moraine_commits_total{outcome="ok"}`,
		`moraine_commits_total{outcome="conflict"}`,
		`moraine_commit_duration_seconds_bucket`,
		`moraine_store_op_duration_seconds_bucket{op="put_if_absent"`,
		`moraine_store_op_duration_seconds_bucket{op="get"`,
		`moraine_store_bytes_total{direction="write"}`,
		`moraine_wal_objects_total`,
		`moraine_store_compactions_total`,
		`moraine_block_cache_bytes `,
		`moraine_resident_rows{database="lake",table="ducklake_snapshot"}`,
		`moraine_resident_bytes{database="lake",table="ducklake_data_file"}`,
		`moraine_statement_duration_seconds_bucket{shape="commit"`,
		`moraine_build_info{goversion=`,
		`moraine_connections `,
		`moraine_conflicts_total{class="unique"}`,
		`moraine_connections_total `,
		`moraine_statements_total{shape="select"}`,
		`moraine_statements_total{shape="commit"}`,
		`go_goroutines `,
		`go_sched_latencies_seconds_bucket{le=`,
		`go_gc_duration_seconds`,
		`process_cpu_seconds_total `,
		`process_open_fds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	checkMetricTypes(t, body)
	if v := metricValue(t, body, `moraine_commits_total{outcome="ok"}`); v < 6 {
		t.Errorf("commits ok = %v, want >= 6", v)
	}
	if v := metricValue(t, body, `moraine_connections_total`); v < 3 {
		t.Errorf("connections_total = %v", v)
	}
	// Every commit read its table's eight column statistics, one B-tree
	// leaf that the commit before had just rewritten.
	if v := metricValue(t, body, `moraine_copy_cache_misses_total`); v < float64(res.Commits) {
		t.Errorf("copy_cache_misses_total = %v after %d commits", v, res.Commits)
	}
	if v := metricValue(t, body, `moraine_copy_cache_bytes`); v <= 0 {
		t.Errorf("copy_cache_bytes = %v", v)
	}
	// The scheduler saw every round trip of the workload's commits.
	if v := metricValue(t, body, `go_sched_latencies_seconds_count`); v < 1 {
		t.Errorf("go_sched_latencies_seconds_count = %v", v)
	}
	if v := metricValue(t, body, `process_cpu_seconds_total`); v <= 0 {
		t.Errorf("process_cpu_seconds_total = %v", v)
	}
	if got := httpGet(t, "http://"+maddr+"/readyz"); got != "ready\n" {
		t.Errorf("/readyz = %q", got)
	}
}

func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(series):]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no series %s", series)
	return 0
}

// TestFailover: while writers commit through server A, server B opens the
// same store. A is fenced: it exits with ErrFenced, and B's catalog holds
// exactly the commits A acknowledged (the workload verifier checks that no
// acknowledged commit is missing and that no refused one landed). A commit
// whose COMMIT got no answer — A made it durable, then went away, or the
// workload, stopping at its first error, closed the connection before the
// answer came — may be on B or not, whole (workload.Result.InDoubt).
func TestFailover(t *testing.T) {
	store := "file://" + t.TempDir()
	a := start(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := workload.Config{ConnString: a.Conninfo("lake"), Writers: 3, CommitsPerWriter: 100000, Tables: 2, RetryWait: time.Millisecond, Seed: 11}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// An idle client of A, to see what it is told after the fence.
	idle, err := pgconn.Connect(ctx, a.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(context.Background())

	ran := workload.Go(ctx, cfg)
	time.Sleep(700 * time.Millisecond)
	b := start(t, store, "--takeover")
	defer b.Stop(t)
	took, err := awaitFenced(t, a, "server A", time.Now(), time.Minute)
	t.Logf("A exited %v after B opened the store: %v", took, err)
	var r workload.Outcome
	select {
	case r = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("workload still running after A exited")
	}
	if r.Err == nil || r.Result == nil {
		t.Fatalf("workload against a fenced server ended with %v", r.Err)
	}
	t.Logf("workload ended: %v", r.Err)
	if !strings.Contains(r.Err.Error(), "fenced") {
		t.Errorf("the fenced server's client was not told why: %v", r.Err)
	}
	if len(r.Result.Landed()) < 3 {
		t.Fatalf("only %d commits acknowledged before the fence", len(r.Result.Landed()))
	}
	if _, err := idle.Exec(ctx, "SELECT 1").ReadAll(); err == nil {
		t.Fatal("a client of the fenced server can still run statements")
	}
	conn, err := pgconn.Connect(ctx, b.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := r.Result.Verify(ctx, conn); err != nil {
		t.Fatalf("after failover (%d acknowledged commits): %v", len(r.Result.Landed()), err)
	}
	t.Logf("%d commits acknowledged by A, all on B; %d in doubt", len(r.Result.Landed()), len(r.Result.InDoubt()))
}

// TestGuardFencedMessage: once fenced, every statement is refused with an
// error that names the fencing.
func TestGuardFencedMessage(t *testing.T) {
	g := newGuard(sql.New(memcat.NewServer("lake")), NewMetrics(), nil, 0)
	s, err := g.NewSession(context.Background(), pgwire.StartupInfo{Database: "lake", User: "moraine"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g.fence(errors.New("slate: writer fenced by a newer writer"))
	_, err = s.Prepare(context.Background(), "SELECT 1", nil)
	var pe *pgwire.Error
	if !errors.As(err, &pe) || pe.Code != pgcode.AdminShutdown || !strings.Contains(pe.Message, "fenced by a newer writer") {
		t.Fatalf("after fence: %v", err)
	}
	if _, err := g.NewSession(context.Background(), pgwire.StartupInfo{Database: "lake"}); err == nil {
		t.Fatal("fenced guard opened a session")
	}
}

// TestConflictClass: a conflict's class travels as a value from the
// commit path (commit.Error.Class), through the errors that wrap it, to the
// metric's label; a message that merely reads like a conflict is not one.
func TestConflictClass(t *testing.T) {
	refused := &commit.Error{Kind: commit.ErrConflict, Code: "40001", Class: "inserted_into_table / dropped_table",
		Message: "Transaction conflict - attempting to insert into table 3 but another transaction has dropped it"}
	for _, c := range []struct {
		err   error
		class string
	}{
		{&pgwire.Error{Code: "40001", Message: refused.Message, Cause: fmt.Errorf("commit: %w", refused)}, "inserted_into_table / dropped_table"},
		{pgwire.Errorf("23505", "duplicate key value violates unique constraint \"ducklake_snapshot_pkey\""), "unique"},
		{errors.New("ERROR: Transaction conflict - attempting to delete from table 12 but another transaction has compacted it (merge adjacent files) (SQLSTATE 40001)"), ""},
		{pgwire.Errorf("42P01", "relation does not exist"), ""},
	} {
		got, ok := conflictClass(c.err)
		if ok != (c.class != "") || got != c.class {
			t.Errorf("conflictClass(%v) = %q, %v; want %q", c.err, got, ok, c.class)
		}
	}
}

// TestStatementShape: the label of moraine_statements_total.
func TestStatementShape(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 1": "select", "  -- c\n/* x */ (select 1)": "select", "Commit": "commit",
		"": "empty", "FOO": "other", "vacuum": "other",
	} {
		if got := statementShape(sql); got != want {
			t.Errorf("statementShape(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestReplicaFollowsWriter: a replica on the writer's store serves every
// commit the writer acknowledges (the workload verifier passes against the
// replica), refuses writes with 25006, and its lag is measured.
func TestReplicaFollowsWriter(t *testing.T) {
	store := "file://" + t.TempDir()
	w := start(t, store)
	defer w.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 2, CommitsPerWriter: 25, Tables: 2, RetryWait: time.Millisecond, Seed: 5}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	rep := start(t, store, "--replica", "--replica-poll", "20ms")
	defer rep.Stop(t)

	wconn, err := pgconn.Connect(ctx, w.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer wconn.Close(context.Background())
	rconn, err := pgconn.Connect(ctx, rep.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer rconn.Close(context.Background())

	// Watch both heads: the time each snapshot id is first seen on the
	// writer and on the replica.
	var mu sync.Mutex
	seenW, seenR := map[int64]time.Time{}, map[int64]time.Time{}
	watch := func(c *pgconn.PgConn, seen map[int64]time.Time, stop <-chan struct{}, done chan<- error) {
		for {
			h, err := head(ctx, c)
			if err != nil {
				done <- err
				return
			}
			now := time.Now()
			mu.Lock()
			if _, ok := seen[h]; !ok {
				seen[h] = now
			}
			mu.Unlock()
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 2)
	go watch(wconn, seenW, stop, done)
	go watch(rconn, seenR, stop, done)

	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The watchers own wconn and rconn until stop; ask on a fresh one.
	fconn, err := pgconn.Connect(ctx, w.Conninfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer fconn.Close(context.Background())
	final, err := head(ctx, fconn)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		_, ok := seenR[final]
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not reach snapshot %d within 10s", final)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var lags []time.Duration
	mu.Lock()
	for id, tw := range seenW {
		// The replica may skip ids it caught up past; a later id seen on
		// the replica bounds when this one became visible there.
		best := time.Time{}
		for rid, tr := range seenR {
			if rid >= id && (best.IsZero() || tr.Before(best)) {
				best = tr
			}
		}
		if !best.IsZero() {
			lags = append(lags, max(best.Sub(tw), 0))
		}
	}
	mu.Unlock()
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) < 10 {
		t.Fatalf("only %d lag samples", len(lags))
	}
	p := func(q float64) time.Duration { return lags[int(q*float64(len(lags)-1))] }
	t.Logf("replica lag over %d snapshots (poll 20ms): p50 %v p99 %v max %v", len(lags), p(0.5), p(0.99), lags[len(lags)-1])

	if err := res.Verify(ctx, rconn); err != nil {
		t.Fatalf("replica state: %v", err)
	}
	for _, q := range []string{
		"INSERT INTO ducklake_snapshot VALUES (999, now(), 1, 1, 1)",
		"BEGIN; UPDATE ducklake_metadata SET value = 'x'; COMMIT",
		"CREATE TABLE t (a int)",
		"CREATE DATABASE d2",
	} {
		_, err := rconn.Exec(ctx, q).ReadAll()
		if pgCode(err) != "25006" {
			t.Errorf("%s on the replica: %v, want SQLSTATE 25006", q, err)
		}
		rconn.Exec(ctx, "ROLLBACK").ReadAll()
	}
	if h, err := head(ctx, rconn); err != nil || h != final {
		t.Fatalf("replica head after refused writes: %d, %v; want %d", h, err, final)
	}

	// Databases the writer creates and drops appear on the replica and
	// vanish from it.
	listed := func(name string) bool {
		rs, err := rconn.Exec(ctx, "SELECT count(*) FROM pg_database WHERE datname = '"+name+"'").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return string(rs[0].Rows[0][0]) == "1"
	}
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("replica: %s: %v", what, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if _, err := wconn.Exec(ctx, "CREATE DATABASE d2").ReadAll(); err != nil {
		t.Fatal(err)
	}
	waitFor("database d2 created on the writer", func() bool { return listed("d2") })
	if c, err := pgconn.Connect(ctx, rep.Conninfo("d2")); err != nil {
		t.Fatalf("connect to d2 on the replica: %v", err)
	} else {
		c.Close(ctx)
	}
	if _, err := wconn.Exec(ctx, "DROP DATABASE d2").ReadAll(); err != nil {
		t.Fatal(err)
	}
	waitFor("database d2 dropped on the writer", func() bool { return !listed("d2") })
	if _, err := pgconn.Connect(ctx, rep.Conninfo("d2")); pgCode(err) != "3D000" {
		t.Fatalf("connect to the dropped d2 on the replica: %v, want 3D000", err)
	}
}

func head(ctx context.Context, c *pgconn.PgConn) (int64, error) {
	rs, err := c.Exec(ctx, "SELECT max(snapshot_id) FROM ducklake_snapshot").ReadAll()
	if err != nil {
		return 0, err
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 {
		return 0, errors.New("head: no row")
	}
	return strconv.ParseInt(string(rs[0].Rows[0][0]), 10, 64)
}

// TestIdleWriterNoticesFence: a writer with no traffic notices a newer
// writer by its fence poll and exits with ErrFenced within seconds.
func TestIdleWriterNoticesFence(t *testing.T) {
	store := "file://" + t.TempDir()
	a := start(t, store)
	b := start(t, store, "--takeover")
	defer b.Stop(t)
	took, _ := awaitFenced(t, a, "idle server A", time.Now(), time.Minute)
	t.Logf("idle writer exited %v after the new writer opened", took)
}

// awaitFenced requires r, whose store a newer writer opened at opened, to
// exit with ErrFenced within the given time; it returns how long after
// opened that took and the error r ended with.
func awaitFenced(t *testing.T, r *testenv.Running, name string, opened time.Time, within time.Duration) (time.Duration, error) {
	t.Helper()
	select {
	case err := <-r.Done():
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("%s ended with %v, want ErrFenced", name, err)
		}
		return time.Since(opened).Round(time.Millisecond), err
	case <-time.After(within):
		t.Fatalf("%s still running %v after the new writer opened the store", name, within)
		return 0, nil
	}
}

// FuzzGuardClassify: the statement classifiers take any client string
// without panicking, and the shape label stays in its bounded set.
func FuzzGuardClassify(f *testing.F) {
	for _, s := range []string{"SELECT 1", "/* x", "-- y", "((insert", "COPY t FROM STDIN", "WITH a AS (DELETE FROM t) SELECT 1", "\x00;;", "Transaction conflict - attempting to "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		shape := statementShape(sql)
		if !shapes[shape] && shape != "other" && shape != "empty" {
			t.Fatalf("statementShape(%q) = %q: not a bounded label", sql, shape)
		}
		conflictClass(errors.New(sql))
	})
}

// TestCopyCacheSetting: copy-cache-mib sizes the executor's binary COPY
// cache, 0 turns it off, and the metrics report what it did — a repeated
// whole-table COPY is answered from the cache, byte for byte the same.
func TestCopyCacheSetting(t *testing.T) {
	for _, tc := range []struct {
		mib  string
		want bool // the second COPY hits the cache
	}{{"0", false}, {"1", true}} {
		t.Run("mib="+tc.mib, func(t *testing.T) {
			r, maddr := startWithMetrics(t, "mem://", "--copy-cache-mib", tc.mib)
			defer r.Stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := pgconn.Connect(ctx, r.Conninfo("lake"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var rows []string
			for i := 0; i < 400; i++ {
				rows = append(rows, fmt.Sprintf("(%d, %d, false, NULL, 'v%d', 'w', NULL)", i/8, i%8, i))
			}
			if _, err := conn.Exec(ctx, `CREATE TABLE ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR);
INSERT INTO ducklake_table_column_stats VALUES `+strings.Join(rows, ",")).ReadAll(); err != nil {
				t.Fatal(err)
			}
			read := func() []byte {
				var b bytes.Buffer
				if _, err := conn.CopyTo(ctx, &b, `COPY (SELECT "table_id", "column_id", "min_value" FROM "public"."ducklake_table_column_stats") TO STDOUT (FORMAT "binary")`); err != nil {
					t.Fatal(err)
				}
				return b.Bytes()
			}
			first, second := read(), read()
			if !bytes.Equal(first, second) || len(first) < 400*20 {
				t.Fatalf("two COPYs of an unchanged table: %d and %d bytes", len(first), len(second))
			}
			body := httpGet(t, "http://"+maddr+"/metrics")
			hits := metricValue(t, body, "moraine_copy_cache_hits_total")
			misses := metricValue(t, body, "moraine_copy_cache_misses_total")
			held := metricValue(t, body, "moraine_copy_cache_bytes")
			if tc.want && (hits == 0 || misses == 0 || held == 0) || !tc.want && hits+misses+held != 0 {
				t.Fatalf("copy-cache-mib=%s: %v hits, %v misses, %v bytes", tc.mib, hits, misses, held)
			}
		})
	}
}

// checkMetricTypes parses an exposition with the Prometheus text parser and
// checks its naming: every counter ends in _total, nothing else does,
// durations are histograms in seconds, and the series operators alert on
// have the type they are used as.
func checkMetricTypes(t *testing.T, body string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	for name, mf := range families {
		if !strings.HasPrefix(name, "moraine_") {
			continue
		}
		isCounter := mf.GetType() == dto.MetricType_COUNTER
		if isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %v: counters, and only counters, end in _total", name, mf.GetType())
		}
		if strings.Contains(name, "duration") && (mf.GetType() != dto.MetricType_HISTOGRAM || !strings.HasSuffix(name, "_seconds")) {
			t.Errorf("%s is a %v: durations are histograms in seconds", name, mf.GetType())
		}
	}
	for name, want := range map[string]dto.MetricType{
		"moraine_connections":                dto.MetricType_GAUGE,
		"moraine_wal_objects_total":          dto.MetricType_COUNTER,
		"moraine_statement_duration_seconds": dto.MetricType_HISTOGRAM,
		"moraine_commit_duration_seconds":    dto.MetricType_HISTOGRAM,
		"moraine_resident_rows":              dto.MetricType_GAUGE,
		"moraine_build_info":                 dto.MetricType_GAUGE,
	} {
		mf, ok := families[name]
		if !ok || mf.GetType() != want {
			t.Errorf("%s: %v, want a %v", name, mf.GetType(), want)
		}
	}
}
