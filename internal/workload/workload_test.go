package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

func freshDB(t *testing.T) func(context.Context) (*pgconn.PgConn, error) {
	t.Helper()
	ctx := context.Background()
	dial, drop, err := workload.FreshDatabase(ctx, testenv.Postgres(t), "moraine_wl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return dial
}

func runAndVerify(t *testing.T, cfg workload.Config) *workload.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := cfg.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := res.Verify(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits in %v (%.0f/s), p50 %v p99 %v, %d retries, %d failed; %d merges (%d retries, %d failed)",
		res.Commits, res.Elapsed.Round(time.Millisecond), res.CommitsPerSec(), res.Percentile(50), res.Percentile(99),
		res.Retries, res.Failed, res.Merges, res.MergeRetries, res.MergeFailed)
	return res
}

// TestWarmupIsUntimed: the timed window opens once the warm-up's commits
// have ended and counts exactly Writers×CommitsPerWriter more; only the
// window's commits count in the figures, and the writers keep committing
// across both of its edges (every commit lands and verifies).
func TestWarmupIsUntimed(t *testing.T) {
	cfg := workload.Config{
		Dial: freshDB(t), Writers: 3, CommitsPerWriter: 4, Warmup: 7, Tables: 2,
		MaxRetries: 1000, RetryWait: 5 * time.Millisecond, Seed: 7,
	}
	res := runAndVerify(t, cfg)
	if res.Commits != 12 || res.Warmup != 7 || len(res.Latencies) != 12 {
		t.Fatalf("timed %d (latencies %d), warm-up %d; want 12 (12) and 7", res.Commits, len(res.Latencies), res.Warmup)
	}
	landed := res.Landed()
	if len(landed) < 19 {
		t.Fatalf("%d commits landed; want the 7 warm-up and 12 timed ones at least", len(landed))
	}
	if res.Elapsed <= 0 {
		t.Fatalf("window of %v", res.Elapsed)
	}
	// Chain links end at commits answered inside the window, which opens
	// after the warm-up's commits ended: none of the warm-up's commits can
	// end one. (Commits answered after the window closes are not counted
	// either, but how many land before the close is recorded depends on
	// scheduling; the warm-up bound does not.)
	if links := res.ChainLinks(); len(links) > len(landed)-cfg.Warmup {
		t.Fatalf("%d chain links among %d landed commits of which %d warm-up", len(links), len(landed), cfg.Warmup)
	}
	// Every commit names its writer and its place in the writer's
	// sequence as its tag does, and the writers' cycles are measured
	// across the window's edge (a commit's predecessor may be a warm-up one).
	for _, l := range landed {
		if want := fmt.Sprintf("w%d-c%d", l.Writer, l.Nth); l.Kind == "insert" && l.Tag != want {
			t.Errorf("commit %s is writer %d's commit %d", l.Tag, l.Writer, l.Nth)
		}
	}
	cycles := res.WriterCycles()
	if len(cycles) == 0 || len(cycles) > 12 {
		t.Fatalf("%d writer cycles in a window of 12 commits", len(cycles))
	}
	for _, c := range cycles {
		if c.Tail <= 0 || c.ToSnapshot <= 0 {
			t.Errorf("writer %d commit %d: tail %v, to snapshot %v", c.Writer, c.Nth, c.Tail, c.ToSnapshot)
		}
	}
}

// TestContendedWritersWithCompactor is the contended DuckLake workload at test size: 16
// writers over 4 tables plus a concurrent compactor, against a real
// PostgreSQL, then the catalog is read back and checked. Set
// MORAINE_WORKLOAD_COMMITS=200 for the full 16 × 200.
func TestContendedWritersWithCompactor(t *testing.T) {
	dial := freshDB(t)
	commits := 24
	if s := os.Getenv("MORAINE_WORKLOAD_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MORAINE_WORKLOAD_COMMITS=%q", s)
		}
		commits = n
	}
	cfg := workload.Config{
		Dial: dial, Writers: 16, CommitsPerWriter: commits, Tables: 4, Compactor: true,
		MaxRetries: 1000, RetryWait: 10 * time.Millisecond, Seed: 1,
	}
	res := runAndVerify(t, cfg)
	if want := 16 * commits; res.Commits != want || res.Failed != 0 {
		t.Fatalf("%d commits landed, %d failed; want %d and 0", res.Commits, res.Failed, want)
	}
	if res.Retries == 0 {
		t.Errorf("16 contending writers never retried: the race the protocol resolves was not exercised")
	}
	if res.Merges == 0 {
		t.Errorf("the compactor landed no merge")
	}
	if res.Conflicts != 0 || res.MergeConflicts != 0 {
		t.Errorf("appends and merges conflicted (%d, %d): DuckLake's matrix has no such conflict", res.Conflicts, res.MergeConflicts)
	}
}

// TestMergeEmbeddedRowIDs runs the compactor in the bundled DuckLake's mode:
// merged files carry their row ids (row_id_start NULL).
func TestMergeEmbeddedRowIDs(t *testing.T) {
	dial := freshDB(t)
	cfg := workload.Config{
		Dial: dial, Writers: 4, CommitsPerWriter: 20, Tables: 2, Compactor: true, MergeEmbedsIDs: true,
		MaxRetries: 1000, RetryWait: 5 * time.Millisecond, Seed: 2, Schema: "lake_meta",
	}
	res := runAndVerify(t, cfg)
	if res.Commits != 80 || res.Merges == 0 {
		t.Fatalf("commits %d merges %d", res.Commits, res.Merges)
	}
}

// TestRetriesExhausted checks that with no retries allowed, lost races
// are counted as failures and leave nothing behind (Verify covers that).
func TestRetriesExhausted(t *testing.T) {
	dial := freshDB(t)
	cfg := workload.Config{Dial: dial, Writers: 8, CommitsPerWriter: 10, Tables: 1, MaxRetries: -1, Seed: 3}
	res := runAndVerify(t, cfg)
	if res.Failed == 0 || res.Commits+res.Failed != 80 {
		t.Fatalf("commits %d failed %d: want some failures out of 80", res.Commits, res.Failed)
	}
}

// TestVerifyCatchesCorruption tampers with a verified catalog and expects
// Verify to notice each kind of damage.
func TestVerifyCatchesCorruption(t *testing.T) {
	dial := freshDB(t)
	cfg := workload.Config{Dial: dial, Writers: 2, CommitsPerWriter: 5, Tables: 2, Seed: 4}
	res := runAndVerify(t, cfg)
	ctx := context.Background()
	conn, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tamper := []struct {
		name, do, undo, want string
	}{
		{"overlapping row ids",
			`UPDATE ducklake_data_file SET row_id_start = row_id_start + 1 WHERE data_file_id = (SELECT max(data_file_id) FROM ducklake_data_file)`,
			`UPDATE ducklake_data_file SET row_id_start = row_id_start - 1 WHERE data_file_id = (SELECT max(data_file_id) FROM ducklake_data_file)`,
			"row ids"},
		{"next_row_id drift",
			`UPDATE ducklake_table_stats SET next_row_id = next_row_id + 5`,
			`UPDATE ducklake_table_stats SET next_row_id = next_row_id - 5`,
			"next_row_id"},
		{"phantom snapshot",
			`INSERT INTO ducklake_snapshot VALUES (1000, NOW(), 1, 1, 1); INSERT INTO ducklake_snapshot_changes VALUES (1000, 'inserted_into_table:1', NULL, 'ghost', NULL)`,
			`DELETE FROM ducklake_snapshot WHERE snapshot_id = 1000; DELETE FROM ducklake_snapshot_changes WHERE snapshot_id = 1000`,
			"never acknowledged"},
		{"lost stats row",
			`CREATE TABLE saved AS SELECT * FROM ducklake_file_column_stats WHERE data_file_id = 0 AND column_id = 1; DELETE FROM ducklake_file_column_stats WHERE data_file_id = 0 AND column_id = 1`,
			`INSERT INTO ducklake_file_column_stats SELECT * FROM saved; DROP TABLE saved`,
			"column-stats rows"},
	}
	for _, tc := range tamper {
		if _, err := conn.Exec(ctx, tc.do).ReadAll(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err := res.Verify(ctx, conn)
		if !errors.Is(err, workload.ErrVerify) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want a problem mentioning %q", tc.name, err, tc.want)
		}
		if _, err := conn.Exec(ctx, tc.undo).ReadAll(); err != nil {
			t.Fatalf("%s undo: %v", tc.name, err)
		}
		if err := res.Verify(ctx, conn); err != nil {
			t.Fatalf("%s: after undo: %v", tc.name, err)
		}
	}
}

// TestVerifyInDoubt: a commit whose COMMIT went unanswered may have landed
// or not; Verify accepts both, and still refuses a commit nobody made.
func TestVerifyInDoubt(t *testing.T) {
	dial := freshDB(t)
	cfg := workload.Config{Dial: dial, Writers: 2, CommitsPerWriter: 3, Tables: 2, Seed: 5}
	res := runAndVerify(t, cfg)
	workload.DoubtForTest(res) // the last commit landed, the ghost did not
	if n := len(res.InDoubt()); n != 2 {
		t.Fatalf("%d commits in doubt", n)
	}
	ctx := context.Background()
	conn, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := res.Verify(ctx, conn); err != nil {
		t.Fatalf("with one commit in doubt landed and one not: %v", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO ducklake_snapshot VALUES (1000, NOW(), 1, 1, 1); INSERT INTO ducklake_snapshot_changes VALUES (1000, 'inserted_into_table:1', NULL, 'ghost', NULL)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	if err := res.Verify(ctx, conn); !errors.Is(err, workload.ErrVerify) || !strings.Contains(err.Error(), "never acknowledged") {
		t.Fatalf("a commit nobody made: Verify = %v", err)
	}
}

// TestRunStopsBlockedWriters: cancelling a run ends it even while every
// writer is blocked inside a call to the server (here behind a lock on the
// snapshot table), and Run reports the cancellation, not the connections
// it closed to end those calls.
func TestRunStopsBlockedWriters(t *testing.T) {
	dial := freshDB(t)
	cfg := workload.Config{Dial: dial, Writers: 4, CommitsPerWriter: 1000, Tables: 2, Seed: 3}
	ctx := context.Background()
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	locker, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	if err := locker.Exec(ctx, "BEGIN; LOCK TABLE ducklake_snapshot IN ACCESS EXCLUSIVE MODE").Close(); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := workload.Run(runCtx, cfg)
		done <- err
	}()
	// Every writer is blocked on the lock: nothing ends the run but the
	// cancellation.
	select {
	case err := <-done:
		t.Fatalf("Run ended before it was cancelled: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v; want the cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end within 10s of its cancellation")
	}
}
