package slate

import (
	"context"
	"fmt"
	"slices"
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

// SnapshotAt returns a view of the DB as of seq, which must not be above
// the newest visible seq. What it reads is complete only where the store
// kept every version seq can see: at a pinned seq (Options.PinPrefix), or
// at or above the oldest open snapshot. Close it when done.
func (d *DB) SnapshotAt(seq uint64) (*Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.stateLocked()
	if err != nil {
		return nil, err
	}
	if seq > st.seq {
		return nil, fmt.Errorf("slate: snapshot at seq %d above the visible seq %d", seq, st.seq)
	}
	st.seq = seq
	d.snaps[seq]++
	return &Snapshot{d: d, st: st}, nil
}

// At returns a view of the same DB as of seq, at or below the snapshot's
// own (SnapshotAt: complete at a pinned seq). Close it when done.
func (s *Snapshot) At(seq uint64) (*Snapshot, error) {
	if seq > s.st.seq {
		return nil, fmt.Errorf("slate: snapshot at seq %d above the snapshot's %d", seq, s.st.seq)
	}
	return s.d.SnapshotAt(seq)
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

// pinnedSeqs returns the seqs the live keys under Options.PinPrefix pin, as
// of st, descending and without duplicates.
func (d *DB) pinnedSeqs(ctx context.Context, st *readState) ([]uint64, error) {
	if len(d.opts.PinPrefix) == 0 {
		return nil, nil
	}
	it := d.scan(ctx, st, st.seq, d.opts.PinPrefix, prefixEnd(d.opts.PinPrefix))
	var pins []uint64
	for it.Next() {
		pins = append(pins, it.Seq())
		if d.opts.PinValue != nil {
			if seq, ok := d.opts.PinValue(it.Value()); ok {
				pins = append(pins, seq)
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read pins: %w", err)
	}
	slices.Sort(pins)
	slices.Reverse(pins)
	return slices.Compact(pins), nil
}

// retention is what a compaction keeps of each key's versions: every
// version above horizon, and the newest version at or below each point
// (horizon first, then the pins below it, descending).
type retention struct {
	horizon uint64
	points  []uint64
}

func newRetention(horizon uint64, pins []uint64) retention {
	r := retention{horizon: horizon, points: []uint64{horizon}}
	for _, p := range pins {
		if p < horizon {
			r.points = append(r.points, p)
		}
	}
	return r
}
