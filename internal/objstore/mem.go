package objstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Store for tests and for mem:// URLs. Objects are
// copied on the way in and out, so callers may reuse their buffers.
type Mem struct {
	mu      sync.RWMutex
	objects map[string]memObject
	closed  bool
}

type memObject struct {
	data    []byte
	modTime time.Time
}

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{objects: make(map[string]memObject)} }

func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.objects[key] = memObject{data: append([]byte(nil), data...), modTime: time.Now()}
	return nil
}

func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.objects[key]; ok {
		return fmt.Errorf("put %q: %w", key, ErrExists)
	}
	m.objects[key] = memObject{data: append([]byte(nil), data...), modTime: time.Now()}
	return nil
}

func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	return m.GetRange(ctx, key, 0, -1)
}

func (m *Mem) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("get %q: negative offset %d", key, offset)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	o, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
	}
	if offset >= int64(len(o.data)) {
		return []byte{}, nil
	}
	end := int64(len(o.data))
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	return append([]byte(nil), o.data[offset:end]...), nil
}

func (m *Mem) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	var out []ObjectInfo
	for k, o := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.objects, key)
	return nil
}

func (m *Mem) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ObjectInfo{}, ErrClosed
	}
	o, ok := m.objects[key]
	if !ok {
		return ObjectInfo{}, fmt.Errorf("stat %q: %w", key, ErrNotFound)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// Close marks the store closed; later calls fail with ErrClosed. The objects
// are dropped only when the Mem itself is garbage.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
