package slate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

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
