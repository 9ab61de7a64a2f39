package slate

import (
	"context"
	"sync"
)

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
