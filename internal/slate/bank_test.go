package slate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// TestBankAuditor: writers move money between accounts, each transfer one
// batch, while flushes and compactions run; auditors scanning the live DB,
// snapshots and a reader must always see the same total. A torn batch, a
// scan that mixes two states or a lost version shows up as a wrong total.
func TestBankAuditor(t *testing.T) {
	const accounts, initial = 50, 1000
	ctx := context.Background()
	s := objstore.NewMem()
	opts := Options{MemtableBytes: 2048, MaxWALsPerMemtable: 4, BlockSize: 128, MaxSSTBytes: 2048, L0CompactionTrigger: 2, RunMergeWidth: 2, GCInterval: 5 * time.Millisecond, GCGrace: time.Hour}
	d := mustOpen(t, s, opts)
	defer d.Close(ctx)
	acct := func(i int) []byte { return []byte(fmt.Sprintf("acct/%03d", i)) }
	b := NewBatch()
	for i := 0; i < accounts; i++ {
		b.Put(acct(i), []byte(strconv.Itoa(initial)))
	}
	if _, err := d.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	total := func(it *Iterator) (int, error) {
		sum, n := 0, 0
		for it.Next() {
			v, err := strconv.Atoi(string(it.Value()))
			if err != nil {
				return 0, err
			}
			sum += v
			n++
		}
		if err := it.Close(); err != nil {
			return 0, err
		}
		if n != accounts {
			return 0, fmt.Errorf("saw %d accounts", n)
		}
		return sum, nil
	}
	r, err := OpenReader(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)

	var mu sync.Mutex // serializes read-modify-write of transfers
	var stop atomic.Bool
	var transfers atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				mu.Lock()
				fv, err1 := d.Get(ctx, acct(from))
				tv, err2 := d.Get(ctx, acct(to))
				if err1 != nil || err2 != nil {
					mu.Unlock()
					t.Errorf("get: %v %v", err1, err2)
					return
				}
				f, _ := strconv.Atoi(string(fv))
				g, _ := strconv.Atoi(string(tv))
				amt := rng.IntN(10)
				b := NewBatch()
				b.Put(acct(from), []byte(strconv.Itoa(f-amt)))
				b.Put(acct(to), []byte(strconv.Itoa(g+amt)))
				_, err := d.Write(ctx, b)
				mu.Unlock()
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				transfers.Add(1)
			}
		}()
	}
	audits := 0
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) && !t.Failed() {
		if sum, err := total(d.Scan(ctx, nil, nil)); err != nil || sum != accounts*initial {
			t.Fatalf("live audit: total %d, %v", sum, err)
		}
		snap, err := d.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		_ = d.Compact(ctx)
		if sum, err := total(snap.Scan(ctx, nil, nil)); err != nil || sum != accounts*initial {
			t.Fatalf("snapshot audit: total %d, %v", sum, err)
		}
		snap.Close()
		if err := r.Refresh(ctx); err != nil {
			t.Fatalf("reader refresh: %v", err)
		}
		if sum, err := total(r.Scan(ctx, nil, nil)); err != nil || sum != accounts*initial {
			t.Fatalf("reader audit: total %d, %v", sum, err)
		}
		audits++
	}
	stop.Store(true)
	wg.Wait()
	st := d.Stats()
	t.Logf("%d transfers, %d audits, %d flushes, %d compactions", transfers.Load(), audits, st.Flushes, st.Compactions)
	if transfers.Load() == 0 || st.Flushes == 0 || st.Compactions == 0 {
		t.Fatal("workload did not exercise flushes and compactions")
	}
}
