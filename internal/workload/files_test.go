package workload_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestDataFilesPassTheHold runs the workload with real Parquet files and
// holds every merge it landed to its row ids (RFC 0008) with the same
// checker the commit path uses: adjacent merges that keep row_id_start and
// merges that embed the ids must both pass, and a merge that claims the
// wrong start must not.
func TestDataFilesPassTheHold(t *testing.T) {
	for _, embed := range []bool{false, true} {
		t.Run(map[bool]string{false: "adjacent", true: "embedded"}[embed], func(t *testing.T) {
			dial := freshDB(t)
			cfg := workload.Config{
				Dial: dial, Writers: 4, CommitsPerWriter: 15, Tables: 2, Compactor: true, MergeEmbedsIDs: embed,
				DataDir: t.TempDir(), MaxRetries: 1000, RetryWait: 5 * time.Millisecond, Seed: 5,
			}
			res := runAndVerify(t, cfg)
			files := map[int64]workload.Landed{}
			for _, l := range res.Landed() {
				files[l.File] = l
			}
			asFile := func(l workload.Landed) rowids.File {
				f := rowids.File{Path: l.Path, RecordCount: l.Records}
				if l.Kind == "insert" || !embed {
					f.RowIDStart, f.HasRowIDStart = l.RowIDs[0].Lo, true
				}
				return f
			}
			ch := &rowids.Checker{}
			merges := 0
			for _, l := range res.Landed() {
				if l.Kind != "merge" {
					continue
				}
				merges++
				c := rowids.Compaction{Kind: rowids.Merge, Outputs: []rowids.File{asFile(l)}}
				for _, id := range l.Sources {
					c.Sources = append(c.Sources, asFile(files[id]))
				}
				if err := ch.Check(context.Background(), c); err != nil {
					t.Fatalf("merge %s: %v", l.Tag, err)
				}
				if !embed {
					c.Outputs[0].RowIDStart++
					if err := ch.Check(context.Background(), c); !errors.Is(err, rowids.ErrCorrupt) {
						t.Fatalf("merge %s with a shifted start: Check = %v, want ErrCorrupt", l.Tag, err)
					}
				}
			}
			if merges == 0 {
				t.Fatal("no merge landed")
			}
		})
	}
}
