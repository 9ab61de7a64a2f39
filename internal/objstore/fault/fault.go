// Package fault wraps any objstore.Store with deterministic fault injection:
// per-operation error rates, injected latency, the "ambiguous write" (a PUT
// that lands but is reported as failed, as when a response is lost to a
// timeout), and a crash after the Nth operation, after which every call
// fails with ErrCrashed.
//
// It is the tool slate's crash and fencing tests are built on: crash at the
// k-th write for k = 1, 2, …, then "restart" by wrapping the same inner store
// again (the wrapper never closes or alters inner) and require that recovery
// keeps every acknowledged commit.
//
// Determinism: all random draws come from one PCG source seeded by
// Config.Seed, taken under a lock in call order. A single-goroutine workload
// therefore sees the same faults on every run with the same seed; concurrent
// callers see the same multiset of draws but in scheduling order.
package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// ErrInjected is returned (wrapped) by a call that the wrapper failed on
// purpose before it reached the inner store: nothing was written.
var ErrInjected = errors.New("fault: injected error")

// ErrAmbiguous is returned (wrapped) by a write that DID reach the inner
// store and succeeded there, but is reported as failed — the outcome a
// client sees when a PUT lands and its response is lost. A caller that gets
// any error other than ErrExists from PutIfAbsent must allow for this.
var ErrAmbiguous = errors.New("fault: write applied but reported as failed")

// ErrCrashed is returned (wrapped) by every call after the simulated crash.
var ErrCrashed = errors.New("fault: store crashed")

// Op names one Store method.
type Op uint8

const (
	OpPut Op = iota
	OpPutIfAbsent
	OpGet
	OpGetRange
	OpList
	OpDelete
	OpStat
	numOps
)

var opNames = [numOps]string{"put", "put-if-absent", "get", "get-range", "list", "delete", "stat"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// IsWrite reports whether the operation changes the store.
func (o Op) IsWrite() bool { return o == OpPut || o == OpPutIfAbsent || o == OpDelete }

// ParseOp is the inverse of Op.String.
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n == s {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("fault: unknown operation %q (want one of %s)", s, strings.Join(opNames[:], ", "))
}

// Rule is the fault behaviour of one operation.
type Rule struct {
	// ErrorRate is the probability, in [0, 1], that a call fails with
	// ErrInjected without reaching the inner store.
	ErrorRate float64
	// AmbiguousRate is the probability, in [0, 1], that a write which
	// succeeds on the inner store is reported as ErrAmbiguous. Reads ignore
	// it.
	AmbiguousRate float64
	// Latency is added before the call reaches the inner store (and before
	// an injected error is returned). It honours the context.
	Latency Latency
}

// Action is what a Hook decides for one call.
type Action uint8

const (
	// Proceed applies the rates of the Config as usual.
	Proceed Action = iota
	// Pass lets the call through untouched, skipping the rates.
	Pass
	// Fail fails the call with ErrInjected before it reaches inner.
	Fail
	// Ambiguous applies a write, then reports ErrAmbiguous (reads: Fail).
	Ambiguous
	// Crash crashes the store at this call; the call is not applied.
	Crash
	// CrashAfterApply applies this call to inner, then crashes the store
	// and reports ErrCrashed: the write landed but nobody was told. For a
	// read it is Crash.
	CrashAfterApply
)

// Call describes one call for a Hook.
type Call struct {
	Op  Op
	Key string // the prefix, for OpList
	// Seq numbers every call made to the wrapper, from 1; WriteSeq numbers
	// the writes (Put, PutIfAbsent, Delete) from 1 and is 0 for reads.
	Seq, WriteSeq int64
}

// Config sets up a wrapper. The zero Config injects nothing.
type Config struct {
	// Seed seeds the random source.
	Seed uint64
	// Default applies to every operation without an entry in Ops.
	Default Rule
	// Ops overrides Default per operation.
	Ops map[Op]Rule
	// CrashAtOp > 0 crashes the store at the CrashAtOp-th call (1-based):
	// that call and every later one fail with ErrCrashed.
	CrashAtOp int64
	// CrashAtWrite > 0 crashes the store at the CrashAtWrite-th write.
	CrashAtWrite int64
	// CrashAppliesWrite makes the write at which a CrashAt* crash happens
	// reach the inner store before ErrCrashed is reported (a crash between
	// the PUT landing and the acknowledgement). Otherwise it is dropped.
	CrashAppliesWrite bool
	// Hook, if set, is asked first about every call that has not been
	// failed by a crash; its answer overrides the rates.
	Hook func(Call) Action
}

func (c *Config) rule(op Op) Rule {
	if r, ok := c.Ops[op]; ok {
		return r
	}
	return c.Default
}

// Stats are the wrapper's counters: every call made to it (objstore.Stats,
// whose byte counts cover only calls reported as successful), plus the
// faults it injected.
type Stats struct {
	objstore.Stats
	// Injected counts ErrInjected failures, Ambiguous counts ErrAmbiguous
	// reports, CrashRejected counts calls failed because of a crash.
	Injected, Ambiguous, CrashRejected int64
	// Delayed counts calls that slept, and Delay sums the time slept.
	Delayed int64
	Delay   time.Duration
}

// Store is the fault-injecting wrapper. It is safe for concurrent use.
type Store struct {
	counter *objstore.Counter // wraps core; counts calls at the wrapper
	core    *core
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner. The wrapper does not own inner: Close closes only the
// wrapper, so a test can crash it, wrap inner again and "restart".
func New(inner objstore.Store, cfg Config) *Store {
	c := &core{inner: inner}
	c.mu.cfg = cfg
	c.mu.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	return &Store{counter: objstore.NewCounter(c), core: c}
}

// Inner returns the wrapped store.
func (s *Store) Inner() objstore.Store { return s.core.inner }

// Configure changes the configuration under the lock, for tests that turn
// faults on and off mid-run. The random source is not reseeded.
func (s *Store) Configure(f func(*Config)) {
	s.core.mu.Lock()
	defer s.core.mu.Unlock()
	f(&s.core.mu.cfg)
}

// Crash crashes the store now: every later call fails with ErrCrashed.
// Calls already past the crash check finish normally.
func (s *Store) Crash() {
	s.core.mu.Lock()
	defer s.core.mu.Unlock()
	s.core.mu.crashed = true
}

// Crashed reports whether the store has crashed.
func (s *Store) Crashed() bool {
	s.core.mu.Lock()
	defer s.core.mu.Unlock()
	return s.core.mu.crashed
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	st := Stats{Stats: s.counter.Stats()}
	c := s.core
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Injected, st.Ambiguous, st.CrashRejected = c.mu.injected, c.mu.ambiguous, c.mu.crashRejected
	st.Delayed, st.Delay = c.mu.delayed, c.mu.delay
	return st
}

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.counter.Put(ctx, key, data)
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.counter.PutIfAbsent(ctx, key, data)
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.counter.Get(ctx, key)
}

func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return s.counter.GetRange(ctx, key, offset, length)
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	return s.counter.List(ctx, prefix)
}

func (s *Store) Delete(ctx context.Context, key string) error { return s.counter.Delete(ctx, key) }

// DeleteMany is a Delete per key, in order, each a call the rules see: a
// fault or crash can stop it between any two removals.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	return s.counter.DeleteMany(ctx, keys)
}

func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return s.counter.Stat(ctx, key)
}

// Close closes the wrapper (not inner); later calls fail with ErrClosed.
func (s *Store) Close() error { return s.counter.Close() }

// core does the injecting; Store puts a Counter in front of it.
type core struct {
	inner objstore.Store
	mu    struct {
		sync.Mutex
		cfg                                Config
		rng                                *rand.Rand
		seq, writeSeq                      int64
		crashed, closed                    bool
		injected, ambiguous, crashRejected int64
		delayed                            int64
		delay                              time.Duration
	}
}

// decision is the outcome of admit for one call.
type decision struct {
	action Action // never Proceed
	delay  time.Duration
}

// admit numbers the call, applies crash points, the hook and the rates, and
// returns what to do. It returns a non-nil error when the call must fail
// without reaching inner (closed or crashed).
func (c *core) admit(op Op, key string) (decision, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return decision{}, objstore.OpError(op.String(), key, objstore.ErrClosed)
	}
	if c.mu.crashed {
		c.mu.crashRejected++
		return decision{}, objstore.OpError(op.String(), key, ErrCrashed)
	}
	c.mu.seq++
	call := Call{Op: op, Key: key, Seq: c.mu.seq}
	if op.IsWrite() {
		c.mu.writeSeq++
		call.WriteSeq = c.mu.writeSeq
	}
	cfg := &c.mu.cfg
	crashAt := (cfg.CrashAtOp > 0 && call.Seq >= cfg.CrashAtOp) ||
		(cfg.CrashAtWrite > 0 && call.WriteSeq >= cfg.CrashAtWrite)
	if crashAt {
		// Mark the crash under the same lock that admitted this call, so no
		// later call can slip in between.
		c.mu.crashed = true
		if cfg.CrashAppliesWrite && op.IsWrite() {
			return decision{action: CrashAfterApply}, nil
		}
		return decision{action: Crash}, nil
	}
	rule := cfg.rule(op)
	d := decision{action: Proceed, delay: rule.Latency.draw(c.mu.rng)}
	if cfg.Hook != nil {
		d.action = cfg.Hook(call)
	}
	if d.action == Proceed {
		// Draw both numbers every time so that changing one rate does not
		// shift the sequence the other sees.
		e, a := c.mu.rng.Float64(), c.mu.rng.Float64()
		switch {
		case e < rule.ErrorRate:
			d.action = Fail
		case op.IsWrite() && a < rule.AmbiguousRate:
			d.action = Ambiguous
		default:
			d.action = Pass
		}
	}
	switch {
	case d.action == Ambiguous && !op.IsWrite():
		d.action = Fail
	case d.action == CrashAfterApply && !op.IsWrite():
		d.action = Crash
	}
	if d.action == Crash || d.action == CrashAfterApply {
		c.mu.crashed = true
		d.delay = 0
	}
	if d.delay > 0 {
		c.mu.delayed++
		c.mu.delay += d.delay
	}
	return d, nil
}

func (c *core) note(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// run applies decision d around do, the call on inner.
func (c *core) run(ctx context.Context, op Op, key string, do func() error) error {
	d, err := c.admit(op, key)
	if err != nil {
		return err
	}
	if d.delay > 0 {
		t := time.NewTimer(d.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return objstore.OpError(op.String(), key, ctx.Err())
		case <-t.C:
		}
	}
	switch d.action {
	case Crash:
		c.note(func() { c.mu.crashRejected++ })
		return objstore.OpError(op.String(), key, ErrCrashed)
	case Fail:
		c.note(func() { c.mu.injected++ })
		return objstore.OpError(op.String(), key, ErrInjected)
	}
	if err := do(); err != nil {
		return err
	}
	switch d.action {
	case CrashAfterApply:
		c.note(func() { c.mu.crashRejected++ })
		return objstore.OpError(op.String(), key, ErrCrashed)
	case Ambiguous:
		c.note(func() { c.mu.ambiguous++ })
		return objstore.OpError(op.String(), key, ErrAmbiguous)
	}
	return nil
}

func (c *core) Put(ctx context.Context, key string, data []byte) error {
	return c.run(ctx, OpPut, key, func() error { return c.inner.Put(ctx, key, data) })
}

func (c *core) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return c.run(ctx, OpPutIfAbsent, key, func() error { return c.inner.PutIfAbsent(ctx, key, data) })
}

func (c *core) Get(ctx context.Context, key string) (b []byte, err error) {
	err = c.run(ctx, OpGet, key, func() error { b, err = c.inner.Get(ctx, key); return err })
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (c *core) GetRange(ctx context.Context, key string, offset, length int64) (b []byte, err error) {
	err = c.run(ctx, OpGetRange, key, func() error { b, err = c.inner.GetRange(ctx, key, offset, length); return err })
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (c *core) List(ctx context.Context, prefix string) (l []objstore.ObjectInfo, err error) {
	err = c.run(ctx, OpList, prefix, func() error { l, err = c.inner.List(ctx, prefix); return err })
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (c *core) Delete(ctx context.Context, key string) error {
	return c.run(ctx, OpDelete, key, func() error { return c.inner.Delete(ctx, key) })
}

func (c *core) DeleteMany(ctx context.Context, keys []string) error {
	if err := objstore.ValidateKeys("delete", keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := c.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func (c *core) Stat(ctx context.Context, key string) (info objstore.ObjectInfo, err error) {
	err = c.run(ctx, OpStat, key, func() error { info, err = c.inner.Stat(ctx, key); return err })
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	return info, nil
}

func (c *core) Close() error {
	c.note(func() { c.mu.closed = true })
	return nil
}
