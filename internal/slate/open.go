package slate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/moraine-db/moraine/internal/objstore"
)

func newDB(store objstore.Store, opts Options, readOnly bool) *DB {
	opts = opts.withDefaults()
	d := &DB{
		store:      store,
		opts:       opts,
		readOnly:   readOnly,
		tables:     newTableCache(store, opts.BlockCacheBytes),
		mem:        newMemtable(),
		snaps:      make(map[uint64]int),
		wakeBG:     make(chan struct{}, 1),
		commitDone: make(chan struct{}),
	}
	d.commitCond = sync.NewCond(&d.mu)
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.lastGC = opts.Now()
	return d
}

// Open opens store as the single writer, creating an empty DB if the store
// holds none. It fences any previous writer (slatedb.md §2.5):
//
//  1. load the latest manifest (or create manifest 1);
//  2. create the next manifest with writer_epoch+1 (create-if-absent; on a
//     conflict reload and bump again);
//  3. find the WAL end and create an empty fence object after it; if the id
//     is taken (the old writer got there first) re-check the epoch and try
//     the next id;
//  4. replay WAL objects (replay_after_wal_id, fence) into memtables,
//     skipping batches already in sorted tables;
//  5. re-read the manifest to prove the epoch is still ours.
func Open(ctx context.Context, store objstore.Store, opts Options) (*DB, error) {
	d := newDB(store, opts, false)
	man, err := d.bumpEpoch(ctx)
	if err != nil {
		d.cancel()
		return nil, err
	}
	d.epoch = man.writerEpoch
	d.man = man
	d.visibleSeq = man.lastL0Seq

	fence, err := d.writeFence(ctx, man.replayAfterWAL)
	if err != nil {
		d.cancel()
		return nil, err
	}
	if err := d.replay(ctx, man, man.replayAfterWAL+1, fence, true); err != nil {
		d.cancel()
		return nil, err
	}
	latest, err := loadLatestManifest(ctx, store)
	if err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open: confirm epoch: %w", err)
	}
	if latest.writerEpoch != d.epoch {
		d.cancel()
		return nil, fmt.Errorf("slate: open: epoch %d superseded by %d: %w", d.epoch, latest.writerEpoch, ErrFenced)
	}
	d.man = latest
	d.nextWALID = fence + 1
	d.appliedWAL = fence
	d.lastSeq = d.visibleSeq

	d.wg.Add(1)
	go d.bgLoop()
	go d.commitLoop()
	if len(d.imm) > 0 {
		d.kickBG()
	}
	return d, nil
}

// bumpEpoch creates the next manifest with a higher writer epoch.
func (d *DB) bumpEpoch(ctx context.Context) (*manifest, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 100 {
			return nil, errors.New("slate: open: could not advance the manifest after 100 attempts")
		}
		cur, err := loadLatestManifest(ctx, d.store)
		if err != nil {
			return nil, fmt.Errorf("slate: open: %w", err)
		}
		if cur == nil {
			first := &manifest{id: 1}
			err := putManifest(ctx, d.store, first)
			if err != nil && !errors.Is(err, errManifestConflict) {
				return nil, fmt.Errorf("slate: open: create first manifest: %w", err)
			}
			continue
		}
		next := cur.clone()
		next.id++
		next.writerEpoch++
		err = putManifest(ctx, d.store, next)
		if errors.Is(err, errManifestConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("slate: open: fence manifest: %w", err)
		}
		d.stats.manifestWrites.Add(1)
		return next, nil
	}
}

// writeFence creates the empty fence object just past the WAL end and
// returns its id.
func (d *DB) writeFence(ctx context.Context, replayAfter uint64) (uint64, error) {
	end, err := walEnd(ctx, d.store, replayAfter)
	if err != nil {
		return 0, fmt.Errorf("slate: open: %w", err)
	}
	for id := end + 1; ; id++ {
		err := d.store.PutIfAbsent(ctx, walName(id), nil)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			return 0, fmt.Errorf("slate: open: write fence %s: %w", walName(id), err)
		}
		// The previous writer wrote id meanwhile; make sure no newer
		// writer has taken over before moving past it.
		latest, err := loadLatestManifest(ctx, d.store)
		if err != nil {
			return 0, fmt.Errorf("slate: open: %w", err)
		}
		if latest.writerEpoch != d.epoch {
			return 0, fmt.Errorf("slate: open: %w", ErrFenced)
		}
	}
}

// walEnd returns the highest WAL id present (at least after).
func walEnd(ctx context.Context, store objstore.Store, after uint64) (uint64, error) {
	var infos []objstore.ObjectInfo
	err := retryRead(ctx, func() (err error) { infos, err = store.List(ctx, walPrefix); return err })
	if err != nil {
		return 0, fmt.Errorf("list WAL: %w", err)
	}
	end := after
	for _, in := range infos {
		if id, ok := parseID(in.Key, walPrefix, walSuffix); ok && id > end {
			end = id
		}
	}
	return end, nil
}

// replayWindow is how many WAL objects recovery fetches ahead.
const replayWindow = 32

type walFetch struct {
	data []byte
	err  error
}

// replay applies WAL objects [from, to) to the memtables. With strict set
// (the writer), a missing object is corruption: ids are contiguous. Without
// it (a reader), the first missing object ends the replay. Batches with seq
// <= man.lastL0Seq (already in sorted tables) or <= the current visible
// seq are skipped. Memtables are frozen at batch boundaries once they grow
// past MemtableBytes, each stamped with the WAL id it ends at. Returns with
// d.visibleSeq and d.nextWAL advanced.
func (d *DB) replay(ctx context.Context, man *manifest, from, to uint64, strict bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]chan walFetch, 0, replayWindow)
	next := from
	issue := func() {
		for len(results) < replayWindow && next < to {
			ch := make(chan walFetch, 1)
			go func(id uint64) {
				var data []byte
				err := retryRead(ctx, func() (err error) { data, err = d.store.Get(ctx, walName(id)); return err })
				ch <- walFetch{data, err}
			}(next)
			results = append(results, ch)
			next++
		}
	}
	for id := from; id < to; id++ {
		issue()
		r := <-results[0]
		results = results[1:]
		if r.err != nil {
			if isNotFound(r.err) {
				if !strict {
					return nil
				}
				return corruptf(walName(id), "WAL object missing inside the WAL range (%d, %d)", from-1, to)
			}
			return fmt.Errorf("slate: replay %s: %w", walName(id), r.err)
		}
		_, batches, err := decodeWAL(walName(id), id, r.data)
		if err != nil {
			return err
		}
		d.stats.replayed.Add(1)
		d.mu.Lock()
		for _, b := range batches {
			if b.seq <= man.lastL0Seq || b.seq <= d.visibleSeq {
				continue
			}
			d.mem.applyBatch(b.seq, b.ops)
			d.visibleSeq = b.seq
		}
		d.appliedWAL = id
		d.nextWAL = id + 1
		d.walsInMem++
		if !d.readOnly && (d.mem.bytes >= d.opts.MemtableBytes || d.walsInMem >= d.opts.MaxWALsPerMemtable) && !d.mem.empty() {
			d.walsInMem = 0
			d.mem.lastWAL = id
			d.imm = append(d.imm, d.mem)
			d.mem = newMemtable()
		}
		d.mu.Unlock()
	}
	return nil
}
