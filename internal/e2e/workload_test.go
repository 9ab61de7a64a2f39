package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestContendedWorkload is the contended DuckLake workload against moraine serve on a local
// directory store: 16 writers × 200 commits over 4 tables plus a concurrent
// merge compactor, following DuckLake's commit protocol. Every commit lands
// exactly once, snapshot ids are dense, row ids are unique (workload
// Verify), before and after a restart. The writers write real Parquet
// files (DataDir), so a server that holds compactions to their row ids
// (RFC 0008; moraine serve's row-id hold) checks every merge.
//
// The default run is 16 writers × 10 commits: moraine's latest-snapshot
// query grows with the square of the snapshot count (docs/commit.md), so
// 16 contending writers slow down as the catalog grows (16 × 10: ~4 s,
// 16 × 40: ~23 s on the shared 2-core machine) and the full
// 16 × 200 runs only with MORAINE_E2E_LONG=1. MORAINE_E2E_COMMITS overrides the commits
// per writer.
func TestContendedWorkload(t *testing.T) {
	commits := 10
	if long() {
		commits = 200
	}
	if s := os.Getenv("MORAINE_E2E_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MORAINE_E2E_COMMITS=%q", s)
		}
		commits = n
	}
	store := "file://" + t.TempDir()
	r := testserver.Start(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	cfg := workload.Config{
		ConnString: conninfo(r.Addr, "lake"), DataDir: t.TempDir(), Writers: 16, CommitsPerWriter: commits, Tables: 4,
		Compactor: true, RetryWait: 5 * time.Millisecond, Seed: 6,
	}
	res := runWorkload(t, ctx, cfg)
	if got, want := res.Commits+res.Failed, 16*commits; got != want {
		t.Fatalf("%d writer commits ended, want %d", got, want)
	}
	if res.Merges == 0 {
		t.Fatal("the compactor landed no merge")
	}
	if err := verifyAt(ctx, r.Addr, "lake", res); err != nil {
		t.Fatalf("verify: %v", err)
	}
	r.Stop(t)
	r2 := testserver.Start(t, store)
	defer r2.Stop(t)
	if err := verifyAt(ctx, r2.Addr, "lake", res); err != nil {
		t.Fatalf("verify after restart: %v", err)
	}
}

// prepare creates the workload's database and its lake.
func prepare(ctx context.Context, cfg workload.Config) error {
	if err := testenv.CreateDatabase(ctx, cfg.ConnString); err != nil {
		return err
	}
	return workload.Prepare(ctx, cfg)
}

func runWorkload(t *testing.T, ctx context.Context, cfg workload.Config) *workload.Result {
	t.Helper()
	if err := prepare(ctx, cfg); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("%d writers × %d: %d commits in %v (%.0f/s), p50 %v p99 %v, %d retries, %d failed (%d conflicts); %d merges (%d retries, %d failed)",
		cfg.Writers, cfg.CommitsPerWriter, res.Commits, res.Elapsed.Round(time.Millisecond), res.CommitsPerSec(),
		res.Percentile(50), res.Percentile(99), res.Retries, res.Failed, res.Conflicts, res.Merges, res.MergeRetries, res.MergeFailed)
	return res
}
