package slate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

func cpOpts(now func() time.Time) Options {
	return Options{MemtableBytes: 2 << 10, BlockSize: 256, MaxSSTBytes: 2 << 10, GCInterval: -1,
		MaxWALsPerMemtable: 4, L0CompactionTrigger: 2, GCGrace: time.Millisecond, Now: now}
}

func readAll(t *testing.T, d *DB) map[string]string {
	t.Helper()
	it := d.ScanPrefix(context.Background(), nil)
	defer it.Close()
	out := map[string]string{}
	for it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckpointSurvivesGCAndCopies: a checkpoint taken under a live
// writer holds exactly the writer's durable state at that point, stays
// readable after the writer overwrote, deleted, flushed, compacted and
// garbage-collected everything it held, and copies to an empty store that
// opens (as writer and reader) with the same contents.
func TestCheckpointSurvivesGCAndCopies(t *testing.T) {
	ctx := context.Background()
	for _, flushFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flushFirst), func(t *testing.T) {
			s := objstore.NewMem()
			clock := time.Now()
			now := func() time.Time { return clock }
			d, err := Open(ctx, s, cpOpts(now))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(ctx)
			want := map[string]string{}
			write := func(round int, n int) {
				for i := range n {
					b := NewBatch()
					k := fmt.Sprintf("k%03d", (i*7+round)%150)
					v := fmt.Sprintf("r%d-%d-%0100d", round, i, i)
					if i%5 == 4 {
						b.Delete([]byte(k))
						delete(want, k)
					} else {
						b.Put([]byte(k), []byte(v))
						want[k] = v
					}
					if _, err := d.Write(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(0, 200)
			if flushFirst {
				if err := d.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				write(1, 30) // leave some in the WAL only
			}
			cp, err := CreateCheckpoint(ctx, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			atCP := maps.Clone(want)
			if cp.Seq != d.Stats().LastSeq {
				t.Fatalf("checkpoint seq %d, writer at %d", cp.Seq, d.Stats().LastSeq)
			}
			// Move on and collect everything the checkpoint's point used.
			write(2, 300)
			if err := d.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := d.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(time.Hour)
			if n, err := d.GC(ctx); err != nil || n == 0 {
				t.Fatalf("GC deleted %d objects: %v", n, err)
			}
			gone := 0
			for _, key := range cp.Objects {
				if _, err := s.Stat(ctx, key); errors.Is(err, objstore.ErrNotFound) {
					gone++
				}
			}
			if gone == 0 {
				t.Fatal("GC took none of the checkpoint's original objects; the test proves nothing")
			}

			r, err := OpenCheckpoint(ctx, s, cp.ID, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, r); !maps.Equal(got, atCP) {
				t.Fatalf("checkpoint holds %d keys, want %d", len(got), len(atCP))
			}
			r.Close(ctx)

			list, err := ListCheckpoints(ctx, s)
			if err != nil || len(list) != 1 || list[0].ID != cp.ID {
				t.Fatalf("ListCheckpoints = %v, %v", list, err)
			}

			dst := objstore.NewMem()
			if _, err := CopyCheckpoint(ctx, s, cp.ID, dst, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := CopyCheckpoint(ctx, s, cp.ID, dst, nil); !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("second backup into the same store: %v, want ErrNotEmpty", err)
			}
			if err := Check(ctx, dst); err != nil {
				t.Fatalf("backup fails Check: %v", err)
			}
			restored := objstore.NewMem()
			if _, err := CopyDB(ctx, dst, restored, nil); err != nil {
				t.Fatal(err)
			}
			w, err := Open(ctx, restored, cpOpts(time.Now))
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, w); !maps.Equal(got, atCP) {
				t.Fatalf("restored store holds %d keys, want %d", len(got), len(atCP))
			}
			b := NewBatch()
			b.Put([]byte("after-restore"), []byte("x"))
			if _, err := w.Write(ctx, b); err != nil {
				t.Fatalf("write to the restored store: %v", err)
			}
			w.Close(ctx)

			if err := DeleteCheckpoint(ctx, s, cp.ID); err != nil {
				t.Fatal(err)
			}
			if left, _ := s.List(ctx, checkpointPrefix); len(left) != 0 {
				t.Fatalf("DeleteCheckpoint left %d objects", len(left))
			}
			if _, err := OpenCheckpoint(ctx, s, cp.ID, Options{}); !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("deleted checkpoint opens: %v", err)
			}
		})
	}
	if _, err := GetCheckpoint(ctx, objstore.NewMem(), "../x"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := CreateCheckpoint(ctx, objstore.NewMem(), nil); !errors.Is(err, ErrNoDB) {
		t.Fatalf("checkpoint of an empty store: %v", err)
	}
}

// TestGCPlanMatchesGC: the dry-run plan names exactly what GC deletes.
func TestGCPlanMatchesGC(t *testing.T) {
	ctx := context.Background()
	for _, grace := range []time.Duration{time.Millisecond, time.Hour} {
		s := objstore.NewMem()
		clock := time.Now()
		opts := cpOpts(func() time.Time { return clock })
		opts.GCGrace = grace
		d, err := Open(ctx, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 400 {
			b := NewBatch()
			b.Put([]byte(fmt.Sprintf("k%03d", i%60)), []byte(fmt.Sprintf("%0200d", i)))
			if _, err := d.Write(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(10 * time.Minute)
		plan, err := GCPlan(ctx, s, grace, clock)
		if err != nil {
			t.Fatal(err)
		}
		before, _ := s.List(ctx, "")
		n, err := d.GC(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := s.List(ctx, "")
		still := map[string]bool{}
		for _, in := range after {
			still[in.Key] = true
		}
		deleted := map[string]bool{}
		for _, in := range before {
			if !still[in.Key] {
				deleted[in.Key] = true
			}
		}
		planned := map[string]bool{}
		for _, in := range plan {
			planned[in.Key] = true
		}
		if n != len(deleted) || !maps.Equal(planned, deleted) {
			t.Fatalf("grace %v: plan %d objects, GC deleted %d (%d reported)", grace, len(planned), len(deleted), n)
		}
		if grace == time.Millisecond && len(plan) == 0 {
			t.Fatal("nothing to collect; the test proves nothing")
		}
		d.Close(ctx)
	}
}
