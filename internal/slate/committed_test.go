package slate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
)

// TestTakeCommitted: a reader hands on every batch it replays, in order and
// as written (puts and deletes), exactly once; a flush that lands before
// the reader read the batches it absorbed breaks the record, and the
// record restarts from the reader's seq.
func TestTakeCommitted(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	opts := testOpts()
	opts.MemtableBytes = 1 << 20 // flush only when told
	w := mustOpen(t, s, opts)
	defer w.Close(ctx)
	r, err := OpenReader(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	r.RecordCommitted()
	start := r.Stats().LastSeq
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, put(t, w, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), fmt.Sprintf("k%d", i-1), "<del>"))
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := r.TakeCommitted(start)
	if !ok || len(got) != 5 {
		t.Fatalf("took %d batches, complete %v; want 5", len(got), ok)
	}
	for i, c := range got {
		if c.Seq != seqs[i] || len(c.Ops) != 2 {
			t.Fatalf("batch %d: %+v, want seq %d with two ops", i, c, seqs[i])
		}
		put, del := c.Ops[0], c.Ops[1]
		if put.Delete || string(put.Key) != fmt.Sprintf("k%d", i) || string(put.Value) != fmt.Sprintf("v%d", i) ||
			!del.Delete || string(del.Key) != fmt.Sprintf("k%d", i-1) || del.Value != nil {
			t.Fatalf("batch %d ops %+v", i, c.Ops)
		}
	}
	if again, ok := r.TakeCommitted(seqs[4]); !ok || len(again) != 0 {
		t.Fatalf("taken twice: %d batches, complete %v", len(again), ok)
	}
	// Batches from an earlier point than the record holds cannot be vouched for.
	if _, ok := r.TakeCommitted(start); ok {
		t.Fatal("a take from before the record's start is complete")
	}

	// The writer flushes batches the reader has not read: the reader
	// replays their WAL objects before it adopts the new sorted tables, so
	// the record stays whole.
	flushed := put(t, w, "k8", "v8")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok = r.TakeCommitted(seqs[4])
	if !ok || len(got) != 1 || got[0].Seq != flushed {
		t.Fatalf("across a flush: %+v complete %v, want batch %d", got, ok, flushed)
	}
	// A flushed batch whose WAL object is gone (collected) before the
	// reader read it reaches the reader only through the sorted table:
	// the record breaks.
	last := put(t, w, "k9", "v9")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(ctx, "wal/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := s.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	after := put(t, w, "k10", "v10")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.TakeCommitted(flushed); ok {
		t.Fatalf("record complete across a batch the reader never read: %+v", got)
	}
	// The record restarted at the reader's seq: a consumer that rebuilt
	// there follows again.
	if seq := r.Stats().LastSeq; seq != after || last >= after {
		t.Fatalf("reader at %d, writer at %d", seq, after)
	}
	next := put(t, w, "k11", "v11")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok = r.TakeCommitted(after)
	if !ok || len(got) != 1 || got[0].Seq != next {
		t.Fatalf("after the restart: %+v complete %v", got, ok)
	}
}

// countingStore counts the GETs asked for while their caller still wants
// the answer (a replay window's requests abandoned when it ends are not).
type countingStore struct {
	objstore.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	if ctx.Err() == nil {
		s.gets.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// TestIdleReaderRefreshCost: a refresh of a reader with nothing new costs
// two GETs (the next manifest, the next WAL object), whatever the replay
// window, before and after refreshes that found new objects.
func TestIdleReaderRefreshCost(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	opts := testOpts()
	// No flush meanwhile: a new manifest costs the reader a GET more.
	opts.MemtableBytes, opts.MaxWALsPerMemtable = 1<<20, 1000
	w := mustOpen(t, mem, opts)
	defer w.Close(ctx)
	put(t, w, "a", "1")
	cs := &countingStore{Store: mem}
	r, err := OpenReader(ctx, cs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	// The first refresh passes the fences the writer left after its
	// objects when it opened.
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := cs.gets.Load()
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := cs.gets.Load() - before; n != 2 {
			t.Fatalf("an idle refresh made %d GETs, want 2", n)
		}
	}
	// After a refresh that found new objects (its read-ahead window
	// widened), an idle one costs two GETs again.
	for i := range 5 {
		put(t, w, fmt.Sprint("k", i), "v")
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	before := cs.gets.Load()
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cs.gets.Load() - before; n != 2 {
		t.Fatalf("an idle refresh after a busy one made %d GETs, want 2", n)
	}
}
