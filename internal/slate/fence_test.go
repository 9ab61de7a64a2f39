package slate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
)

// TestFencing opens a second writer while the first keeps writing (and both
// run GC), over many random interleavings. It checks that every write the
// first writer had acknowledged is in the second, that nothing the first
// wrote after the second opened ever lands, and that the first writer's
// later writes fail with ErrFenced.
func TestFencing(t *testing.T) {
	iters := 15
	if testing.Short() {
		iters = 5
	}
	for _, backend := range testBackends(t) {
		n := iters
		if backend.name != "mem" {
			n = iters / 5
		}
		for iter := 0; iter < n; iter++ {
			t.Run(fmt.Sprintf("%s/%d", backend.name, iter), func(t *testing.T) {
				fencingRound(t, uint64(iter), backend.open(t))
			})
		}
	}
}

func fencingRound(t *testing.T, seed uint64, mem objstore.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	lat := fault.Config{Seed: seed, Default: fault.Rule{Latency: fault.Uniform(0, time.Duration(rng.IntN(3000))*time.Microsecond)}}
	opts := Options{
		MemtableBytes: 512, MaxWALsPerMemtable: 1 + rng.IntN(6), BlockSize: 128, MaxSSTBytes: 1024,
		L0CompactionTrigger: 2, GCInterval: -1, Now: func() time.Time { return time.Now().Add(time.Hour) },
		WALInFlight: 1 + rng.IntN(MaxWALInFlight),
	}
	a := mustOpen(t, fault.New(mem, lat), opts)

	var mu sync.Mutex
	acked := map[string]bool{}
	var fencedErrs, otherErrs int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("a/%d/%05d", w, i)
				b := NewBatch()
				b.Put([]byte(k), []byte("1"))
				b.Put([]byte(k+"/twin"), []byte("2"))
				_, err := a.Write(ctx, b)
				mu.Lock()
				switch {
				case err == nil:
					acked[k] = true
				case errors.Is(err, ErrFenced):
					fencedErrs++
				default:
					otherErrs++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // A's background chores race with B's open
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = a.Flush(ctx)
			_, _ = a.GC(ctx)
		}
	}()
	time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)

	b := mustOpen(t, fault.New(mem, lat), opts)
	b.mu.Lock()
	fenceB, bManID := b.nextWALID-1, b.man.id
	b.mu.Unlock()
	atOpen, err := dump(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// B writes and collects garbage while A may still be trying.
	for i := 0; i < 20; i++ {
		put(t, b, fmt.Sprintf("b/%03d", i), "x")
		if i%5 == 0 {
			if _, err := b.GC(ctx); err != nil {
				t.Fatalf("B gc: %v", err)
			}
		}
	}
	time.Sleep(5 * time.Millisecond)
	close(stop)
	wg.Wait()
	_ = a.Close(ctx)

	mu.Lock()
	defer mu.Unlock()
	if otherErrs > 0 {
		t.Fatalf("A got %d non-fencing errors", otherErrs)
	}
	if fencedErrs == 0 {
		t.Fatalf("A was never told it was fenced")
	}
	for k := range acked {
		if atOpen[k] != "1" || atOpen[k+"/twin"] != "2" {
			t.Fatalf("acknowledged write %s lost by the new writer", k)
		}
	}
	// Nothing A wrote may land after B opened: every WAL object of A's
	// epoch is at or below B's last fence (those among B's fences are
	// void), and every manifest after B's bump has B's epoch or higher.
	wals, _ := mem.List(ctx, walPrefix)
	for _, in := range wals {
		id, _ := parseID(in.Key, walPrefix, walSuffix)
		data, err := mem.Get(ctx, in.Key)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := decodeWAL(in.Key, id, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && h.epoch == a.epoch && id > fenceB {
			t.Fatalf("A's WAL object %s landed after B's fence %d", in.Key, fenceB)
		}
	}
	mans, _ := mem.List(ctx, manifestPrefix)
	for _, in := range mans {
		id, _ := parseID(in.Key, manifestPrefix, manifestSuffix)
		m, _, err := getManifest(ctx, mem, id)
		if err != nil {
			t.Fatal(err)
		}
		if id > bManID && m.writerEpoch < b.epoch {
			t.Fatalf("manifest %d has stale epoch %d", id, m.writerEpoch)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, mem); err != nil {
		t.Fatalf("check: %v", err)
	}
	// A third open sees exactly B's view of A's keys, plus B's writes.
	c := mustOpen(t, mem, opts)
	defer c.Close(ctx)
	final, err := dump(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range final {
		if k[0] == 'a' && atOpen[k] != v {
			t.Fatalf("key %s=%q appeared after B opened", k, v)
		}
	}
	for k := range atOpen {
		if _, ok := final[k]; !ok {
			t.Fatalf("key %s lost", k)
		}
	}
	for i := 0; i < 20; i++ {
		if final[fmt.Sprintf("b/%03d", i)] != "x" {
			t.Fatalf("B's write %d lost", i)
		}
	}
}
