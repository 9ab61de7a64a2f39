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
	d.lastRewrite = d.lastGC
	return d
}

// Open opens store as the single writer, creating an empty DB if the store
// holds none. It fences any previous writer (SlateDB's writer fencing):
//
//  1. load the latest manifest (or create manifest 1);
//  2. create the next manifest with writer_epoch+1 (create-if-absent; on a
//     conflict reload and bump again);
//  3. fence the WAL (writeFence): create a fence object carrying the new
//     epoch in every gap of the WAL, just past its end (if the id is taken,
//     the old writer got there first: re-check the epoch and try the next
//     id), and in the MaxWALInFlight-1 ids after that one;
//  4. replay WAL objects (replay_after_wal_id, last fence] into memtables,
//     skipping batches already in sorted tables and objects an older epoch
//     wrote after a newer epoch's fence (replay);
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

	wal, err := listWAL(ctx, store)
	if err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open: %w", err)
	}
	fence, err := d.writeFence(ctx, wal, man.replayAfterWAL)
	if err != nil {
		d.cancel()
		return nil, err
	}
	// The listing predates this writer's fences, which all lie above the
	// replay start.
	if d.walEpoch, err = fenceEpochBelow(ctx, store, wal, man.replayAfterWAL+1); err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open: %w", err)
	}
	if err := d.replay(ctx, man, man.replayAfterWAL+1, fence+1, true); err != nil {
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

// writeFence fences the WAL for this writer's epoch and returns the id of
// its last fence; this writer's own WAL objects follow it. A previous
// writer may have had up to MaxWALInFlight WAL PUTs in flight, landing in
// any order, and acknowledges a batch only once every WAL object up to
// its own has landed. Creating, with create-if-absent, a fence in
//
//   - every id missing below the WAL's end: a PUT still in flight there
//     now fails, so nothing the old writer wrote after it is acknowledged;
//   - the first free id past the end (the fence proper, as in SlateDB);
//   - the MaxWALInFlight-1 ids after that one: the old writer cannot have
//     had a PUT in flight beyond them, since every id up to its own must
//     land first and the fence proper is not its;
//
// leaves every id up to the returned one occupied, so replay sees all the
// old writer could have acknowledged, and anything of its that landed
// after one of these fences is void (replay).
func (d *DB) writeFence(ctx context.Context, wal walListing, replayAfter uint64) (uint64, error) {
	end := wal.end(replayAfter)
	if err := checkGaps(ctx, d.store, wal, replayAfter, end); err != nil {
		return 0, err
	}
	put := func(id uint64) (bool, error) {
		err := d.store.PutIfAbsent(ctx, walName(id), encodeWAL(id, walHeader{epoch: d.epoch, base: id}, nil))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, objstore.ErrExists):
			return false, nil
		default:
			return false, fmt.Errorf("slate: open: write fence %s: %w", walName(id), err)
		}
	}
	for id := replayAfter + 1; id < end; id++ {
		if _, ok := wal[id]; !ok {
			if _, err := put(id); err != nil {
				return 0, err
			}
		}
	}
	fence := end + 1
	for ; ; fence++ {
		landed, err := put(fence)
		if err != nil {
			return 0, err
		}
		if landed {
			break
		}
		// The previous writer wrote this id meanwhile; make sure no newer
		// writer has taken over before moving past it.
		latest, err := loadLatestManifest(ctx, d.store)
		if err != nil {
			return 0, fmt.Errorf("slate: open: %w", err)
		}
		if latest.writerEpoch != d.epoch {
			return 0, fmt.Errorf("slate: open: %w", ErrFenced)
		}
	}
	last := fence + MaxWALInFlight - 1
	for id := fence + 1; id <= last; id++ {
		if _, err := put(id); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// checkGaps tells a WAL object a failed writer never wrote from one the
// store lost. The writer starts a PUT only while fewer than MaxWALInFlight
// are in flight and stops at the first that fails, so an id missing below
// the WAL's end is one it gave up on only if every object after it was
// started while it was still in flight (their base is at or below it).
// Any other gap is corruption, which fencing it would silently hide.
func checkGaps(ctx context.Context, store objstore.Store, wal walListing, after, end uint64) error {
	var bases map[uint64]uint64 // of the objects after the first gap
	for g := after + 1; g < end; g++ {
		if _, ok := wal[g]; ok {
			continue
		}
		if bases == nil {
			if end-g >= MaxWALInFlight {
				return corruptf(walName(g), "missing inside the WAL range (%d, %d]", after, end)
			}
			bases = map[uint64]uint64{}
			for id := g + 1; id <= end; id++ {
				if _, ok := wal[id]; !ok {
					continue
				}
				var data []byte
				err := retryRead(ctx, func() (err error) { data, err = store.Get(ctx, walName(id)); return err })
				if err != nil {
					return fmt.Errorf("slate: open: %s: %w", walName(id), err)
				}
				h, _, err := decodeWAL(walName(id), id, data)
				if err != nil {
					return err
				}
				bases[id] = h.base
			}
		}
		for id, base := range bases {
			if id > g && base > g {
				return corruptf(walName(g), "missing inside the WAL range (%d, %d], and %s was written after it landed", after, end, walName(id))
			}
		}
	}
	return nil
}

// walListing is one LIST of the WAL: the size of each object present, by
// id.
type walListing map[uint64]int64

func listWAL(ctx context.Context, store objstore.Store) (walListing, error) {
	var infos []objstore.ObjectInfo
	err := retryRead(ctx, func() (err error) { infos, err = store.List(ctx, walPrefix); return err })
	if err != nil {
		return nil, fmt.Errorf("list WAL: %w", err)
	}
	wal := make(walListing, len(infos))
	for _, in := range infos {
		if id, ok := parseID(in.Key, walPrefix, walSuffix); ok {
			wal[id] = in.Size
		}
	}
	return wal, nil
}

// end is the highest WAL id present, at least after.
func (wal walListing) end(after uint64) uint64 {
	end := after
	for id := range wal {
		end = max(end, id)
	}
	return end
}

// fenceEpochBelow returns the epoch of the last fence below WAL id from:
// replay, starting at from, must know it to tell a void object from a
// valid one (walHeader.void), and the fence that voids one may lie below
// the replay range. Fences are never deleted, and each writer's lie above
// every earlier writer's, so the last one carries the highest epoch. 0 if
// there is none (or only zero-byte ones, from before fences carried epochs
// and objects could be void).
func fenceEpochBelow(ctx context.Context, store objstore.Store, wal walListing, from uint64) (uint64, error) {
	var last uint64
	for id, size := range wal {
		if id < from && id > last && isFence(size) {
			last = id
		}
	}
	if last == 0 {
		return 0, nil
	}
	var data []byte
	err := retryRead(ctx, func() (err error) { data, err = store.Get(ctx, walName(last)); return err })
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", walName(last), err)
	}
	h, _, err := decodeWAL(walName(last), last, data)
	return h.epoch, err
}

// replayWindow is how many WAL objects recovery fetches ahead.
const replayWindow = 32

type walFetch struct {
	data []byte
	err  error
}

// replay applies WAL objects [from, to) to the memtables. With strict set
// (the writer), a missing object is corruption: writeFence left every id up
// to the last fence occupied. Without it (a reader), the first missing
// object ends the replay. Batches with seq <= man.lastL0Seq (already in
// sorted tables) or <= the current visible seq are skipped, and so are
// void objects (walHeader.void, against d.walEpoch). Memtables are frozen
// at batch boundaries once they grow past MemtableBytes, each stamped with
// the WAL id it ends at. Returns with d.visibleSeq and d.nextWAL advanced.
func (d *DB) replay(ctx context.Context, man *manifest, from, to uint64, strict bool) error {
	ctx, cancel := context.WithCancel(ctx)
	// Reads still under way when the replay ends are cancelled and waited
	// for: none outlives it.
	var fetching sync.WaitGroup
	defer func() { cancel(); fetching.Wait() }()
	results := make([]chan walFetch, 0, replayWindow)
	next := from
	// A reader usually finds nothing new: it asks for the next object
	// alone and widens the window as objects turn up, so that an idle
	// reader costs one GET per refresh, not a window's worth.
	window := replayWindow
	if !strict {
		window = 1
	}
	issue := func() {
		for len(results) < window && next < to {
			ch := make(chan walFetch, 1)
			fetching.Add(1)
			go func(id uint64) {
				defer fetching.Done()
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
		window = min(2*window, replayWindow)
		h, batches, err := decodeWAL(walName(id), id, r.data)
		if err != nil {
			return err
		}
		d.stats.replayed.Add(1)
		d.mu.Lock()
		if h.void(&d.walEpoch) {
			batches = nil
		}
		for _, b := range batches {
			if b.seq <= d.visibleSeq {
				continue
			}
			if b.seq <= man.lastL0Seq {
				d.committed.breakAt() // in the sorted tables, not replayed
				continue
			}
			d.mem.applyBatch(b.seq, b.ops)
			d.visibleSeq = b.seq
			d.committed.record(b.seq, b.ops)
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
