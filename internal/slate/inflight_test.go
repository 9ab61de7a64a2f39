package slate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// gateStore holds the WAL PUT of one id until the test releases it, then
// fails it (or, with pass, lets it through); every other call passes.
type gateStore struct {
	objstore.Store
	failKey string
	release chan struct{}
	pass    bool
}

var errGate = errors.New("gate: injected WAL PUT failure")

func (g *gateStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if key == g.failKey {
		<-g.release
		if !g.pass {
			return errGate
		}
	}
	return g.Store.PutIfAbsent(ctx, key, data)
}

// TestInFlightFailureVoidsLaterObjects: with several WAL PUTs in flight,
// one that fails fails its group and every later one although their
// objects landed; a follower stops at the gap; the next writer fences the
// gap, so the landed objects are void for it, for the checker and for the
// follower, and it goes on writing after them.
func TestInFlightFailureVoidsLaterObjects(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	g := &gateStore{Store: mem, release: make(chan struct{})}
	d := mustOpen(t, g, Options{GCInterval: -1, WALInFlight: MaxWALInFlight})
	put(t, d, "before", "ok")
	d.mu.Lock()
	first := d.nextWALID
	d.mu.Unlock()
	g.failKey = walName(first)

	errs := make([]error, MaxWALInFlight)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.Write(ctx, batchOf(fmt.Sprint("k", i), "v"))
		}()
		// Each write its own WAL object: the next starts while this one's
		// PUT is in flight.
		deadline := time.Now().Add(5 * time.Second)
		for {
			d.mu.Lock()
			launched := d.nextWALID > first+uint64(i)
			d.mu.Unlock()
			if launched || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	// The objects after the gated one land, and are not acknowledged.
	for id := first + 1; id < first+MaxWALInFlight; id++ {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := mem.Stat(ctx, walName(id)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never landed", walName(id))
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(10 * time.Millisecond)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d finished (%v) while an earlier WAL object is in flight", i, err)
		}
	}
	close(g.release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrFailed) || !errors.Is(err, errGate) {
			t.Fatalf("write %d: %v, want ErrFailed wrapping the failed PUT", i, err)
		}
	}
	for i := range errs {
		if _, err := d.Get(ctx, []byte(fmt.Sprint("k", i))); !errors.Is(err, ErrNotFound) {
			t.Fatalf("k%d of a failed write visible: %v", i, err)
		}
	}
	_ = d.Close(ctx)

	// A follower stops at the gap.
	r, err := OpenReader(ctx, mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	assertKeys := func(what string, db *DB, want map[string]string) {
		t.Helper()
		got, err := dump(ctx, db)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %v, %v; want %v", what, got, err, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: %s = %q, want %q (all: %v)", what, k, got[k], v, got)
			}
		}
	}
	assertKeys("follower at the gap", r, map[string]string{"before": "ok"})

	// The next writer fences the gap and goes on after the void objects.
	d2 := mustOpen(t, mem, Options{GCInterval: -1})
	data, err := mem.Get(ctx, walName(first))
	if err != nil {
		t.Fatalf("the gap was not fenced: %v", err)
	}
	if h, b, err := decodeWAL(walName(first), first, data); err != nil || len(b) != 0 || h.epoch != d2.epoch {
		t.Fatalf("%s: %+v with %d batches, %v; want a fence of epoch %d", walName(first), h, len(b), err, d2.epoch)
	}
	assertKeys("reopened", d2, map[string]string{"before": "ok"})
	put(t, d2, "after", "x")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	assertKeys("follower after the gap", r, map[string]string{"before": "ok", "after": "x"})
	if err := d2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, mem); err != nil {
		t.Fatalf("check: %v", err)
	}
	d3 := mustOpen(t, mem, Options{GCInterval: -1})
	defer d3.Close(ctx)
	assertKeys("third writer", d3, map[string]string{"before": "ok", "after": "x"})
}

// TestGapNotInFlightIsCorrupt: an id missing below the WAL's end that no
// later object was written while it was in flight is corruption, not a
// failed writer's leftover, and no writer fences over it.
func TestGapNotInFlightIsCorrupt(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	d := mustOpen(t, mem, Options{GCInterval: -1, WALInFlight: MaxWALInFlight, MaxWALsPerMemtable: 1 << 20, MemtableBytes: 1 << 20})
	for i := 0; i < 5; i++ {
		put(t, d, fmt.Sprint("k", i), "v") // one at a time: each object's base is its own id
	}
	d.mu.Lock()
	last := d.nextWALID - 1
	d.mu.Unlock()
	// Stop without flushing: the WAL holds everything.
	crashStop(d)
	if err := mem.Delete(ctx, walName(last-1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, mem, Options{GCInterval: -1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open over a lost WAL object: %v, want ErrCorrupt", err)
	}
	if _, err := mem.Stat(ctx, walName(last-1)); err == nil {
		t.Fatal("the lost object's id was fenced over")
	}
	if err := Check(ctx, mem); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("check: %v, want ErrCorrupt", err)
	}
	// A reader (verify, inspect, backup, a replica) refuses it too, rather
	// than stop at the gap and show the store without the commits after it.
	if _, err := OpenReader(ctx, mem, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open reader over a lost WAL object: %v, want ErrCorrupt", err)
	}
}
