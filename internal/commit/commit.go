// Package commit turns a transaction of the resident catalog into one atomic,
// durable batch in the store: it translates the transaction's staged row
// operations into keyspace operations by kind, validates them the way the
// seeds require (shapes, the head advancing by exactly one, DuckLake's
// conflict matrix, RFC 0008's compaction rules and row-id hold), writes the
// batch and waits for it to be durable. It implements catalog.Committer: the
// catalog publishes the next version only after Persist returns nil.
//
// Failure discipline: if a store write fails, that commit and every commit
// after it fail with ErrStoreFailed, because the store's state is unknown
// (the write may have landed). The server must reopen the store and rebuild
// the catalog from it; it never keeps serving a version that is not durable.
package commit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/slate"
)

// Store is the part of slate the pipeline writes through.
type Store interface {
	Write(ctx context.Context, b *slate.Batch) (uint64, error)
}

// Options configure a Pipeline.
type Options struct {
	// Hold checks RFC 0008's row-id hold for compaction commits; nil skips it
	// (for tests and for lakes whose data path the server cannot read).
	Hold HoldChecker
	// Observe, when set, receives the outcome of every commit.
	Observe func(Outcome)
}

// Outcome describes one Persist call, for metrics.
type Outcome struct {
	Result   string // "ok", "conflict", "shape", "head", "hold", "store", "invalid"
	Duration time.Duration
	Keys     int
}

// Pipeline is the catalog.Committer over a slate store.
type Pipeline struct {
	store Store
	opts  Options
	// lookup reports whether a key is stored (nil: the store cannot say,
	// and duplicate identities are caught only within one commit).
	lookup func(ctx context.Context, key []byte) (bool, error)
	failed atomic.Pointer[error]

	mu       sync.Mutex // guards the fields below; Persist calls of different databases may overlap
	children *childIndex
	heads    map[uint32]headState
	codecs   *codecCache
}

// New returns a pipeline writing to store. Before the first commit the caller
// must Prime it with the loaded catalog (Load does).
func New(store Store, opts Options) *Pipeline {
	p := &Pipeline{
		store:    store,
		opts:     opts,
		children: newChildIndex(),
		heads:    map[uint32]headState{},
		codecs:   newCodecCache(),
	}
	if g, ok := store.(interface {
		Get(ctx context.Context, key []byte) ([]byte, error)
	}); ok {
		p.lookup = func(ctx context.Context, key []byte) (bool, error) {
			_, err := g.Get(ctx, key)
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, slate.ErrNotFound):
				return false, nil
			}
			return false, err
		}
	}
	return p
}

// Failed returns the store error that disabled the pipeline, or nil.
func (p *Pipeline) Failed() error {
	if e := p.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// Persist validates c, writes it as one batch and returns once it is durable.
func (p *Pipeline) Persist(ctx context.Context, c *catalog.Commit) (err error) {
	start := time.Now()
	keys := 0
	defer func() {
		if p.opts.Observe != nil {
			p.opts.Observe(Outcome{Result: resultOf(err), Duration: time.Since(start), Keys: keys})
		}
	}()
	if f := p.Failed(); f != nil {
		// The cause goes into the message itself: a client that only sees
		// the message (most drivers) must learn why, e.g. that a newer
		// writer fenced this server.
		return &Error{Kind: ErrStoreFailed, Code: "58030", Message: ErrStoreFailed.Error() + ": " + f.Error()}
	}
	if err := p.validate(ctx, c); err != nil {
		return err
	}
	p.mu.Lock()
	t, err := p.translate(ctx, c)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	keys = t.batch.Len()
	if _, err := p.store.Write(ctx, t.batch); err != nil {
		// The write may or may not have landed: nothing after it may be
		// acknowledged until the store is reopened and the catalog rebuilt.
		e := fmt.Errorf("commit: store write: %w", err)
		p.failed.CompareAndSwap(nil, &e)
		return &Error{Kind: ErrStoreFailed, Code: "58030", Message: "could not write the commit to the store: " + err.Error()}
	}
	p.mu.Lock()
	t.publish(p)
	p.mu.Unlock()
	return nil
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case isKind(err, ErrConflict):
		return "conflict"
	case isKind(err, ErrShape):
		return "shape"
	case isKind(err, ErrHead):
		return "head"
	case isKind(err, ErrHold):
		return "hold"
	case isKind(err, ErrStoreFailed):
		return "store"
	}
	return "invalid"
}
