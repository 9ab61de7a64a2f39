package slate

import (
	"bytes"

	"github.com/tidwall/btree"
)

// entry is one version of one key. Entries order by key ascending, then seq
// descending, so the newest version of a key comes first.
type entry struct {
	key   []byte
	value []byte
	seq   uint64
	kind  kind
}

func entryLess(a, b entry) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.seq > b.seq
}

// memtable is an ordered in-memory set of entries.
//
// Concurrency: the active memtable is mutated only by the commit loop while
// holding DB.mu; readers either look up under DB.mu or iterate over a
// copy-on-write Copy taken under DB.mu. A frozen memtable is never mutated.
type memtable struct {
	tree   *btree.BTreeG[entry]
	bytes  int    // approximate encoded size
	maxSeq uint64 // highest seq applied
	// lastWAL is the highest WAL id whose every batch has been applied to
	// this memtable or an older one. Set when the memtable is frozen and
	// used as the manifest's replay_after_wal_id once it is flushed.
	lastWAL uint64
}

func newMemtable() *memtable {
	return &memtable{tree: btree.NewBTreeGOptions(entryLess, btree.Options{NoLocks: true, Degree: 64})}
}

// applyBatch inserts every operation of a batch under seq. Later operations
// on the same key replace earlier ones (same key and seq compare equal).
func (m *memtable) applyBatch(seq uint64, ops []op) {
	for _, o := range ops {
		m.tree.Set(entry{key: o.key, value: o.value, seq: seq, kind: o.kind})
		m.bytes += len(o.key) + len(o.value) + 16
	}
	if seq > m.maxSeq {
		m.maxSeq = seq
	}
}

// get returns the newest version of key with seq <= maxSeq.
func (m *memtable) get(key []byte, maxSeq uint64) (entry, bool) {
	var found entry
	ok := false
	m.tree.Ascend(entry{key: key, seq: maxSeq}, func(e entry) bool {
		if bytes.Equal(e.key, key) {
			found, ok = e, true
		}
		return false
	})
	return found, ok
}

func (m *memtable) empty() bool { return m.tree.Len() == 0 }

// memIter iterates a memtable that nobody mutates (a frozen one or a Copy).
type memIter struct {
	it    btree.IterG[entry]
	valid bool
}

func newMemIter(t *btree.BTreeG[entry]) *memIter { return &memIter{it: t.Iter()} }

func (m *memIter) seek(key []byte) error {
	m.valid = m.it.Seek(entry{key: key, seq: ^uint64(0)})
	return nil
}
func (m *memIter) next() error {
	m.valid = m.it.Next()
	return nil
}
func (m *memIter) ok() bool     { return m.valid }
func (m *memIter) cur() entry   { return m.it.Item() }
func (m *memIter) close() error { m.it.Release(); return nil }
