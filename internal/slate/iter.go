package slate

import (
	"bytes"
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

// mergeHeap is a binary min-heap of the sources not yet exhausted, by
// their current entry. Each item keeps its source's current entry, so
// that the comparisons of a sift (every key a scan returns costs one)
// read fields instead of calling into the sources.
type mergeHeap struct {
	items []heapItem
}

type heapItem struct {
	it  internalIter
	cur entry // it.cur(), refreshed whenever it moves
	pri int
}

// less orders by key, then newer seq first, then newer source first.
func (a *heapItem) less(b *heapItem) bool {
	if c := bytes.Compare(a.cur.key, b.cur.key); c != 0 {
		return c < 0
	}
	if a.cur.seq != b.cur.seq {
		return a.cur.seq > b.cur.seq
	}
	return a.pri < b.pri
}

// down restores the heap order below position i.
func (h *mergeHeap) down(i int) {
	items := h.items
	n := len(items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && items[r].less(&items[l]) {
			j = r
		}
		if !items[j].less(&items[i]) {
			return
		}
		items[i], items[j] = items[j], items[i]
		i = j
	}
}

func (h *mergeHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func newMergeIter(srcs []internalIter) *mergeIter { return &mergeIter{srcs: srcs} }

func (m *mergeIter) seek(key []byte) error {
	m.h.items = m.h.items[:0]
	for i, s := range m.srcs {
		if err := s.seek(key); err != nil {
			return err
		}
		if s.ok() {
			m.h.items = append(m.h.items, heapItem{it: s, cur: s.cur(), pri: i})
		}
	}
	m.h.init()
	return nil
}

func (m *mergeIter) next() error {
	top := &m.h.items[0]
	if err := top.it.next(); err != nil {
		return err
	}
	if top.it.ok() {
		top.cur = top.it.cur()
	} else {
		last := len(m.h.items) - 1
		m.h.items[0] = m.h.items[last]
		m.h.items[last] = heapItem{}
		m.h.items = m.h.items[:last]
	}
	m.h.down(0)
	return nil
}

func (m *mergeIter) ok() bool   { return len(m.h.items) > 0 }
func (m *mergeIter) cur() entry { return m.h.items[0].cur }
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
	keySeq  uint64
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
				it.key, it.value, it.keySeq = e.key, e.value, e.seq
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

// Seq returns the seq of the batch that wrote the current key's version.
func (it *Iterator) Seq() uint64 { return it.keySeq }

// ReadSeq returns the seq the iterator reads the store at.
func (it *Iterator) ReadSeq() uint64 { return it.seq }

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
