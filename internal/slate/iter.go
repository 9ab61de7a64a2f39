package slate

import (
	"bytes"
	"container/heap"
)

// internalIter yields entries (all versions, tombstones included) in
// entryLess order.
type internalIter interface {
	// seek positions at the first entry whose key is >= key (nil: first).
	seek(key []byte) error
	next() error
	ok() bool
	cur() entry
	close() error
}

// mergeIter merges sources in entryLess order. Sources are given newest
// first; on a tie (same key and seq, which only happens for duplicated
// copies of the same entry) the newer source comes first.
type mergeIter struct {
	srcs []internalIter
	h    mergeHeap
}

type mergeHeap struct {
	items []heapItem
}

type heapItem struct {
	it  internalIter
	pri int
}

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool {
	a, b := h.items[i].it.cur(), h.items[j].it.cur()
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	if a.seq != b.seq {
		return a.seq > b.seq
	}
	return h.items[i].pri < h.items[j].pri
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(heapItem)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

func newMergeIter(srcs []internalIter) *mergeIter { return &mergeIter{srcs: srcs} }

func (m *mergeIter) seek(key []byte) error {
	m.h.items = m.h.items[:0]
	for i, s := range m.srcs {
		if err := s.seek(key); err != nil {
			return err
		}
		if s.ok() {
			m.h.items = append(m.h.items, heapItem{it: s, pri: i})
		}
	}
	heap.Init(&m.h)
	return nil
}

func (m *mergeIter) next() error {
	top := m.h.items[0].it
	if err := top.next(); err != nil {
		return err
	}
	if top.ok() {
		if len(m.h.items) > 1 {
			heap.Fix(&m.h, 0)
		}
	} else {
		heap.Pop(&m.h)
	}
	return nil
}

func (m *mergeIter) ok() bool   { return len(m.h.items) > 0 }
func (m *mergeIter) cur() entry { return m.h.items[0].it.cur() }
func (m *mergeIter) close() error {
	var first error
	for _, s := range m.srcs {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Iterator walks the live keys of a range in ascending byte order, as of
// the sequence number fixed when it was created. Keys and values returned
// are valid until the next call to Next.
//
//	it := db.Scan(ctx, start, end)
//	defer it.Close()
//	for it.Next() { use(it.Key(), it.Value()) }
//	if err := it.Err(); err != nil { ... }
type Iterator struct {
	src     *mergeIter
	seq     uint64
	start   []byte
	end     []byte
	started bool
	lastKey []byte
	haveKey bool
	key     []byte
	value   []byte
	err     error
	release func()
}

func newIterator(src *mergeIter, seq uint64, start, end []byte, release func()) *Iterator {
	return &Iterator{src: src, seq: seq, start: start, end: end, release: release}
}

func errIterator(err error) *Iterator { return &Iterator{err: err, started: true} }

// Next advances to the next live key and reports whether there is one.
func (it *Iterator) Next() bool {
	if it.err != nil || it.src == nil {
		return false
	}
	if !it.started {
		it.started = true
		if it.err = it.src.seek(it.start); it.err != nil {
			return false
		}
	} else if it.src.ok() {
		if it.err = it.src.next(); it.err != nil {
			return false
		}
	}
	for it.src.ok() {
		e := it.src.cur()
		if it.end != nil && bytes.Compare(e.key, it.end) >= 0 {
			break
		}
		if e.seq <= it.seq && !(it.haveKey && bytes.Equal(e.key, it.lastKey)) {
			// A copy: scan blocks are recycled once consumed.
			it.lastKey = append(it.lastKey[:0], e.key...)
			it.haveKey = true
			if e.kind == kindPut {
				it.key, it.value = e.key, e.value
				return true
			}
		}
		if it.err = it.src.next(); it.err != nil {
			return false
		}
	}
	it.key, it.value = nil, nil
	it.src.h.items = nil
	return false
}

// Key returns the current key.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value.
func (it *Iterator) Value() []byte { return it.value }

// Err returns the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close releases the iterator.
func (it *Iterator) Close() error {
	if it.src != nil {
		if err := it.src.close(); err != nil && it.err == nil {
			it.err = err
		}
		it.src = nil
	}
	if it.release != nil {
		it.release()
		it.release = nil
	}
	return it.err
}

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil if there is none (prefix is all 0xff or empty).
func prefixEnd(prefix []byte) []byte {
	end := clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
