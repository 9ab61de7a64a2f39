package objstore

import (
	"context"
	"sync/atomic"
)

// Stats counts the operations a Store was asked to do and the object bytes
// that crossed the interface. A call counts when it is made, whether or not
// it succeeds; Errors counts the calls that returned an error (including
// ErrExists and ErrNotFound, which are ordinary outcomes for slate).
type Stats struct {
	Puts, PutIfAbsents, Gets, GetRanges, Lists, Deletes, Stats int64
	Errors                                                     int64
	// BytesWritten sums the data of successful Put and PutIfAbsent calls;
	// BytesRead sums the bytes returned by Get and GetRange.
	BytesWritten, BytesRead int64
}

// Ops is the total number of calls.
func (s Stats) Ops() int64 {
	return s.Puts + s.PutIfAbsents + s.Gets + s.GetRanges + s.Lists + s.Deletes + s.Stats
}

// Sub returns s - o, for measuring one phase of a benchmark.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Puts: s.Puts - o.Puts, PutIfAbsents: s.PutIfAbsents - o.PutIfAbsents,
		Gets: s.Gets - o.Gets, GetRanges: s.GetRanges - o.GetRanges,
		Lists: s.Lists - o.Lists, Deletes: s.Deletes - o.Deletes, Stats: s.Stats - o.Stats,
		Errors:       s.Errors - o.Errors,
		BytesWritten: s.BytesWritten - o.BytesWritten, BytesRead: s.BytesRead - o.BytesRead,
	}
}

// Counter is a Store decorator that keeps Stats. It adds two atomic adds
// per call and no locking, so it is cheap enough to leave on in production.
type Counter struct {
	inner Store
	c     struct {
		puts, putIfAbsents, gets, getRanges, lists, deletes, stats atomic.Int64
		errors, bytesWritten, bytesRead                            atomic.Int64
	}
}

var _ Store = (*Counter)(nil)

// NewCounter wraps inner. Close on the Counter closes inner.
func NewCounter(inner Store) *Counter { return &Counter{inner: inner} }

// Stats returns a snapshot of the counters. Fields are read one by one, so
// a snapshot taken while calls are in flight may be off by those calls.
func (c *Counter) Stats() Stats {
	return Stats{
		Puts: c.c.puts.Load(), PutIfAbsents: c.c.putIfAbsents.Load(),
		Gets: c.c.gets.Load(), GetRanges: c.c.getRanges.Load(),
		Lists: c.c.lists.Load(), Deletes: c.c.deletes.Load(), Stats: c.c.stats.Load(),
		Errors:       c.c.errors.Load(),
		BytesWritten: c.c.bytesWritten.Load(), BytesRead: c.c.bytesRead.Load(),
	}
}

// Inner returns the wrapped store.
func (c *Counter) Inner() Store { return c.inner }

func (c *Counter) done(err error) error {
	if err != nil {
		c.c.errors.Add(1)
	}
	return err
}

func (c *Counter) Put(ctx context.Context, key string, data []byte) error {
	c.c.puts.Add(1)
	err := c.inner.Put(ctx, key, data)
	if err == nil {
		c.c.bytesWritten.Add(int64(len(data)))
	}
	return c.done(err)
}

func (c *Counter) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	c.c.putIfAbsents.Add(1)
	err := c.inner.PutIfAbsent(ctx, key, data)
	if err == nil {
		c.c.bytesWritten.Add(int64(len(data)))
	}
	return c.done(err)
}

func (c *Counter) Get(ctx context.Context, key string) ([]byte, error) {
	c.c.gets.Add(1)
	b, err := c.inner.Get(ctx, key)
	c.c.bytesRead.Add(int64(len(b)))
	return b, c.done(err)
}

func (c *Counter) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	c.c.getRanges.Add(1)
	b, err := c.inner.GetRange(ctx, key, offset, length)
	c.c.bytesRead.Add(int64(len(b)))
	return b, c.done(err)
}

func (c *Counter) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	c.c.lists.Add(1)
	l, err := c.inner.List(ctx, prefix)
	return l, c.done(err)
}

func (c *Counter) Delete(ctx context.Context, key string) error {
	c.c.deletes.Add(1)
	return c.done(c.inner.Delete(ctx, key))
}

// DeleteMany counts a delete per key.
func (c *Counter) DeleteMany(ctx context.Context, keys []string) error {
	c.c.deletes.Add(int64(len(keys)))
	return c.done(c.inner.DeleteMany(ctx, keys))
}

func (c *Counter) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	c.c.stats.Add(1)
	info, err := c.inner.Stat(ctx, key)
	return info, c.done(err)
}

func (c *Counter) Close() error { return c.inner.Close() }
