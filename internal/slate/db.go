// Package slate is moraine's ordered key-value store on object storage, in
// the style of SlateDB: one fenced writer, a write-ahead log of immutable
// objects written with create-if-absent, an in-memory memtable flushed to
// sorted tables, a manifest advanced by create-if-absent, size-tiered
// compaction and garbage collection, all inside the writer process.
// Readers in other processes follow the writer by polling.
//
// # Commit protocol
//
// All writes go through one commit loop (DB.commitLoop). Invariants:
//
//  1. One sequence number per batch; sequence order equals WAL order.
//  2. A batch is stored whole in exactly one WAL object; batches that arrive
//     while a WAL PUT is in flight share the next WAL object (group commit).
//  3. A batch is acknowledged only after its WAL object is durable; it is
//     applied to the memtable (and so becomes visible) at the same moment.
//     Visibility equals durability: no read ever sees a batch a crash could
//     undo.
//  4. WAL ids are assigned in order and each object is created with
//     create-if-absent. Up to Options.WALInFlight PUTs run at once; a group
//     is acknowledged only once every WAL object up to its own has landed.
//     A failed WAL PUT fails that group and every later one, landed or
//     not, and every queued write, and the DB refuses further writes (the
//     outcome is unknown; reopening resolves it). Each object records the
//     oldest id still in flight when its PUT started (walHeader.base), so
//     that a reopening writer can tell an id a failed writer gave up on
//     from one the store lost.
//  5. A writer that opens bumps the writer epoch in a new manifest, then
//     creates fence objects carrying that epoch in every WAL id a previous
//     writer may have left or still hold in flight (writeFence). An older
//     writer's next WAL PUT therefore collides (ErrFenced), and its next
//     manifest create either collides or reveals the higher epoch
//     (ErrFenced); any PUT of it that lands after one of the fences is
//     void, and replay skips it.
//  6. A memtable is frozen with the WAL id of the last batch applied to it;
//     once flushed, that id becomes the manifest's replay_after_wal_id, so
//     recovery replays exactly the WAL objects not yet in sorted tables.
//  7. The manifest create-if-absent is the commit point of every flush and
//     compaction; GC never deletes fences, the current manifest, or
//     anything a manifest younger than the grace period references.
//
// Rejected designs: serving reads ahead of durability (SlateDB's default)
// would let a catalog reader see a commit that a crash then loses (commit
// pipelining happens above slate, through Submit, where the catalog knows
// which transactions may build on a batch not yet durable); retrying
// WAL PUTs inside the DB would hide an ambiguous outcome from the caller.
package slate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// DB is an open store, either the writer (Open) or a follower (OpenReader).
// It is safe for concurrent use.
type DB struct {
	store    objstore.Store
	opts     Options
	readOnly bool
	epoch    uint64 // writer epoch owned by this writer
	tables   *tableCache
	stats    stats

	// mu guards the fields below it.
	mu         sync.Mutex
	commitCond *sync.Cond // signals queue changes and freed immutable slots
	mem        *memtable
	imm        []*memtable // frozen, oldest first
	man        *manifest
	visibleSeq uint64 // highest durable (and so visible) seq
	appliedWAL uint64 // highest WAL id applied to the memtables
	walsInMem  int    // WAL objects applied to the active memtable
	snaps      map[uint64]int
	failErr    error
	// flushFailing: the last flush of frozen memtables failed (it is being
	// retried). Backpressure then lets writes through to the WAL, where a
	// broken store fails them instead of holding them forever.
	flushFailing bool
	closing      bool
	closed       bool
	queue        []*pendingWrite
	nextWAL      uint64 // reader: next WAL id to replay
	// walEpoch is the highest writer epoch of the WAL objects replayed so
	// far; a later object of an older epoch is void (replay).
	walEpoch uint64

	// inflight are the WAL objects being written, in WAL order; walErr is
	// the first WAL PUT failure (then every later object fails too).
	inflight []*walPut
	walErr   error

	// Owned by the commit loop.
	nextWALID uint64
	lastSeq   uint64

	bgMu       sync.Mutex // serializes flushes, compactions, GC and refreshes
	wakeBG     chan struct{}
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	commitDone chan struct{}
	lastGC     time.Time
}

type pendingWrite struct {
	ops   []op
	bytes int
	seq   uint64
	done  chan error
	// hold is when the commit loop stops holding this batch for a
	// follower (Batch.Coalesce); zero: do not hold it.
	hold time.Time
}

// Write applies b atomically and returns its sequence number once it is
// durable. If ctx ends first, Write returns the context's error and the
// batch's outcome is unknown: it may still become durable.
func (d *DB) Write(ctx context.Context, b *Batch) (uint64, error) {
	w, err := d.Submit(ctx, b)
	if err != nil {
		return 0, err
	}
	return w.Wait(ctx)
}

// Pending is a batch handed to the commit loop by Submit.
type Pending struct {
	p *pendingWrite
}

// Submit hands b to the commit loop and returns without waiting for it to
// be durable. Batches are written, and their outcomes decided, in the order
// of their Submit calls: if one fails, every batch submitted after it fails
// too (invariant 4). That lets a caller order its own later work after b
// before b is durable (commit pipelining) as long as it acknowledges that
// work only after b's Wait succeeds.
func (d *DB) Submit(ctx context.Context, b *Batch) (*Pending, error) {
	if d.readOnly {
		return nil, ErrReadOnly
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &pendingWrite{ops: b.ops, bytes: b.bytes, done: make(chan error, 1)}
	if b.coalesce > 0 {
		p.hold = time.Now().Add(b.coalesce)
	}
	d.mu.Lock()
	switch {
	case d.failErr != nil:
		err := d.failErr
		d.mu.Unlock()
		return nil, err
	case d.closing:
		d.mu.Unlock()
		return nil, ErrClosed
	}
	d.queue = append(d.queue, p)
	d.commitCond.Signal()
	d.mu.Unlock()
	return &Pending{p: p}, nil
}

// Wait returns the batch's sequence number once it is durable, or why it
// failed. If ctx ends first it returns the context's error and the outcome
// is unknown; Wait may be called again.
func (w *Pending) Wait(ctx context.Context) (uint64, error) {
	select {
	case err := <-w.p.done:
		w.p.done <- err // keep the outcome for a later Wait
		if err != nil {
			return 0, err
		}
		return w.p.seq, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("slate: write outcome unknown: %w", ctx.Err())
	}
}

// failLocked puts the DB in the failed state. REQUIRES: d.mu held.
func (d *DB) failLocked(err error) {
	if d.failErr == nil {
		if errors.Is(err, ErrFenced) {
			d.failErr = err
		} else {
			d.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
		}
	}
	d.commitCond.Broadcast()
}

// walPut is a WAL object whose PUT the commit loop has started.
type walPut struct {
	id      uint64
	group   []*pendingWrite
	batches []walBatch
	size    int
	// Set under d.mu when the PUT returns.
	done    bool
	err     error
	putTime time.Duration
}

// commitLoop is the single goroutine that assigns sequence numbers and
// writes WAL objects; see the package comment for its invariants. With
// Options.WALInFlight above one, each PUT runs on a goroutine of its own
// and up to that many are in flight; finishPutsLocked acknowledges them in
// WAL order whichever lands first.
func (d *DB) commitLoop() {
	defer close(d.commitDone)
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		d.finishPutsLocked()
		if len(d.queue) == 0 || len(d.inflight) >= d.opts.WALInFlight {
			if d.closing && len(d.queue) == 0 && len(d.inflight) == 0 {
				return
			}
			d.commitCond.Wait()
			continue
		}
		// Backpressure: hold writes while too many memtables await flush —
		// unless flushing is failing: then the writes go on to the WAL and
		// learn there whether the store still works (a crashed one fails
		// them; holding them would hang every writer).
		if len(d.imm) >= d.opts.MaxImmutables && !d.flushFailing && d.failErr == nil && d.ctx.Err() == nil {
			d.commitCond.Wait()
			continue
		}
		if d.failErr == nil && d.ctx.Err() != nil {
			d.failLocked(ErrClosed)
		}
		if d.failErr != nil {
			for _, p := range d.queue {
				p.done <- d.failErr
			}
			d.queue = nil
			continue
		}
		if d.holdForFollower() {
			continue // re-check the queue: a failure or Close may have come
		}
		// INVARIANT: the group is a prefix of the queue, so acks stay in
		// arrival order.
		n, size := 0, 0
		for n < len(d.queue) && (n == 0 || size+d.queue[n].bytes <= d.opts.MaxWALBytes) {
			size += d.queue[n].bytes
			n++
		}
		group := d.queue[:n:n]
		d.queue = d.queue[n:]
		batches := make([]walBatch, n)
		for i, p := range group {
			d.lastSeq++
			p.seq = d.lastSeq
			batches[i] = walBatch{seq: p.seq, ops: p.ops}
		}
		w := &walPut{id: d.nextWALID, group: group, batches: batches}
		d.nextWALID++
		h := walHeader{epoch: d.epoch, base: w.id}
		if len(d.inflight) > 0 {
			h.base = d.inflight[0].id
		}
		d.inflight = append(d.inflight, w)
		d.mu.Unlock()

		data := encodeWAL(w.id, h, batches)
		// put writes the object and records the outcome; it returns with
		// d.mu held.
		put := func() {
			t0 := time.Now()
			err := d.store.PutIfAbsent(d.ctx, walName(w.id), data)
			d.mu.Lock()
			w.done, w.err, w.putTime, w.size = true, err, time.Since(t0), len(data)
			d.commitCond.Broadcast()
		}
		if d.opts.WALInFlight > 1 {
			go func() {
				put()
				d.mu.Unlock()
			}()
			d.mu.Lock()
			continue
		}
		put()
		d.finishPutsLocked()
		// Linger: concurrent writers just acknowledged usually come
		// straight back. Without a pause the first of them leaves alone in
		// the next WAL object and the rest wait behind it for a whole PUT,
		// so every writer waits two PUTs; pausing for a small fraction of
		// one PUT (until they are all back) keeps them in one group. (With
		// several PUTs in flight the first of them does not wait.)
		if linger := min(w.putTime/16, 2*time.Millisecond); w.err == nil && n > 1 && linger > 50*time.Microsecond {
			deadline := time.Now().Add(linger)
			for len(d.queue) < n && time.Now().Before(deadline) && !d.closing {
				d.mu.Unlock()
				time.Sleep(linger / 8)
				d.mu.Lock()
			}
		}
	}
}

// finishPutsLocked acknowledges the WAL objects at the head of the
// in-flight list whose PUTs have returned, in WAL order: a landed object's
// batches become visible and its writers are told, and once one PUT has
// failed, it and every later object fail, landed or not (invariant 4):
// a batch is acknowledged only when every WAL object up to its own landed.
// REQUIRES: d.mu held.
func (d *DB) finishPutsLocked() {
	for len(d.inflight) > 0 && d.inflight[0].done {
		w := d.inflight[0]
		d.inflight[0] = nil
		d.inflight = d.inflight[1:]
		if w.err != nil && d.walErr == nil {
			if errors.Is(w.err, objstore.ErrExists) {
				d.walErr = fmt.Errorf("%s already exists: %w", walName(w.id), ErrFenced)
			} else {
				d.walErr = fmt.Errorf("write %s: %w", walName(w.id), w.err)
			}
			d.failLocked(d.walErr)
		}
		if d.walErr != nil {
			for _, p := range w.group {
				p.done <- d.failErr
			}
			continue
		}
		for _, b := range w.batches {
			d.mem.applyBatch(b.seq, b.ops)
		}
		d.appliedWAL = w.id
		d.visibleSeq = w.batches[len(w.batches)-1].seq
		d.walsInMem++
		d.stats.walObjects.Add(1)
		d.stats.walBytes.Add(uint64(w.size))
		d.stats.batches.Add(uint64(len(w.batches)))
		if d.mem.bytes >= d.opts.MemtableBytes || d.walsInMem >= d.opts.MaxWALsPerMemtable {
			d.freezeLocked()
		}
		for _, p := range w.group {
			p.done <- nil
		}
	}
}

// holdForFollower waits while every queued batch asked to be held for a
// follower (Batch.Coalesce), none of their holds has run out, and the queue
// is short of a full WAL object: a batch is held at most its own Coalesce
// duration, however many followers ask for more, and a batch that did not
// ask is never held. It reports whether it waited. REQUIRES: d.mu held; the
// queue is not empty.
func (d *DB) holdForFollower() bool {
	waited := false
	for !d.closing && d.failErr == nil && d.ctx.Err() == nil {
		var until time.Time
		size := 0
		for _, p := range d.queue {
			if p.hold.IsZero() {
				return waited
			}
			if until.IsZero() || p.hold.Before(until) {
				until = p.hold
			}
			size += p.bytes
		}
		left := time.Until(until)
		if left <= 0 || size >= d.opts.MaxWALBytes {
			return waited
		}
		n := len(d.queue)
		t := time.AfterFunc(left, func() {
			d.mu.Lock()
			d.commitCond.Broadcast()
			d.mu.Unlock()
		})
		// A PUT that returns ends the hold too: its writers are waiting.
		for len(d.queue) == n && time.Now().Before(until) && !d.closing && d.failErr == nil && !d.putReturnedLocked() {
			d.commitCond.Wait()
		}
		t.Stop()
		if d.putReturnedLocked() {
			return true
		}
		waited = true
	}
	return waited
}

// putReturnedLocked reports whether the oldest WAL PUT in flight has
// returned (finishPutsLocked has work). REQUIRES: d.mu held.
func (d *DB) putReturnedLocked() bool { return len(d.inflight) > 0 && d.inflight[0].done }

// freezeLocked turns the active memtable into an immutable one stamped with
// the last applied WAL id. REQUIRES: d.mu held.
func (d *DB) freezeLocked() {
	if d.mem.empty() {
		return
	}
	d.mem.lastWAL = d.appliedWAL
	d.imm = append(d.imm, d.mem)
	d.mem = newMemtable()
	d.walsInMem = 0
	d.kickBG()
}

func (d *DB) kickBG() {
	select {
	case d.wakeBG <- struct{}{}:
	default:
	}
}

// bgLoop flushes frozen memtables, compacts and collects garbage. Failures
// other than fencing are retried with backoff; they never lose data because
// the WAL holds everything not yet in a published manifest.
func (d *DB) bgLoop() {
	defer d.wg.Done()
	var tick <-chan time.Time
	if d.opts.GCInterval > 0 {
		t := time.NewTicker(min(d.opts.GCInterval, 10*time.Second))
		defer t.Stop()
		tick = t.C
	}
	var fenceTick <-chan time.Time
	if d.opts.FencePollInterval > 0 {
		t := time.NewTicker(d.opts.FencePollInterval)
		defer t.Stop()
		fenceTick = t.C
	}
	backoff := 100 * time.Millisecond
	var retry <-chan time.Time
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-fenceTick:
			if err := d.checkFenced(d.ctx); err != nil {
				if errors.Is(err, ErrFenced) {
					return
				}
				d.opts.Logf("slate: fence check: %v", err)
			}
			continue
		case <-d.wakeBG:
		case <-tick:
		case <-retry:
		}
		retry = nil
		err := d.flushImmutables(d.ctx)
		d.mu.Lock()
		d.flushFailing = err != nil && d.ctx.Err() == nil
		d.commitCond.Broadcast()
		d.mu.Unlock()
		if err == nil && !d.opts.DisableAutoCompaction {
			err = d.compactAll(d.ctx)
		}
		if err == nil && d.opts.GCInterval > 0 && d.opts.Now().Sub(d.lastGC) >= d.opts.GCInterval {
			_, err = d.GC(d.ctx)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if d.ctx.Err() != nil {
			return // closing
		}
		if errors.Is(err, ErrFenced) {
			d.mu.Lock()
			d.failLocked(err)
			d.mu.Unlock()
			return
		}
		d.opts.Logf("slate: background work failed (retrying in %v): %v", backoff, err)
		retry = time.After(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}

// checkFenced looks for a manifest newer than ours written by another
// writer and, if there is one, puts the DB in the fenced state.
func (d *DB) checkFenced(ctx context.Context) error {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	d.mu.Lock()
	cur := d.man
	d.mu.Unlock()
	latest, err := probeNewerManifest(ctx, d.store, cur)
	if err != nil {
		return err
	}
	if latest.writerEpoch == d.epoch {
		return nil
	}
	fenced := fmt.Errorf("manifest %d has writer epoch %d, ours is %d: %w", latest.id, latest.writerEpoch, d.epoch, ErrFenced)
	d.mu.Lock()
	d.failLocked(fenced)
	d.mu.Unlock()
	return fenced
}

// Err returns nil while the DB accepts writes, and otherwise why it does
// not: ErrFenced, ErrFailed (wrapping the cause) or ErrClosed.
func (d *DB) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.failErr != nil:
		return d.failErr
	case d.closing:
		return ErrClosed
	}
	return nil
}

// Flush freezes the active memtable and waits until every frozen memtable
// is in a sorted table referenced by a published manifest.
func (d *DB) Flush(ctx context.Context) error {
	if d.readOnly {
		return ErrReadOnly
	}
	d.mu.Lock()
	if d.failErr != nil {
		err := d.failErr
		d.mu.Unlock()
		return err
	}
	d.freezeLocked()
	d.mu.Unlock()
	return d.flushImmutables(ctx)
}

// flushImmutables writes frozen memtables to L0, oldest first, publishing a
// manifest for each.
func (d *DB) flushImmutables(ctx context.Context) error {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	for {
		d.mu.Lock()
		if len(d.imm) == 0 {
			d.mu.Unlock()
			return nil
		}
		m, base, lastSeen := d.imm[0], d.man, d.appliedWAL
		d.mu.Unlock()
		if m.maxSeq <= base.lastL0Seq {
			// Already published by an earlier attempt whose outcome we
			// learned only on a manifest conflict.
			d.popImmutable(base)
			continue
		}
		b := newSSTBuilder(d.opts.BlockSize)
		b.reserve(m.bytes)
		m.tree.Scan(func(e entry) bool { b.add(e); return true })
		data, info := b.finish()
		info.id = newULID(d.opts.Now())
		if err := d.store.Put(ctx, sstName(info.id), data); err != nil {
			return fmt.Errorf("flush: write %s: %w", sstName(info.id), err)
		}
		next := base.clone()
		next.id++
		next.l0 = append([]*sstInfo{&info}, base.l0...)
		next.replayAfterWAL = max(base.replayAfterWAL, m.lastWAL)
		next.walIDLastSeen = max(base.walIDLastSeen, lastSeen)
		next.lastL0Seq = m.maxSeq
		if err := d.commitManifest(ctx, next); err != nil {
			if errors.Is(err, errRetry) {
				continue
			}
			return fmt.Errorf("flush: %w", err)
		}
		d.popImmutable(next)
		d.stats.flushes.Add(1)
		d.stats.flushBytes.Add(info.size)
	}
}

func (d *DB) popImmutable(man *manifest) {
	d.mu.Lock()
	d.man = man
	d.imm = d.imm[1:]
	d.commitCond.Broadcast()
	d.mu.Unlock()
}

// commitManifest creates next (whose id is the current id + 1). On a
// conflict it reloads: a higher epoch means this writer is fenced; our own
// epoch means an earlier ambiguous attempt landed, so the newer manifest is
// adopted and errRetry returned. REQUIRES: d.bgMu held.
func (d *DB) commitManifest(ctx context.Context, next *manifest) error {
	next.writerEpoch = d.epoch
	err := putManifest(ctx, d.store, next)
	if err == nil {
		d.stats.manifestWrites.Add(1)
		return nil
	}
	if !errors.Is(err, errManifestConflict) {
		return err
	}
	latest, lerr := loadLatestManifest(ctx, d.store)
	if lerr != nil {
		return fmt.Errorf("%w (reloading after conflict: %v)", err, lerr)
	}
	if latest == nil || latest.writerEpoch != d.epoch {
		fenced := fmt.Errorf("manifest epoch moved past %d: %w", d.epoch, ErrFenced)
		d.mu.Lock()
		d.failLocked(fenced)
		d.mu.Unlock()
		return fenced
	}
	d.mu.Lock()
	if latest.id > d.man.id {
		d.man = latest
	}
	d.mu.Unlock()
	return errRetry
}

// Get returns the newest durable value of key.
func (d *DB) Get(ctx context.Context, key []byte) ([]byte, error) {
	return d.get(ctx, key, ^uint64(0), nil)
}

// readState is a consistent view of the tree: memtables and manifest taken
// together under d.mu.
type readState struct {
	mem  *memtable // an immutable copy
	imm  []*memtable
	man  *manifest
	seq  uint64
	done func()
}

// state captures the current read state. The active memtable is copied
// (copy-on-write, O(1)) so the view stays fixed while writes continue.
func (d *DB) state() (*readState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateLocked()
}

// stateLocked is state with d.mu held.
func (d *DB) stateLocked() (*readState, error) {
	if d.closed {
		return nil, ErrClosed
	}
	return &readState{
		mem: &memtable{tree: d.mem.tree.Copy()},
		imm: slices.Clone(d.imm),
		man: d.man,
		seq: d.visibleSeq,
	}, nil
}

func (d *DB) get(ctx context.Context, key []byte, seq uint64, st *readState) ([]byte, error) {
	if len(key) == 0 {
		return nil, errEmptyKey
	}
	var man *manifest
	found := func(e entry) ([]byte, error) {
		if e.kind == kindDelete {
			return nil, ErrNotFound
		}
		return clone(e.value), nil
	}
	if st != nil {
		seq = min(seq, st.seq)
		if e, ok := st.mem.get(key, seq); ok {
			return found(e)
		}
		for i := len(st.imm) - 1; i >= 0; i-- {
			if e, ok := st.imm[i].get(key, seq); ok {
				return found(e)
			}
		}
		man = st.man
	} else {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, ErrClosed
		}
		seq = min(seq, d.visibleSeq)
		if e, ok := d.mem.get(key, seq); ok {
			d.mu.Unlock()
			return found(e)
		}
		for i := len(d.imm) - 1; i >= 0; i-- {
			if e, ok := d.imm[i].get(key, seq); ok {
				d.mu.Unlock()
				return found(e)
			}
		}
		man = d.man
		d.mu.Unlock()
	}
	try := func(info *sstInfo) (entry, bool, error) {
		if bytes.Compare(key, info.firstKey) < 0 || bytes.Compare(key, info.lastKey) > 0 || info.minSeq > seq {
			return entry{}, false, nil
		}
		t, err := d.tables.get(ctx, info)
		if err != nil {
			return entry{}, false, err
		}
		if !bloomMayContain(t.filter, key) {
			return entry{}, false, nil
		}
		it := newSSTIter(ctx, d.tables, info, false)
		if err := it.seek(key); err != nil {
			return entry{}, false, err
		}
		for it.ok() && bytes.Equal(it.cur().key, key) {
			if e := it.cur(); e.seq <= seq {
				return e, true, nil
			}
			if err := it.next(); err != nil {
				return entry{}, false, err
			}
		}
		return entry{}, false, nil
	}
	for _, info := range man.l0 {
		if e, ok, err := try(info); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return found(e)
		}
	}
	for _, run := range man.runs {
		i, _ := slices.BinarySearchFunc(run.tables, key, func(t *sstInfo, k []byte) int { return bytes.Compare(t.lastKey, k) })
		if i == len(run.tables) {
			continue
		}
		if e, ok, err := try(run.tables[i]); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return found(e)
		}
	}
	return nil, ErrNotFound
}

// Scan iterates the live keys in [start, end) in ascending order as of now.
// A nil start means the first key, a nil end means no upper bound.
func (d *DB) Scan(ctx context.Context, start, end []byte) *Iterator {
	st, err := d.state()
	if err != nil {
		return errIterator(err)
	}
	return d.scan(ctx, st, st.seq, start, end)
}

// ScanPrefix iterates the live keys beginning with prefix.
func (d *DB) ScanPrefix(ctx context.Context, prefix []byte) *Iterator {
	return d.Scan(ctx, prefix, prefixEnd(prefix))
}

func (d *DB) scan(ctx context.Context, st *readState, seq uint64, start, end []byte) *Iterator {
	srcs := []internalIter{newMemIter(st.mem.tree)}
	for i := len(st.imm) - 1; i >= 0; i-- {
		srcs = append(srcs, newMemIter(st.imm[i].tree))
	}
	overlaps := func(info *sstInfo) bool {
		return (end == nil || bytes.Compare(info.firstKey, end) < 0) && (start == nil || bytes.Compare(info.lastKey, start) >= 0)
	}
	for _, info := range st.man.l0 {
		if overlaps(info) {
			srcs = append(srcs, newSSTIter(ctx, d.tables, info, true))
		}
	}
	for _, run := range st.man.runs {
		srcs = append(srcs, &runIter{ctx: ctx, c: d.tables, tables: run.tables, scan: true})
	}
	return newIterator(newMergeIter(srcs), min(seq, st.seq), start, end, st.done)
}

// Snapshot is a consistent read-only view fixed at one sequence number.
type Snapshot struct {
	d    *DB
	st   *readState
	once sync.Once
}

// Snapshot returns a view of the DB as of now. Close it when done: while it
// is open the writer's compactions keep the versions it can see.
func (d *DB) Snapshot() (*Snapshot, error) {
	// Capture and register under one lock hold, so no compaction can pick
	// a retention horizon above the snapshot's seq in between.
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.stateLocked()
	if err != nil {
		return nil, err
	}
	d.snaps[st.seq]++
	return &Snapshot{d: d, st: st}, nil
}

// Seq is the sequence number the snapshot reads at.
func (s *Snapshot) Seq() uint64 { return s.st.seq }

// Get reads key as of the snapshot.
func (s *Snapshot) Get(ctx context.Context, key []byte) ([]byte, error) {
	return s.d.get(ctx, key, s.st.seq, s.current())
}

// Scan iterates [start, end) as of the snapshot.
func (s *Snapshot) Scan(ctx context.Context, start, end []byte) *Iterator {
	return s.d.scan(ctx, s.current(), s.st.seq, start, end)
}

// ScanPrefix iterates the keys beginning with prefix as of the snapshot.
func (s *Snapshot) ScanPrefix(ctx context.Context, prefix []byte) *Iterator {
	return s.Scan(ctx, prefix, prefixEnd(prefix))
}

// current returns the state to read through. On the writer the snapshot
// reads the newest tree filtered by its seq (compaction keeps the versions
// registered snapshots need, and the newest tree is safe from GC); a
// reader's snapshot reads the tree it captured.
func (s *Snapshot) current() *readState {
	if s.d.readOnly {
		return s.st
	}
	st, err := s.d.state()
	if err != nil {
		return s.st
	}
	st.seq = s.st.seq
	return st
}

// Close releases the snapshot.
func (s *Snapshot) Close() {
	s.once.Do(func() {
		s.d.mu.Lock()
		if s.d.snaps[s.st.seq]--; s.d.snaps[s.st.seq] <= 0 {
			delete(s.d.snaps, s.st.seq)
		}
		s.d.mu.Unlock()
	})
}

// retentionHorizonLocked is the seq at or below which only the newest
// version of a key must be kept. REQUIRES: d.mu held.
func (d *DB) retentionHorizonLocked() uint64 {
	h := d.visibleSeq
	for s := range d.snaps {
		h = min(h, s)
	}
	return h
}

// Close flushes pending writes and the memtable, then stops the DB. If ctx
// ends first the DB is stopped without flushing; everything acknowledged is
// still durable in the WAL.
func (d *DB) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return ErrClosed
	}
	d.closing = true
	d.commitCond.Broadcast()
	d.mu.Unlock()

	var err error
	if !d.readOnly {
		select {
		case <-d.commitDone:
		case <-ctx.Done():
			err = ctx.Err()
			d.cancel()
			d.mu.Lock()
			d.commitCond.Broadcast()
			d.mu.Unlock()
			<-d.commitDone
		}
		d.mu.Lock()
		failed := d.failErr
		d.mu.Unlock()
		if err == nil && failed == nil {
			err = d.Flush(ctx)
		}
	}
	d.cancel()
	d.mu.Lock()
	d.commitCond.Broadcast()
	d.mu.Unlock()
	d.wg.Wait()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return err
}
