package catalog

import (
	"context"
	"sync/atomic"
	"time"
)

// Sealed versions: reading a commit before its COMMIT arrives.
//
// DuckLake's writers form a chain (each commit takes snapshot head+1), so a
// writer can only read the head once the commit before it is in. Between a
// DuckLake commit's last write and its COMMIT lies a client round trip, and
// then validation; a writer waiting for the head pays both. Txn.Seal freezes
// a transaction's writes, once it has sent them all, into a version that a
// waiting writer may pin before the COMMIT arrives (the SQL layer decides
// who seals and who may pin it; see memcat).
//
// A sealed version is speculative until its transaction's fate is known:
// it lands when the transaction commits exactly the sealed writes on exactly
// the version it was sealed on, which then become the current version as
// the same *Version; it fails when the transaction writes again, rolls back,
// or commits any other way. A transaction pinned on a speculative version
// may read it freely, but commits (or, without writes, is acknowledged) only
// after every speculative version under it landed, else it fails with a
// serialization error; so does one whose sealed version is still
// undecided after Options.SealedWait (a sealer holding its transaction
// open must not hold up its followers' COMMITs forever). INVARIANT: a version built on a failed speculation
// never becomes current, durable or acknowledged.

// speculation is the fate of a sealed version.
type speculation struct {
	on      *Version      // the version it was sealed on
	state   atomic.Int32  // specPending, specLanded or specFailed
	decided chan struct{} // closed when state leaves specPending
}

const (
	specPending int32 = iota
	specLanded
	specFailed
)

// resolve records the fate of sealed version v; only the first call counts.
func (v *Version) resolve(landed bool) {
	s := v.spec
	if s == nil {
		return
	}
	to := specFailed
	if landed {
		to = specLanded
	}
	if s.state.CompareAndSwap(specPending, to) {
		close(s.decided)
	}
}

// Speculative reports whether v is a sealed version whose transaction has
// not committed yet.
func (v *Version) Speculative() bool {
	return v.spec != nil && v.spec.state.Load() == specPending
}

// Extends reports whether v is base, or a chain of sealed versions none of
// which failed, the first sealed on base: whether a transaction pinned on v
// sees everything base holds (except what the chain itself changed) and
// can still commit after base.
func (v *Version) Extends(base *Version) bool {
	for x := v; x != base; x = x.spec.on {
		if x.spec == nil || x.spec.state.Load() == specFailed {
			return false
		}
	}
	return true
}

// landed waits until every speculative version under v (v included) is
// decided, and reports a serialization error if one failed or is still
// undecided after wait. A landed version's own base was current when it
// landed, so the walk stops there.
func (v *Version) landed(ctx context.Context, wait time.Duration) error {
	var expired <-chan time.Time
	for x := v; x.spec != nil; x = x.spec.on {
		if expired == nil && x.spec.state.Load() == specPending {
			tm := time.NewTimer(wait)
			defer tm.Stop()
			expired = tm.C
		}
		select {
		case <-x.spec.decided:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return errSpeculationUndecided()
		}
		switch x.spec.state.Load() {
		case specLanded:
			return nil
		case specFailed:
			return errSpeculationFailed()
		}
	}
	return nil
}

// Seal freezes the transaction's writes so far into a version another
// transaction may pin before this one commits (see above), and returns it.
// The transaction goes on as before: its reads see the sealed version, and
// a later write unseals it (the sealed version fails). Sealing again
// without writing in between returns the same version; it returns nil for
// a transaction that is done or has not written.
func (t *Txn) Seal() *Version {
	if t.done || len(t.ops) == 0 {
		return nil
	}
	if t.b == nil {
		return t.sealed
	}
	v := t.b.finish()
	v.spec = &speculation{on: t.base, decided: make(chan struct{})}
	t.b, t.sealed = nil, v
	return v
}

// unseal gives up the sealed version (it fails) and returns a builder over
// it that keeps the transaction's own base, so that the version it finishes
// numbers its sequence and DDL counter as one commit on the base.
func (t *Txn) unseal() *builder {
	s := t.sealed
	t.sealed = nil
	s.resolve(false)
	b := newBuilder(s)
	b.base, b.v.seq = t.base, s.seq
	return b
}
