package slate

import (
	"bytes"
	"context"
	"slices"
)

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
