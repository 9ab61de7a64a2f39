package slate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
)

// TestGroupCommit: concurrent writers under PUT latency share WAL objects,
// every acknowledged write has a distinct seq, each writer's seqs increase,
// and everything acknowledged is readable and survives reopen.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	fs := fault.New(mem, fault.Config{Ops: map[fault.Op]fault.Rule{fault.OpPutIfAbsent: {Latency: fault.Fixed(5 * time.Millisecond)}}})
	d := mustOpen(t, fs, Options{GCInterval: -1})
	const writers, each = 16, 20
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				seq, err := d.Write(ctx, batchOf(fmt.Sprintf("w%02d/%03d", w, i), "v"))
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for w, ss := range seqs {
		for i, s := range ss {
			if seen[s] {
				t.Fatalf("seq %d acknowledged twice", s)
			}
			seen[s] = true
			if i > 0 && s <= ss[i-1] {
				t.Fatalf("writer %d: seq %d after %d", w, s, ss[i-1])
			}
		}
	}
	st := d.Stats()
	if st.Batches != writers*each || st.WALObjects >= st.Batches/2 {
		t.Fatalf("no group commit: %d batches in %d WAL objects", st.Batches, st.WALObjects)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d2 := mustOpen(t, mem, Options{GCInterval: -1})
	defer d2.Close(ctx)
	got, err := dump(ctx, d2)
	if err != nil || len(got) != writers*each {
		t.Fatalf("after reopen %d keys, %v", len(got), err)
	}
}

// TestWALFailureFailsQueue: when a WAL PUT fails, that group and every
// write queued behind it fail, later writes fail with ErrFailed, nothing of
// the failed writes is visible, and a reopen recovers.
func TestWALFailureFailsQueue(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	var failWAL atomic.Bool
	fs := fault.New(mem, fault.Config{
		Ops: map[fault.Op]fault.Rule{fault.OpPutIfAbsent: {Latency: fault.Fixed(20 * time.Millisecond)}},
		Hook: func(c fault.Call) fault.Action {
			if c.Op == fault.OpPutIfAbsent && strings.HasPrefix(c.Key, walPrefix) && failWAL.Load() {
				return fault.Fail
			}
			return fault.Proceed
		},
	})
	d := mustOpen(t, fs, Options{GCInterval: -1})
	put(t, d, "before", "ok")
	failWAL.Store(true)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.Write(ctx, batchOf(fmt.Sprint("k", i), "v"))
		}()
		time.Sleep(3 * time.Millisecond) // several queue behind the first PUT
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Fatalf("write %d succeeded although every WAL PUT fails", i)
		}
		if !errors.Is(err, ErrFailed) || !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("write %d: %v, want ErrFailed wrapping the cause", i, err)
		}
	}
	failWAL.Store(false)
	if _, err := d.Write(ctx, batchOf("after", "x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("write on a failed DB: %v", err)
	}
	if _, err := d.Get(ctx, []byte("k0")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed write visible: %v", err)
	}
	_ = d.Close(ctx)
	d2 := mustOpen(t, mem, Options{GCInterval: -1})
	defer d2.Close(ctx)
	got, err := dump(ctx, d2)
	if err != nil || len(got) != 1 || got["before"] != "ok" {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
	put(t, d2, "after", "x")
}

// TestWriteContext: a cancelled context returns promptly; the DB stays
// usable.
func TestWriteContext(t *testing.T) {
	ctx := context.Background()
	fs := fault.New(objstore.NewMem(), fault.Config{Ops: map[fault.Op]fault.Rule{fault.OpPutIfAbsent: {Latency: fault.Fixed(200 * time.Millisecond)}}})
	d := mustOpen(t, fs, Options{GCInterval: -1})
	defer d.Close(ctx)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := d.Write(cctx, batchOf("k", "v")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write: %v", err)
	}
	if time.Since(start) > 150*time.Millisecond {
		t.Fatalf("write ignored its context for %v", time.Since(start))
	}
	put(t, d, "k2", "v")
}

// TestCloseHonoursContext: with the store hanging, Close returns when its
// context ends and the writes in flight fail instead of hanging.
func TestCloseHonoursContext(t *testing.T) {
	ctx := context.Background()
	fs := fault.New(objstore.NewMem(), fault.Config{})
	d := mustOpen(t, fs, Options{GCInterval: -1, FencePollInterval: -1})
	fs.Configure(func(c *fault.Config) {
		c.Ops = map[fault.Op]fault.Rule{fault.OpPutIfAbsent: {Latency: fault.Fixed(time.Hour)}, fault.OpPut: {Latency: fault.Fixed(time.Hour)}}
	})
	done := make(chan error, 1)
	go func() { _, err := d.Write(ctx, batchOf("k", "v")); done <- err }()
	time.Sleep(20 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := d.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("close took %v", time.Since(start))
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("write acknowledged although its WAL PUT never finished")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("write still blocked after close")
	}
	if _, err := Open(cctx, fs, Options{}); err == nil {
		t.Fatal("open with an expired context succeeded")
	}
}

// TestWriteFailsWhenFlushFails: with every memtable slot full and the
// flush failing because the store broke, a write must fail with the store's
// error instead of waiting for a flush that cannot happen (seen as an e2e
// crash test hanging for minutes).
func TestWriteFailsWhenFlushFails(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	fs := fault.New(objstore.NewMem(), fault.Config{Hook: func(c fault.Call) fault.Action {
		if armed.Load() && c.Op == fault.OpPut && strings.HasPrefix(c.Key, sstPrefix) {
			return fault.Crash
		}
		return fault.Pass
	}})
	opts := testOpts()
	opts.MaxImmutables, opts.MaxWALsPerMemtable = 1, 1
	d := mustOpen(t, fs, opts)
	defer d.Close(ctx)
	armed.Store(true)
	put(t, d, "a", "1") // lands; its memtable freezes and its flush crashes the store
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b := NewBatch()
	b.Put([]byte("b"), []byte("2"))
	_, err := d.Write(wctx, b)
	if err == nil {
		t.Fatal("a write on a crashed store succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the write waited for a flush that cannot happen: %v", err)
	}
	if !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("write error %v, want the store's crash", err)
	}
}

// TestSubmitOrder: batches submitted one after another without waiting are
// written in submission order (sequence numbers ascend with it); if one
// fails, every batch submitted after it fails too, which is what lets the
// commit pipeline build on a batch before it is durable.
func TestSubmitOrder(t *testing.T) {
	ctx := context.Background()
	var failWAL atomic.Bool
	fs := fault.New(objstore.NewMem(), fault.Config{
		Ops: map[fault.Op]fault.Rule{fault.OpPutIfAbsent: {Latency: fault.Fixed(5 * time.Millisecond)}},
		Hook: func(c fault.Call) fault.Action {
			if c.Op == fault.OpPutIfAbsent && strings.HasPrefix(c.Key, walPrefix) && failWAL.CompareAndSwap(true, false) {
				return fault.Fail
			}
			return fault.Proceed
		},
	})
	d := mustOpen(t, fs, Options{GCInterval: -1})
	defer d.Close(ctx)
	var ps []*Pending
	for i := range 6 {
		p, err := d.Submit(ctx, batchOf(fmt.Sprint("k", i), fmt.Sprint("v", i)))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	var last uint64
	for i, p := range ps {
		seq, err := p.Wait(ctx)
		if err != nil || seq <= last {
			t.Fatalf("batch %d: seq %d after %d, %v; want ascending and durable", i, seq, last, err)
		}
		last = seq
		if again, err := p.Wait(ctx); again != seq || err != nil {
			t.Fatalf("second Wait of batch %d = %d, %v", i, again, err)
		}
	}
	failWAL.Store(true) // fails the next WAL PUT only
	first, err := d.Submit(ctx, batchOf("lost", "x"))
	if err != nil {
		t.Fatal(err)
	}
	// A PUT after the failed one would succeed: the batch behind must fail
	// anyway.
	second, err := d.Submit(ctx, batchOf("behind", "y"))
	if err != nil && !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
	if _, err := first.Wait(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("failed batch: %v", err)
	}
	if second != nil {
		if _, err := second.Wait(ctx); !errors.Is(err, ErrFailed) {
			t.Fatalf("batch submitted behind a failed one: %v, want ErrFailed", err)
		}
	}
	if _, err := d.Get(ctx, []byte("behind")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("batch behind a failed one is visible: %v", err)
	}
}

// TestCoalesce: a batch submitted with Coalesce waits for the next one and
// they share a WAL object; alone, it is written when its hold runs out; a
// batch that did not ask is not held, even behind one that did.
func TestCoalesce(t *testing.T) {
	ctx := context.Background()
	d := mustOpen(t, objstore.NewMem(), Options{GCInterval: -1})
	defer d.Close(ctx)
	const hold = 200 * time.Millisecond
	submit := func(k string, coalesce time.Duration) *Pending {
		t.Helper()
		b := batchOf(k, "v")
		b.Coalesce(coalesce)
		p, err := d.Submit(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	wait := func(p *Pending) {
		t.Helper()
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A follower within the hold: one WAL object for both.
	before := d.Stats().WALObjects
	start := time.Now()
	a := submit("a", hold)
	time.Sleep(hold / 10)
	b := submit("b", 0)
	wait(a)
	wait(b)
	if got := d.Stats().WALObjects - before; got != 1 {
		t.Fatalf("a held batch and its follower took %d WAL objects, want 1", got)
	}
	if el := time.Since(start); el > hold/2 {
		t.Fatalf("the pair was written after %v: the follower (which asked for no hold) was held", el)
	}

	// Alone: written once the hold runs out, not before.
	start = time.Now()
	wait(submit("c", hold))
	if el := time.Since(start); el < hold*9/10 {
		t.Fatalf("a held batch without follower was written after %v, before its hold of %v", el, hold)
	}

	// A batch that did not ask is written at once.
	start = time.Now()
	wait(submit("d", 0))
	if el := time.Since(start); el > hold/2 {
		t.Fatalf("an unheld batch took %v", el)
	}

	// Followers that ask for more do not extend the first batch's hold.
	before = d.Stats().WALObjects
	start = time.Now()
	e := submit("e", hold)
	time.Sleep(hold / 4)
	f := submit("f", hold)
	wait(e)
	el := time.Since(start)
	wait(f)
	if el > hold+hold/2 {
		t.Fatalf("the first held batch waited %v, past its own hold of %v", el, hold)
	}
	if got := d.Stats().WALObjects - before; got != 1 {
		t.Fatalf("two held batches within one hold took %d WAL objects, want 1", got)
	}
}
