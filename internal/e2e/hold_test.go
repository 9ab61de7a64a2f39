package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestWorkloadWithRowIDHold runs the contended workload with the RFC 0008
// row-id hold on: the writers write real Parquet files under a local data
// path and every merge the compactor lands is checked against its sources'
// row ids (read from the files) before it is written. It serves the stack
// itself (server.OpenStackOn with commit.Options.Hold = &rowids.Checker{},
// the local-directory opener) so that the hold is on whatever moraine
// serve's configuration defaults to, over a local directory store, and
// restarts it.
func TestWorkloadWithRowIDHold(t *testing.T) {
	for _, embed := range []bool{false, true} {
		name := "adjacent"
		if embed {
			name = "embedded-ids"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			storeURL := "file://" + t.TempDir()
			opts := server.StackOptions{Commit: commit.Options{Hold: &rowids.Checker{}}}
			open := func() *stackServer {
				store, err := objurl.Open(ctx, storeURL)
				if err != nil {
					t.Fatal(err)
				}
				s, err := serveStack(ctx, store, opts)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := open()
			writers, commits := 16, 4
			if long() {
				commits = 200
			}
			cfg := workload.Config{
				ConnString: conninfo(s.addr, "lake"), DataDir: t.TempDir(), Writers: writers, CommitsPerWriter: commits,
				Tables: 4, Compactor: true, MergeEmbedsIDs: embed, RetryWait: 5 * time.Millisecond, Seed: 11,
			}
			res := runWorkload(t, ctx, cfg)
			if res.Merges == 0 {
				t.Fatal("no merge landed: the hold was never exercised")
			}
			if err := verifyAt(ctx, s.addr, "lake", res); err != nil {
				t.Fatal(err)
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			defer s.close()
			if err := verifyAt(ctx, s.addr, "lake", res); err != nil {
				t.Fatalf("after restart: %v", err)
			}
		})
	}
}
