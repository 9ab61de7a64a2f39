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
	"context"
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
	// committed records a reader's replayed batches (committed.go).
	committed committedLog

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
	// lastRewrite is when Rewrite last finished (open time before); mu.
	lastRewrite time.Time
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
