package slate

// A reader that follows a writer can hand on, besides the state it serves,
// the batches it replayed — each exactly as the writer committed it — so
// that a consumer keeping a derived state (a replica's resident catalog)
// applies the writer's changes one commit at a time instead of rereading
// everything. The record is complete only while the reader replayed every
// batch: a refresh that finds the writer flushed first replays the WAL
// objects the new sorted tables absorbed, and only a batch whose WAL object
// is gone before the reader read it (collected: the reader fell behind the
// writer's garbage collection) breaks the record; the consumer must then
// rebuild from a snapshot.

// Committed is one batch as the writer committed it.
type Committed struct {
	Seq uint64
	Ops []Op
}

// Op is one operation of a committed batch; Value is nil for a delete.
// Key and Value must not be modified.
type Op struct {
	Key, Value []byte
	Delete     bool
}

// maxCommittedBytes bounds what a reader keeps for a consumer that does not
// take it; past it the record is dropped and reads as broken.
const maxCommittedBytes = 256 << 20

// committedLog is what a reader records (DB.committed, under mu).
type committedLog struct {
	on      bool
	from    uint64 // the record holds every batch after this seq...
	broken  bool   // ...unless a batch was skipped since
	batches []Committed
	bytes   int
}

// record adds a batch the reader replayed. mu is held.
func (l *committedLog) record(seq uint64, ops []op) {
	if !l.on || l.broken {
		return
	}
	c := Committed{Seq: seq, Ops: make([]Op, len(ops))}
	for i, o := range ops {
		c.Ops[i] = Op{Key: o.key, Value: o.value, Delete: o.kind == kindDelete}
		l.bytes += len(o.key) + len(o.value) + 32
	}
	l.batches = append(l.batches, c)
	if l.bytes > maxCommittedBytes {
		l.breakAt()
	}
}

// breakAt records that batches were skipped. mu is held.
func (l *committedLog) breakAt() {
	if l.on {
		l.broken, l.batches, l.bytes = true, nil, 0
	}
}

// RecordCommitted makes a reader record the batches it replays from now
// on, for TakeCommitted.
func (d *DB) RecordCommitted() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.committed.on {
		d.committed = committedLog{on: true, from: d.visibleSeq}
	}
}

// TakeCommitted returns, in order, every batch with a seq above after that
// the reader replayed, and hands them over (they are not returned again).
// complete is false when the record cannot vouch for every batch above
// after — the reader skipped some, or began recording after after — and
// then the record restarts from the reader's current seq: the caller
// rebuilds from a snapshot and takes again from its seq.
func (d *DB) TakeCommitted(after uint64) (batches []Committed, complete bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := &d.committed
	if !l.on {
		return nil, false
	}
	if l.broken || l.from > after {
		*l = committedLog{on: true, from: d.visibleSeq}
		return nil, false
	}
	for _, c := range l.batches {
		if c.Seq > after {
			batches = append(batches, c)
		}
	}
	l.from = max(after, d.visibleSeq)
	l.batches, l.bytes = nil, 0
	return batches, true
}
