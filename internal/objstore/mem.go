package objstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrInvalidRange is returned (wrapped) by GetRange for a negative offset.
var ErrInvalidRange = errors.New("objstore: invalid range")

// Mem is an in-memory Store for tests and for mem:// URLs. Objects are
// copied on the way in and out, so callers may reuse their buffers.
//
// Every operation is atomic under one lock, so Mem is linearizable: a
// PutIfAbsent race has exactly one winner, and a Put is visible to every
// operation that starts after it returns. "Durable" means "in this process's
// memory"; Clone gives tests a copy to reopen after a simulated crash.
type Mem struct {
	mu struct {
		sync.RWMutex
		objects map[string]memObject
		closed  bool
	}
}

type memObject struct {
	data    []byte
	modTime time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store.
func NewMem() *Mem {
	m := &Mem{}
	m.mu.objects = make(map[string]memObject)
	return m
}

// Clone returns an open, independent copy of m's objects, as they stand at
// the moment of the call. The object bytes are shared read-only (they are
// never mutated in place), so Clone costs one map copy.
func (m *Mem) Clone() *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := &Mem{}
	c.mu.objects = maps.Clone(m.mu.objects)
	return c
}

// begin is the common prologue: context, key and closed checks.
// REQUIRES: m.mu held (read or write).
func (m *Mem) beginLocked(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return OpError(op, key, err)
	}
	if m.mu.closed {
		return OpError(op, key, ErrClosed)
	}
	return nil
}

func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return OpError("put", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(ctx, "put", key); err != nil {
		return err
	}
	m.mu.objects[key] = memObject{data: slices.Clone(nonNil(data)), modTime: time.Now()}
	return nil
}

func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return OpError("put-if-absent", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(ctx, "put-if-absent", key); err != nil {
		return err
	}
	if _, ok := m.mu.objects[key]; ok {
		return OpError("put-if-absent", key, ErrExists)
	}
	m.mu.objects[key] = memObject{data: slices.Clone(nonNil(data)), modTime: time.Now()}
	return nil
}

func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	return m.read(ctx, "get", key, 0, -1)
}

func (m *Mem) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return m.read(ctx, "get-range", key, offset, length)
}

func (m *Mem) read(ctx context.Context, op, key string, offset, length int64) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, OpError(op, key, err)
	}
	if offset < 0 {
		return nil, OpError(op, key, ErrInvalidRange)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.beginLocked(ctx, op, key); err != nil {
		return nil, err
	}
	o, ok := m.mu.objects[key]
	if !ok {
		return nil, OpError(op, key, ErrNotFound)
	}
	start, end := ClampRange(int64(len(o.data)), offset, length)
	return slices.Clone(o.data[start:end:end]), nil
}

func (m *Mem) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.beginLocked(ctx, "list", prefix); err != nil {
		return nil, err
	}
	out := []ObjectInfo{}
	for k, o := range m.mu.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return OpError("delete", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(ctx, "delete", key); err != nil {
		return err
	}
	delete(m.mu.objects, key)
	return nil
}

func (m *Mem) DeleteMany(ctx context.Context, keys []string) error {
	if err := ValidateKeys("delete", keys); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if err := m.beginLocked(ctx, "delete", k); err != nil {
			return err
		}
		delete(m.mu.objects, k)
	}
	return nil
}

func (m *Mem) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, OpError("stat", key, err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.beginLocked(ctx, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	o, ok := m.mu.objects[key]
	if !ok {
		return ObjectInfo{}, OpError("stat", key, ErrNotFound)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// Close marks the store closed; later calls fail with ErrClosed. Closing
// twice is not an error. The objects are dropped only when the Mem itself is
// garbage, so a Clone taken before Close still holds them.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	return nil
}

// nonNil makes an empty object read back as an empty, non-nil slice.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ClampRange turns a GetRange request into slice bounds [start, end) within
// an object of the given size, following the Store.GetRange contract:
// a range running past the end is cut short, an offset past the end gives an
// empty range, and length < 0 means "to the end".
// REQUIRES: offset >= 0, size >= 0.
func ClampRange(size, offset, length int64) (start, end int64) {
	if offset >= size {
		return size, size
	}
	end = size
	if length >= 0 && length < size-offset {
		end = offset + length
	}
	return offset, end
}
