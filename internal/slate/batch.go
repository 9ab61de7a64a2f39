package slate

import (
	"errors"
	"fmt"
	"time"
)

// MaxKeyLen bounds keys so that every length fits the formats' fields and a
// corrupt length can be rejected early.
const MaxKeyLen = 1 << 16

// MaxValueLen bounds values (1 GiB).
const MaxValueLen = 1 << 30

// kind is the type of one entry. Values are part of the storage format.
type kind uint8

const (
	kindPut    kind = 1
	kindDelete kind = 2
)

// op is one operation of a batch.
type op struct {
	kind  kind
	key   []byte
	value []byte
}

// Batch is an ordered set of puts and deletes applied atomically with one
// sequence number. A later operation on the same key within the batch wins.
// A Batch must not be modified after it is passed to Write.
type Batch struct {
	ops      []op
	bytes    int
	coalesce time.Duration
}

// Coalesce lets the commit loop hold the batch for up to d after Submit,
// while it is the newest batch queued, so that the batch submitted next
// goes into the same WAL object. It is for a caller that knows another
// batch is about to follow (a writer waiting to commit after this one):
// it trades up to d of this batch's latency for fewer, larger WAL objects,
// which is what PostgreSQL's commit_delay does when commit_siblings
// transactions are active.
func (b *Batch) Coalesce(d time.Duration) { b.coalesce = d }

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

// NewBatchSized returns an empty batch with room for n operations.
func NewBatchSized(n int) *Batch { return &Batch{ops: make([]op, 0, n)} }

// Put sets key to value. The batch keeps its own copies.
func (b *Batch) Put(key, value []byte) { b.PutOwned(clone(key), clone(value)) }

// PutOwned is Put for a caller that hands key and value over: the batch
// keeps them as they are, and nobody may modify them afterwards.
func (b *Batch) PutOwned(key, value []byte) {
	b.ops = append(b.ops, op{kind: kindPut, key: key, value: value})
	b.bytes += len(key) + len(value) + 8
}

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.DeleteOwned(clone(key)) }

// DeleteOwned is Delete for a caller that hands key over (see PutOwned).
func (b *Batch) DeleteOwned(key []byte) {
	b.ops = append(b.ops, op{kind: kindDelete, key: key})
	b.bytes += len(key) + 8
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// errEmptyKey is returned for a zero-length key: the empty key is reserved as
// "unbounded" in scans.
var errEmptyKey = errors.New("slate: empty key")

func (b *Batch) validate() error {
	if len(b.ops) == 0 {
		return errors.New("slate: empty batch")
	}
	for i, o := range b.ops {
		if len(o.key) == 0 {
			return fmt.Errorf("op %d: %w", i, errEmptyKey)
		}
		if len(o.key) > MaxKeyLen {
			return fmt.Errorf("op %d: key of %d bytes exceeds %d", i, len(o.key), MaxKeyLen)
		}
		if len(o.value) > MaxValueLen {
			return fmt.Errorf("op %d: value of %d bytes exceeds %d", i, len(o.value), MaxValueLen)
		}
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
