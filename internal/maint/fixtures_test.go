package maint

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/verify"
)

// TestFixturesLeaveConsistentCatalogs replays the real DuckDB+DuckLake
// conversations of the maintenance functions (s04: merge, rewrite, time
// travel, expire by version and by age, cleanup, orphan cleanup; s05:
// inlining and flush) against moraine, each on its own store, and runs
// the verify checker over what they persisted. The fixtures' Parquet
// files are not here, so these run without the row-id hold.
func TestFixturesLeaveConsistentCatalogs(t *testing.T) {
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s04_compaction", "s05_inlining"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st, _, _ := replayOnStack(t, ctx, filepath.Join(dir, name+".jsonl"))
			sn, err := st.KV.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer sn.Close()
			vs, err := verify.CheckStore(ctx, sn)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Errorf("verify: %s", v)
			}
			// The checker saw the lake: one DuckLake catalog with its
			// retained snapshots and live files.
			cats, err := commit.ReadStore(ctx, sn)
			if err != nil {
				t.Fatal(err)
			}
			lakes := 0
			for _, c := range cats {
				if !verify.IsDuckLake(c) {
					continue
				}
				lakes++
				s, err := verify.FromStored(c)
				if err != nil {
					t.Fatal(err)
				}
				if len(s.Snapshots) == 0 || len(s.DataFiles) == 0 {
					t.Fatalf("%s: decoded %d snapshots and %d data files", s.Name, len(s.Snapshots), len(s.DataFiles))
				}
				t.Logf("%s: %d retained snapshots, %d data files, %d delete files, %d scheduled", s.Name, len(s.Snapshots), len(s.DataFiles), len(s.DeleteFiles), len(s.Scheduled))
			}
			if lakes != 1 {
				t.Fatalf("%d DuckLake catalogs in the store, want 1", lakes)
			}
		})
	}
}

// replayOnStack replays the conversation in file against a fresh stack
// (without the row-id hold: the fixtures' Parquet files are not here) and
// returns the stack, its address and the transcript.
func replayOnStack(t *testing.T, ctx context.Context, file string) (*server.Stack, string, *replay.Transcript) {
	t.Helper()
	tr, err := replay.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	st, addr := startStack(t, ctx, commit.Options{})
	admin, err := replay.AdminConninfo(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&replay.Fresh{Admin: admin}).Prepare(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if res := replay.Replay(ctx, tr, replay.Options{Addr: addr, Timeout: 30 * time.Second}); !res.Passed() {
		t.Fatalf("replay: %v\n%s", res.Err, replay.Explain(res.Err))
	}
	return st, addr, tr
}
