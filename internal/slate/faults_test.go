package slate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
)

// faultClient is a client that does what a real one would on errors:
// retry reads, and reopen the DB after a failed write.
type faultClient struct {
	t    *testing.T
	fs   objstore.Store
	opts Options

	mu  sync.RWMutex
	db  *DB
	gen int

	reopens int
}

func (c *faultClient) openLoop() *DB {
	for attempt := 0; ; attempt++ {
		d, err := Open(context.Background(), c.fs, c.opts)
		if err == nil {
			return d
		}
		if errors.Is(err, ErrCorrupt) || attempt > 200 {
			c.t.Errorf("open: %v", err)
			return nil
		}
	}
}

func (c *faultClient) reopen(gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = c.db.Close(ctx)
	cancel()
	c.db = c.openLoop()
	c.gen++
	c.reopens++
}

// TestFaultInjection runs concurrent writers under 5% injected errors on
// every operation, ambiguous writes and random latency, and checks that no
// acknowledged batch is lost and no batch is partly present.
func TestFaultInjection(t *testing.T) {
	perWriter := 150
	if os.Getenv("SLATE_SOAK") != "" {
		perWriter = 3000
	}
	for _, backend := range testBackends(t) {
		for _, inFlight := range []int{1, MaxWALInFlight} {
			t.Run(fmt.Sprintf("%s/inflight=%d", backend.name, inFlight), func(t *testing.T) {
				faultRound(t, backend.open(t), inFlight, perWriter)
			})
		}
	}
}

// faultRound is one TestFaultInjection run: four writers against a store
// that fails and lies, the writer reopening after every failure.
func faultRound(t *testing.T, inner objstore.Store, inFlight, perWriter int) {
	{
		{
			fs := fault.New(inner, fault.Config{
				Seed: 42,
				Default: fault.Rule{ErrorRate: 0.05, AmbiguousRate: 0.02,
					Latency: fault.Uniform(0, 500*time.Microsecond)},
			})
			c := &faultClient{t: t, fs: fs, opts: Options{
				MemtableBytes: 2048, MaxWALsPerMemtable: 8, BlockSize: 256, MaxSSTBytes: 4096,
				L0CompactionTrigger: 3, GCInterval: 20 * time.Millisecond, GCGrace: time.Millisecond,
				WALInFlight: inFlight,
			}}
			c.db = c.openLoop()
			if c.db == nil {
				t.FailNow()
			}
			type state struct{ acked, doubt [][]string }
			states := make([]state, 4)
			var wg sync.WaitGroup
			for w := range states {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perWriter && !t.Failed(); i++ {
						keys := []string{fmt.Sprintf("w%d/%05d/a", w, i), fmt.Sprintf("w%d/%05d/b", w, i), fmt.Sprintf("w%d/%05d/c", w, i)}
						b := NewBatch()
						for _, k := range keys {
							b.Put([]byte(k), []byte(k))
						}
						c.mu.RLock()
						d, gen := c.db, c.gen
						var err error
						if d != nil {
							_, err = d.Write(context.Background(), b)
						}
						c.mu.RUnlock()
						if d == nil {
							return
						}
						if err == nil {
							states[w].acked = append(states[w].acked, keys)
							continue
						}
						states[w].doubt = append(states[w].doubt, keys)
						c.reopen(gen)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			ctx := context.Background()
			_ = c.db.Close(ctx)
			// Check on the underlying store without faults.
			d := mustOpen(t, inner, Options{GCInterval: -1})
			defer d.Close(ctx)
			got, err := dump(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(ctx, inner); err != nil {
				t.Fatalf("check: %v", err)
			}
			nAcked := 0
			for _, s := range states {
				for _, keys := range s.acked {
					nAcked++
					for _, k := range keys {
						if got[k] != k {
							t.Fatalf("acknowledged key %s lost", k)
						}
					}
				}
				for _, keys := range s.doubt {
					n := 0
					for _, k := range keys {
						if got[k] == k {
							n++
						}
					}
					if n != 0 && n != len(keys) {
						t.Fatalf("batch %v partly present (%d of %d keys)", keys, n, len(keys))
					}
				}
			}
			st := fs.Stats()
			t.Logf("acked %d batches, %d reopens, injected %d errors, %d ambiguous", nAcked, c.reopens, st.Injected, st.Ambiguous)
			if nAcked == 0 || st.Injected == 0 {
				t.Fatalf("workload did not exercise anything")
			}
		}
	}
}
