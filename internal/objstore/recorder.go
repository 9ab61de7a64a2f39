package objstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Recorder is a Store decorator that keeps a one-line text trace of every
// call, for golden tests that pin the exact I/O a component does ("commit
// writes one WAL object, then advances the manifest"):
//
//	put wal/00000000000000000001.wal 120B: ok
//	put-if-absent manifest/00000000000000000002.manifest 64B: exists
//	get-range compacted/00000000000000000003.sst @100+20: 20B
//	get-range compacted/00000000000000000003.sst @4000..: 96B
//	list manifest/: 2 objects
//	stat wal/00000000000000000009.wal: not found
//
// Outcomes print as ok, exists, not found, closed, invalid key, canceled,
// deadline, or "error: <text>" for anything else. Modification times are
// never printed, so traces are deterministic for a deterministic caller.
// Close on the Recorder closes inner.
type Recorder struct {
	inner Store
	mu    struct {
		sync.Mutex
		lines []string
	}
}

var _ Store = (*Recorder)(nil)

// NewRecorder wraps inner.
func NewRecorder(inner Store) *Recorder { return &Recorder{inner: inner} }

// Take returns the lines recorded since the last Take and clears them.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.mu.lines
	r.mu.lines = nil
	return out
}

func (r *Recorder) add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.lines = append(r.mu.lines, line)
}

// outcome renders err as a stable word.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, ErrNotFound):
		return "not found"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrInvalidKey):
		return "invalid key"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error: " + err.Error()
}

func (r *Recorder) Put(ctx context.Context, key string, data []byte) error {
	err := r.inner.Put(ctx, key, data)
	r.add("put %s %dB: %s", key, len(data), outcome(err))
	return err
}

func (r *Recorder) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := r.inner.PutIfAbsent(ctx, key, data)
	r.add("put-if-absent %s %dB: %s", key, len(data), outcome(err))
	return err
}

func (r *Recorder) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := r.inner.Get(ctx, key)
	if err != nil {
		r.add("get %s: %s", key, outcome(err))
	} else {
		r.add("get %s: %dB", key, len(b))
	}
	return b, err
}

func (r *Recorder) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, err := r.inner.GetRange(ctx, key, offset, length)
	rng := fmt.Sprintf("@%d+%d", offset, length)
	if length < 0 {
		rng = fmt.Sprintf("@%d..", offset) // to the end
	}
	if err != nil {
		r.add("get-range %s %s: %s", key, rng, outcome(err))
	} else {
		r.add("get-range %s %s: %dB", key, rng, len(b))
	}
	return b, err
}

func (r *Recorder) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	l, err := r.inner.List(ctx, prefix)
	if err != nil {
		r.add("list %s: %s", prefix, outcome(err))
	} else {
		r.add("list %s: %d objects", prefix, len(l))
	}
	return l, err
}

func (r *Recorder) Delete(ctx context.Context, key string) error {
	err := r.inner.Delete(ctx, key)
	r.add("delete %s: %s", key, outcome(err))
	return err
}

// DeleteMany records a delete per key, each with the call's outcome.
func (r *Recorder) DeleteMany(ctx context.Context, keys []string) error {
	err := r.inner.DeleteMany(ctx, keys)
	for _, k := range keys {
		r.add("delete %s: %s", k, outcome(err))
	}
	return err
}

func (r *Recorder) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := r.inner.Stat(ctx, key)
	if err != nil {
		r.add("stat %s: %s", key, outcome(err))
	} else {
		r.add("stat %s: %dB", key, info.Size)
	}
	return info, err
}

func (r *Recorder) Close() error { return r.inner.Close() }
