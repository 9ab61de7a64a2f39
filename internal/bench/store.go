package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

// StoreResult is what RunStore measured.
type StoreResult struct {
	Batches       uint64
	Elapsed       time.Duration
	P50, P99, Max time.Duration // write latency (batch to durable)
	Stats         slate.Stats
}

// RunStore is `moraine bench store` without --postgres: writers concurrent
// writers each write batches of batchKeys keys of valueSize bytes to a slate
// store on store, waiting for each to be durable, for d.
func RunStore(ctx context.Context, store objstore.Store, writers, batchKeys, valueSize int, d time.Duration) (StoreResult, error) {
	db, err := slate.Open(ctx, store, slate.Options{})
	if err != nil {
		return StoreResult{}, err
	}
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lat := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := make([]byte, 0, 32)
			for i := 0; runCtx.Err() == nil; i++ {
				b := slate.NewBatch()
				for k := 0; k < batchKeys; k++ {
					key = fmt.Appendf(key[:0], "w%04d/%010d/%04d", w, i, k)
					b.Put(key, value)
				}
				t0 := time.Now()
				// The write itself is not bound to the run's deadline: a
				// batch in flight when time is up still counts once durable.
				if _, err := db.Write(ctx, b); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := db.Stats()
	closeErr := db.Close(ctx)
	for _, err := range errs {
		if err != nil {
			return StoreResult{}, fmt.Errorf("write: %w", err)
		}
	}
	if closeErr != nil {
		return StoreResult{}, fmt.Errorf("close: %w", closeErr)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	res := StoreResult{Batches: uint64(len(all)), Elapsed: elapsed, Stats: st}
	if len(all) > 0 {
		res.P50 = all[len(all)/2]
		res.P99 = all[len(all)*99/100]
		res.Max = all[len(all)-1]
	}
	return res, nil
}
