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

// TestWriteContext: a write whose context ends returns then, while its WAL
// PUT is still held by the store; the DB stays usable once the PUT lands.
func TestWriteContext(t *testing.T) {
	ctx := context.Background()
	g := &gateStore{Store: objstore.NewMem(), release: make(chan struct{}), pass: true}
	d := mustOpen(t, g, Options{GCInterval: -1})
	defer d.Close(ctx)
	d.mu.Lock()
	g.failKey = walName(d.nextWALID)
	d.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := d.Write(cctx, batchOf("k", "v")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write: %v", err)
	}
	// Write returned although the PUT it waited for cannot have finished:
	// the gate is still closed.
	close(g.release)
	put(t, d, "k2", "v")
}

// TestCloseHonoursContext: with the store hanging, Close returns when its
// context ends and the writes in flight fail instead of hanging. The store
// hangs for an hour; the bounds below are a minute, far from both.
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
	closed := make(chan error, 1)
	go func() { closed <- d.Close(cctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("close ignored its context")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("write acknowledged although its WAL PUT never finished")
		}
	case <-time.After(time.Minute):
		t.Fatal("a write in flight still hangs after Close returned")
	}
	if _, err := Open(cctx, fs, Options{}); err == nil {
		t.Fatal("open with an expired context succeeded")
	}
}

// TestCoalesce: a batch submitted with Coalesce waits for the next one and
// they share a WAL object; alone, it is written when its hold runs out; a
// batch that did not ask is not held, even behind one that did.
//
// The holds that must not be waited for are an hour long, and the waits
// are bounded by a context far shorter than that and far longer than any
// scheduling delay: a batch wrongly held fails the test by its context,
// however busy the machine, and one correctly written never comes near it.
func TestCoalesce(t *testing.T) {
	ctx := context.Background()
	d := mustOpen(t, objstore.NewMem(), Options{GCInterval: -1})
	defer d.Close(ctx)
	const (
		hold  = 200 * time.Millisecond
		never = time.Hour       // a hold the test would notice
		bound = 2 * time.Minute // how long a wait may take before it counts as held
	)
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
	wait := func(p *Pending, what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		if _, err := p.Wait(wctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// A follower ends the hold: one WAL object for both, written without
	// waiting for the leader's hour.
	before := d.Stats().WALObjects
	a := submit("a", never)
	b := submit("b", 0)
	wait(a, "a held batch whose follower asked for no hold")
	wait(b, "the follower")
	if got := d.Stats().WALObjects - before; got != 1 {
		t.Fatalf("a held batch and its follower took %d WAL objects, want 1", got)
	}

	// Alone: written once the hold runs out, not before.
	start := time.Now()
	wait(submit("c", hold), "a held batch without follower")
	if el := time.Since(start); el < hold*9/10 {
		t.Fatalf("a held batch without follower was written after %v, before its hold of %v", el, hold)
	}

	// A batch that did not ask is written without a hold.
	wait(submit("d", 0), "an unheld batch")

	// Followers that ask for more do not extend the first batch's hold: the
	// first asks for a few seconds (time enough for the follower to arrive
	// on any machine), its follower for an hour; both are written when the
	// first's hold runs out, in one WAL object.
	before = d.Stats().WALObjects
	e := submit("e", 3*time.Second)
	f := submit("f", never)
	wait(e, "the first held batch, behind a follower asking for an hour")
	wait(f, "its follower")
	if got := d.Stats().WALObjects - before; got != 1 {
		t.Fatalf("two held batches within one hold took %d WAL objects, want 1", got)
	}
}
