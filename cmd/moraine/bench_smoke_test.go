package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/testenv"
)

var ratioLine = regexp.MustCompile(`(?m)^ratio_vs_postgres=([0-9.]+)\n\z`)

// checkRatio asserts that out ends with a parseable, positive ratio line.
func checkRatio(t *testing.T, out string) float64 {
	t.Helper()
	m := ratioLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("output does not end with ratio_vs_postgres=<x>:\n%s", out)
	}
	r, err := strconv.ParseFloat(m[1], 64)
	if err != nil || r <= 0 {
		t.Fatalf("ratio_vs_postgres=%q: %v", m[1], err)
	}
	return r
}

// benchSmoke runs a bench subcommand's main with args plus --json and
// --png paths in a fresh directory, within two minutes, and requires exit 0,
// a final ratio line and both report files written. It returns the output.
func benchSmoke(t *testing.T, main mainFunc, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.png")
	args = append(args, "--json", jsonPath, "--png", pngPath)
	var out, errb bytes.Buffer
	if code := main(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	checkRatio(t, out.String())
	for _, p := range []string{jsonPath, pngPath} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", p, err)
		}
	}
	return out.String()
}

func TestBenchCommitsSmoke(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"local", nil},
		{"s3", []string{"--store=s3", "--put-latency=5ms"}},
		{"rounds", []string{"--rounds=2"}},
		{"phases", []string{"--phases", "--writers=2", "--commits=6"}},
		// The child is this test binary run as moraine (TestMain).
		{"process", []string{"--process"}},
		{"process-s3", []string{"--process", "--store=s3", "--put-latency=5ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "process") {
				t.Setenv("MORAINE_TEST_AS_MAIN", "1")
			}
			out := benchSmoke(t, benchCommitsMain, append([]string{"--writers=1,2", "--commits=3", "--warmup=4", "--retry-wait=5ms", "--postgres", pg}, tc.extra...)...)
			if !strings.Contains(out, "timed after 4 untimed warm-up commits") {
				t.Fatalf("no warm-up line:\n%s", out)
			}
			// Every run reports its CPU per commit; this process's is never
			// zero (it ran the driver, and moraine too when in-process).
			// Then the run queue waits, mean/p90 µs: this process's, and a
			// child moraine's from its /metrics.
			cpuRow := regexp.MustCompile(`(?m)^\s*(postgres|moraine)\s+[12]\s+[12]\s+(\d+\.\d{3})\s+(\d+\.\d{3})\s+(\d+)%\s+\d+/\d+\s+(\d+/\d+|-)$`)
			rows := cpuRow.FindAllStringSubmatch(out, -1)
			writerCounts, rounds := 2, 1 // --writers=1,2
			if slices.Contains(tc.extra, "--writers=2") {
				writerCounts = 1
			}
			if slices.Contains(tc.extra, "--rounds=2") {
				rounds = 2
			}
			if want := 2 * writerCounts * rounds; len(rows) != want {
				t.Fatalf("%s: %d CPU rows:\n%s", tc.name, len(rows), out)
			}
			for _, r := range rows {
				if p, _ := strconv.ParseFloat(r[3], 64); p <= 0 {
					t.Fatalf("%s: %s run used no CPU in this process:\n%s", tc.name, r[1], out)
				}
				if b, _ := strconv.Atoi(r[4]); b > 100 {
					t.Fatalf("%s: %s run busier than the machine:\n%s", tc.name, r[1], out)
				}
				if measured, child := r[5] != "-", r[1] == "moraine" && strings.HasPrefix(tc.name, "process"); measured != child {
					t.Fatalf("%s: %s run's server run queue %q:\n%s", tc.name, r[1], r[5], out)
				}
			}
			// Every run says how many of its writers committed in the
			// window (at least one, at most all) and how many commits were
			// still under way when it closed.
			runRow := regexp.MustCompile(`(?m)^\s*(postgres|moraine)\s+([12])\s.*\s(\d+)/([12])\s+(0|[1-9]\d* \(oldest \d+\.\d ms\))$`)
			runRows := runRow.FindAllStringSubmatch(out, -1)
			if want := 2 * writerCounts * rounds; len(runRows) != want {
				t.Fatalf("%s: %d run rows with writers committed and unanswered, want %d:\n%s", tc.name, len(runRows), want, out)
			}
			for _, r := range runRows {
				if k, _ := strconv.Atoi(r[3]); r[2] != r[4] || k < 1 || r[3] > r[4] {
					t.Fatalf("%s: %s run with %s writers: %s/%s committed:\n%s", tc.name, r[1], r[2], r[3], r[4], out)
				}
			}
			if child := strings.Contains(out, "moraine: a child process, a fresh server per run"); child != strings.HasPrefix(tc.name, "process") {
				t.Fatalf("%s: says it ran a child process: %v:\n%s", tc.name, child, out)
			}
			if tc.name == "rounds" && !regexp.MustCompile(`round by round: \S+ \S+; median`).MatchString(out) {
				t.Fatalf("two rounds: no round-by-round ratios:\n%s", out)
			}
			// Two writers on one chain: both systems report broken-down
			// links and the rest of their writers' cycles.
			phaseRow := regexp.MustCompile(`(?m)^\s*(postgres|moraine)\s+2\s+1\s+[1-9]\d*\s+-?\d+/-?\d+\s+\d+/\d+\s+\d+/\d+\s+\d+/\d+\s+\d+/\d+\s+\d+\s+[\d.]+%\s+[1-9]\d*/[1-9]\d*\s+[1-9]\d*/[1-9]\d*$`)
			if got := len(phaseRow.FindAllString(out, -1)); (tc.name == "phases") != (got == 2) {
				t.Fatalf("%s: %d phase rows:\n%s", tc.name, got, out)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := benchCommitsMain(context.Background(), []string{"--postgres", pg, "--store=gcs"}, &out, &errb); code != 2 {
		t.Fatalf("bad --store: exit %d", code)
	}
	if code := benchCommitsMain(context.Background(), []string{"--postgres", pg, "--warmup=-1"}, &out, &errb); code != 2 {
		t.Fatalf("negative --warmup: exit %d", code)
	}
	if code := benchCommitsMain(context.Background(), []string{"--postgres", pg, "--process", "--moraine", pg}, &out, &errb); code != 2 {
		t.Fatalf("--process with --moraine: exit %d", code)
	}
}

// TestBenchChildProcess: with StoreSpec.Process the benchmark's moraine is
// a separate `moraine serve` process that serves DuckLake's SQL, stops
// cleanly when asked, and whose failure to start is reported with its log.
func TestBenchChildProcess(t *testing.T) {
	t.Setenv("MORAINE_TEST_AS_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := bench.StartMoraine(ctx, bench.StoreSpec{Kind: "local", Process: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	if m.Server != nil || m.PID == 0 || m.PID == os.Getpid() {
		t.Fatalf("not a child process: in-process server %v, pid %d (ours %d)", m.Server != nil, m.PID, os.Getpid())
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.PID))
	if err != nil || !strings.Contains(string(cmdline), "serve\x00") {
		t.Fatalf("child %d's command line %q: %v", m.PID, cmdline, err)
	}
	c, err := pgconn.Connect(ctx, m.ConnInfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, "CREATE TABLE ducklake_metadata (key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT); INSERT INTO ducklake_metadata VALUES ('version', '0.3', NULL, NULL), ('data_path', '/lake/', NULL, NULL); SELECT count(*) FROM ducklake_metadata").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res[len(res)-1].Rows[0][0]); got != "2" {
		t.Fatalf("count = %q from the child", got)
	}
	// The child's scheduler histogram, from its /metrics, counts the
	// wake-ups of the statements just run.
	h, err := m.RunQueue(ctx)
	if err != nil || h == nil {
		t.Fatalf("the child's run queue: %v, %v", h, err)
	}
	var events uint64
	for _, n := range h.Counts {
		events += n
	}
	if events == 0 || len(h.Buckets) != len(h.Counts)+1 {
		t.Fatalf("the child's run queue: %d events in %d buckets (%d bounds)", events, len(h.Counts), len(h.Buckets))
	}
	c.Close(ctx)
	if err := m.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := pgconn.Connect(ctx, m.ConnInfo("lake")+" connect_timeout=2"); err == nil {
		t.Fatal("the child still accepts connections after Stop")
	}

	// A child that cannot start: its configuration error reaches the caller.
	t.Setenv("MORAINE_LOG_LEVEL", "loud")
	_, err = bench.StartMoraine(ctx, bench.StoreSpec{Kind: "local", Process: os.Args[0]})
	if err == nil || !strings.Contains(err.Error(), "exited before ready") || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("a child with a bad setting: %v", err)
	}
}

func TestBenchCatalogSmoke(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, tc := range []struct {
		name    string
		process bool
		rounds  int
	}{{"in-process", false, 1}, {"process", true, 1}, {"rounds", false, 3}} {
		process := tc.process
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--tables=5", "--files=200", "--snapshots=10", "--stats=4", "--reps=1", "--rounds=" + strconv.Itoa(tc.rounds), "--postgres", pg}
			if process {
				// The child is this test binary run as moraine (TestMain).
				t.Setenv("MORAINE_TEST_AS_MAIN", "1")
				args = append(args, "--process")
			}
			out := benchSmoke(t, benchCatalogMain, args...)
			// Both systems answered every read with the same rows: the report
			// refuses to build otherwise, and the whole-table reads are there.
			// With --process the child read them back from the built store.
			for _, want := range []string{"data_file (whole table)", "file_column_stats (whole table)", "latest snapshot"} {
				if !strings.Contains(out, want) {
					t.Fatalf("no %q line:\n%s", want, out)
				}
			}
			if !regexp.MustCompile(`(?m)^\s+file_column_stats \(whole table\)\s+first query\s+800\s`).MatchString(out) {
				t.Fatalf("file_column_stats should have 200 files x 4 rows:\n%s", out)
			}
			if child := strings.Contains(out, "serving that store from a child `moraine serve` process"); child != process {
				t.Fatalf("--process %v, but says it served from a child: %v:\n%s", process, child, out)
			}
			// Several rounds: each round's ratio, and their median is the
			// figure.
			byRound := regexp.MustCompile(`ratio round by round: (\S+ \S+ \S+); median (\S+)\n`).FindStringSubmatch(out)
			if (byRound != nil) != (tc.rounds > 1) {
				t.Fatalf("%d rounds, round-by-round line %q:\n%s", tc.rounds, byRound, out)
			}
			if byRound != nil && !strings.HasSuffix(out, "ratio_vs_postgres="+byRound[2]+"\n") {
				t.Fatalf("the figure is not the rounds' median %s:\n%s", byRound[2], out)
			}
		})
	}
	var bad, errb bytes.Buffer
	if code := benchCatalogMain(context.Background(), []string{"--tables=0", "--postgres", pg}, &bad, &errb); code != 2 {
		t.Fatalf("bad --tables: exit %d", code)
	}
	if code := benchCatalogMain(context.Background(), []string{"--rounds=0", "--postgres", pg}, &bad, &errb); code != 2 {
		t.Fatalf("bad --rounds: exit %d", code)
	}
	if code := benchCatalogMain(context.Background(), []string{"--process"}, &bad, &errb); code != 2 {
		t.Fatalf("--process without --postgres: exit %d", code)
	}
}

func TestBenchStoreVsPostgresSmoke(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, process := range []bool{false, true} {
		t.Run(fmt.Sprintf("process=%v", process), func(t *testing.T) {
			args := []string{"--put-latency=20ms", "--commit-writers=1,2", "--commits=3", "--postgres", pg}
			if process {
				// The child is this test binary run as moraine (TestMain); it
				// reaches the S3 server in this process over loopback.
				t.Setenv("MORAINE_TEST_AS_MAIN", "1")
				args = append(args, "--process")
			}
			out := benchSmoke(t, benchStoreMain, args...)
			// Every moraine commit waited for at least one PUT of 20ms.
			m := regexp.MustCompile(`(?m)^\s+moraine\s.*PUT latency 20ms\s+1\s+3\s+\S+\s+(\S+)\s`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no moraine 1-writer row:\n%s", out)
			}
			if p50, _ := strconv.ParseFloat(m[1], 64); p50 < 20 {
				t.Fatalf("moraine p50 %.2fms is below the injected 20ms PUT latency", p50)
			}
			if child := strings.Contains(out, "note: moraine: a child `moraine serve` process"); child != process {
				t.Fatalf("--process %v, but the note says child %v:\n%s", process, child, out)
			}
		})
	}
	var bad, errb bytes.Buffer
	if code := benchStoreMain(context.Background(), []string{"--process"}, &bad, &errb); code != 2 {
		t.Fatalf("--process without --postgres: exit %d", code)
	}
}

// TestBenchReplicaSmoke: a small catalog on both stores, one and two
// replicas as child processes: every row measured, every commit seen on
// every replica (the benchmark fails otherwise), applied one by one with no
// reload; then a failover to a promoted replica on each store.
func TestBenchReplicaSmoke(t *testing.T) {
	t.Setenv("MORAINE_TEST_AS_MAIN", "1") // the children are this test binary run as moraine
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "replica.json")
	var stdout, errb bytes.Buffer
	if code := benchReplicaMain(ctx, []string{"--stores=local,s3", "--put-latency=5ms", "--files=300", "--tables=10", "--stats=2",
		"--replicas=1,2", "--writers=2", "--commits=3", "--replica-poll=50ms", "--json", jsonPath}, &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), stdout.String())
	}
	out := stdout.String()
	if st, err := os.Stat(jsonPath); err != nil || st.Size() == 0 {
		t.Fatalf("--json not written: %v", err)
	}
	rows := regexp.MustCompile(`(?m)^\s+(local|s3)\s+300\s+(\d)\s+(\d+)\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+\s+\S+\s+(\d+)\s*$`).FindAllStringSubmatch(out, -1)
	if len(rows) != 4 {
		t.Fatalf("want 4 rows (2 stores x 2 replica counts):\n%s", out)
	}
	for _, r := range rows {
		if r[7] != "0" {
			t.Errorf("%s with %s replicas reloaded %s times:\n%s", r[1], r[2], r[7], out)
		}
		if n, _ := strconv.Atoi(r[3]); n < 6 {
			t.Errorf("%s: %d commits landed, want at least 2 writers x 3", r[1], n)
		}
	}
	// One failover per store: the promoted replica took a commit after it
	// returned from pg_promote().
	failovers := regexp.MustCompile(`(?m)^\s+(local|s3)\s+300\s+(\d+\.\d+)\s+(\d+\.\d+)\s*$`).FindAllStringSubmatch(out, -1)
	if len(failovers) != 2 {
		t.Fatalf("want 2 failover rows:\n%s", out)
	}
	for _, f := range failovers {
		promote, _ := strconv.ParseFloat(f[2], 64)
		commit, _ := strconv.ParseFloat(f[3], 64)
		if promote <= 0 || commit < promote {
			t.Errorf("%s failover: promoted after %v s, first commit after %v s", f[1], promote, commit)
		}
	}
	var bad bytes.Buffer
	if code := benchReplicaMain(context.Background(), []string{"--replicas=0"}, &bad, &errb); code != 2 {
		t.Fatalf("bad --replicas: exit %d", code)
	}
}

// TestBenchReplaySmoke replays one small conversation once on each server
// and on the floor (the children are this test binary run as moraine) and
// checks the per-kind table, the floor's cells and the final ratio.
func TestBenchReplaySmoke(t *testing.T) {
	pg := testenv.Postgres(t)
	t.Setenv("MORAINE_TEST_AS_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := benchReplayMain(ctx, []string{"--postgres", pg, "--transcripts", "s01_basic", "--clients", "1", "--rounds", "1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	checkRatio(t, out.String())
	probe := regexp.MustCompile(`(?m)^file_create_cpu=(\S+) dir=\S`).FindStringSubmatch(out.String())
	if probe == nil {
		t.Fatalf("no file creation cost:\n%s", out.String())
	}
	if d, err := time.ParseDuration(probe[1]); err != nil || d <= 0 {
		t.Fatalf("file creation cost %q: %v", probe[1], err)
	}
	if !regexp.MustCompile(`(?m)^\s*s01_basic\s+inlined_insert\s+1\s`).MatchString(out.String()) {
		t.Fatalf("no per-kind row for s01's inlined insert:\n%s", out.String())
	}
	// The one-client row ends with the floor's CPU per commit and
	// PostgreSQL's ratio to it.
	row := regexp.MustCompile(`(?m)^\s*s01_basic\s+1\s+\d+\s.*\s(\S+)\s+(\d+\.\d+)×\s*$`).FindStringSubmatch(out.String())
	if row == nil {
		t.Fatalf("no floor cells in s01's one-client row:\n%s", out.String())
	}
	if d, err := time.ParseDuration(row[1]); err != nil || d <= 0 {
		t.Fatalf("floor CPU per commit %q: %v", row[1], err)
	}
	// The warm-up replay (--warmup defaults to 1) is not measured: the
	// row counts the one round's snapshots, those of its kinds and the
	// lake's first (written by COPY, with no changes_made, so of no kind).
	kinds := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*s01_basic\s+[a-z_+]+\s+(\d+)\s`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		kinds += n
	}
	commits := regexp.MustCompile(`(?m)^\s*s01_basic\s+1\s+(\d+)\s`).FindStringSubmatch(out.String())
	if commits == nil || commits[1] != strconv.Itoa(kinds+1) || kinds == 0 {
		t.Fatalf("the one-client row's commits %v, the kinds' %d: the warm-up was counted or a kind was lost:\n%s", commits, kinds, out.String())
	}
}
