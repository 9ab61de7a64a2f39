package memcat

import (
	"context"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
)

// writer is a transaction's entry in DB.writers. Guarded by DB.mu.
type writer struct {
	txn        *Txn             // the claimer (its idle clock: settleDeadlineLocked)
	since      time.Time        // first claim
	committing bool             // COMMIT is under way
	done       chan struct{}    // closed when the transaction ended
	sealed     *catalog.Version // its writes, sealed for the next writer (Txn.Seal)
	sealedAt   time.Time
	sealedCh   chan struct{} // closed when it seals
}

// SettleWait bounds how long a new snapshot waits for a transaction that
// claimed keys but has not sent COMMIT yet while it sits idle — running no
// statement, waiting for its client. DuckLake sends its write batch and
// COMMIT back to back, so its claims end within a round trip or two; a
// session that sits in an open write transaction delays nobody for longer
// than this. A claimer still running its statements (a large batch: a
// commit of many files) is waited for up to LeaseMax from its first claim:
// counted from the claim, a batch longer than SettleWait would let the
// writers behind it pin a head about to go stale, each certain to fail on
// DuckLake's snapshot key (as the lease's holders did, see LeaseHold).
const SettleWait = 10 * time.Millisecond

// settle waits until the writes under way when it is called have ended:
// every commit being made durable, and every transaction that claimed keys
// and has not sat idle for SettleWait (settleDeadlineLocked). A snapshot
// pinned after settle sees each of them that landed.
//
// Why wait: DuckLake numbers a commit's snapshot base+1 from the snapshot
// its transaction pinned. A transaction that pins while another is writing
// base+1 pins a base that is about to be stale, so its own commit is certain
// to fail on the snapshot's primary key and back off (≥ 50 ms by default).
// Waiting about one store write instead and pinning the newer head lets it
// commit. Reading a version newer than strictly required is always
// allowed: the reader is ordered after those commits.
func (db *DB) settle(ctx context.Context, self *Txn) error {
	db.mu.Lock()
	if len(db.writers) == 0 {
		db.mu.Unlock()
		return nil
	}
	pending := make([]*writer, 0, len(db.writers))
	for t, w := range db.writers {
		if t != self { // a transaction never waits for its own claims
			pending = append(pending, w)
		}
	}
	db.mu.Unlock()
	for _, w := range pending {
		if err := db.settleOne(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// settleOne waits for one writer: until it ended if it is committing, else
// until settleDeadlineLocked — re-checking when that time is up, since a
// claimer that sent COMMIT meanwhile is now making its commit durable, and
// that is worth waiting for whatever it takes (on an object store, tens of
// milliseconds), and one that ran another statement has a later deadline.
func (db *DB) settleOne(ctx context.Context, w *writer) error {
	for {
		db.mu.Lock()
		committing, deadline, sealedCh := w.committing, db.settleDeadlineLocked(w, time.Now()), w.sealedCh
		// A writer that sealed its writes on the head is as good as landed
		// for a new snapshot: it pins them (pinBaseLocked), as long as the
		// seal is fresh; one that then sits idle is waited for like any
		// claimer.
		sealed := db.pinnableLocked(w.sealed, w.sealedAt)
		db.mu.Unlock()
		if sealed {
			return nil
		}
		if committing {
			select {
			case <-w.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		d := time.Until(deadline)
		if d <= 0 {
			return nil
		}
		tm := time.NewTimer(d)
		select {
		case <-w.done:
			tm.Stop()
			return nil
		case <-sealedCh:
			tm.Stop()
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
}

// settleDeadlineLocked is when a new snapshot stops waiting for claimer w
// that has not sent COMMIT: settleWait after its last statement ended, and
// while it runs one, settleWait from now (to look again) — never later
// than leaseMax after its first claim. REQUIRES: db.mu.
func (db *DB) settleDeadlineLocked(w *writer, now time.Time) time.Time {
	end := w.since.Add(db.leaseMax)
	idle := now
	if i := w.txn.idleSince.Load(); i != 0 {
		idle = time.Unix(0, i)
	}
	if e := idle.Add(db.settleWait); e.Before(end) {
		end = e
	}
	return end
}

// LeaseHold bounds how long the pinned holder of the pin lease may sit
// idle — running no statement, waiting for its client — before the next
// writer may pin. LeaseMax bounds how long it holds the lease in all while
// it keeps running statements without claiming a key.
//
// Why idle time, not time since the pin: an expired holder that then
// writes is certain to fail on DuckLake's snapshot key and to retry after
// a back-off, with a conflict query that scans whole catalog tables. The
// reads a DuckLake commit makes before its first write grow with the
// catalog (the column statistics of every table; on a retry every
// snapshot and every snapshot's changes), and counted from the pin they
// outgrew LeaseHold: 16 writers past 30 000 snapshots lost the lease on
// one commit in forty, and each loss made a retry whose conflict query
// lost it again. A holder that
// keeps its client's requests coming is about to write; one that stops
// (a read-only transaction of a writing session, holding its DuckDB query
// open) loses the lease after LeaseHold as before.
const (
	LeaseHold = 10 * time.Millisecond
	LeaseMax  = 100 * time.Millisecond
)

// SetWaits sets how long this database's writers wait for a claimed
// commit (SettleWait) and may hold the pin lease idle (LeaseHold; LeaseMax
// scales with it). Tests of the layers above widen them to tell who waits
// from scheduling noise; nothing else should change them.
func (db *DB) SetWaits(settle, lease time.Duration) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.settleWait, db.leaseHold, db.leaseMax = settle, lease, lease*(LeaseMax/LeaseHold)
}

// acquireLease makes t the holder of the pin lease, waiting while another
// transaction holds it (at most until that holder has sat idle for
// LeaseHold, or held it for LeaseMax).
//
// Why: DuckLake's commits all take snapshot base+1, so of the writers that
// pin the same head only one can commit; the others fail on the primary
// key and back off 50 ms or more. settle already keeps a pin from racing a
// commit under way, but when that commit lands every waiting writer pins
// the new head at once and all but one are doomed, and they burn the CPU
// the winner needs. The lease hands the new head to one writing session at
// a time: the next pins only once the holder claimed its snapshot (and so
// is waited for by settle), ended, or let the lease lapse
// (leaseExpiryLocked). Sessions that have not written never take it, so
// readers are not serialized.
func (db *DB) acquireLease(ctx context.Context, t *Txn) error {
	var me *leaseWaiter
	db.mu.Lock()
	defer db.mu.Unlock()
	for {
		l := &db.lease
		if l.holder == t {
			return nil // a holder pinning again (READ COMMITTED, Pin)
		}
		now := time.Now()
		recheck, free := db.leaseExpiryLocked(now)
		if free && (len(l.queue) == 0 || l.queue[0] == me) {
			if me != nil {
				l.queue = l.queue[1:]
			}
			// The holder first waits in settle for the writes under way;
			// its LeaseHold starts when it pins (admit).
			l.holder, l.settling = t, true
			return nil
		}
		if me == nil {
			me = &leaseWaiter{wake: make(chan struct{}, 1)}
			l.queue = append(l.queue, me)
		}
		// The first waiter times the holder's lapse once the holder
		// pinned; everyone else waits to be woken.
		var expiry <-chan time.Time
		var tm *time.Timer
		if l.queue[0] == me && recheck > 0 {
			tm = time.NewTimer(recheck)
			expiry = tm.C
		}
		db.mu.Unlock()
		var err error
		select {
		case <-me.wake:
		case <-expiry:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if tm != nil {
			tm.Stop()
		}
		db.mu.Lock()
		if err != nil {
			db.dropWaiterLocked(me)
			return err
		}
	}
}

// leaseExpiryLocked reports whether the pin lease is free at now: no
// holder, or a pinned holder that has sat idle (Txn.Idle) for leaseHold or
// held it for leaseMax. If it is not free, recheck is how long until it
// may be (0: only a wake-up frees it — the holder is settling). A holder's
// idleness is read, not signalled: the first waiter polls it, so a
// statement costs the holder two atomic stores and no lock.
// REQUIRES: db.mu.
func (db *DB) leaseExpiryLocked(now time.Time) (recheck time.Duration, free bool) {
	l := &db.lease
	if l.holder == nil {
		return 0, true
	}
	if l.settling {
		return 0, false
	}
	end := l.pinned.Add(db.leaseMax)
	if idle := l.holder.idleSince.Load(); idle != 0 {
		if e := time.Unix(0, idle).Add(db.leaseHold); e.Before(end) {
			end = e
		}
	} else if e := now.Add(db.leaseHold); e.Before(end) {
		end = e // running a statement: look again when it may have gone idle
	}
	if !now.Before(end) {
		return 0, true
	}
	return end.Sub(now), false
}

// leaseWaiter is a transaction waiting for the pin lease.
type leaseWaiter struct{ wake chan struct{} }

// wakeLeaseHeadLocked wakes the first waiter for the lease, if any.
// REQUIRES: db.mu.
func (db *DB) wakeLeaseHeadLocked() {
	if q := db.lease.queue; len(q) > 0 {
		select {
		case q[0].wake <- struct{}{}:
		default: // already woken
		}
	}
}

// dropWaiterLocked removes w from the lease queue (it gave up), waking the
// next waiter if w was first. REQUIRES: db.mu.
func (db *DB) dropWaiterLocked(w *leaseWaiter) {
	q := db.lease.queue
	for i, x := range q {
		if x == w {
			db.lease.queue = append(q[:i:i], q[i+1:]...)
			if i == 0 {
				db.wakeLeaseHeadLocked()
			}
			return
		}
	}
}

// releaseLeaseLocked gives up the pin lease if t holds it. REQUIRES: db.mu.
func (db *DB) releaseLeaseLocked(t *Txn) {
	if l := &db.lease; l.holder == t {
		l.holder = nil
		db.wakeLeaseHeadLocked()
	}
}

// enlist records t in db.writers (committing: its COMMIT started). Callers
// hold db.mu.
func (t *Txn) enlist(committing bool) {
	db := t.db
	w := db.writers[t]
	if w == nil {
		if db.writers == nil {
			db.writers = map[*Txn]*writer{}
		}
		w = &writer{txn: t, since: time.Now(), done: make(chan struct{}), sealedCh: make(chan struct{})}
		db.writers[t] = w
	}
	w.committing = w.committing || committing
	// A claimer is waited for by settle: the next writer may take the lease.
	db.releaseLeaseLocked(t)
}

// pinBaseLocked is the version a writing session pins: the newest sealed
// version while it extends the current one and was sealed less than
// settleWait ago (a sealer that has not committed by then may be a session
// holding its transaction open, whose followers would wait for it at their
// COMMIT), else the current one.
// REQUIRES: db.mu.
func (db *DB) pinBaseLocked() *catalog.Version {
	cur := db.cat.Current()
	if s := db.spec; s != nil {
		if s != cur && db.pinnableLocked(s, db.specAt) {
			return s
		}
		db.spec = nil // landed (cur is it or newer), failed, or stale
	}
	return cur
}

// pinnableLocked reports whether sealed version v, sealed at at, may be
// pinned by a new writer: it is fresh (younger than settleWait) and
// extends the current version. REQUIRES: db.mu.
func (db *DB) pinnableLocked(v *catalog.Version, at time.Time) bool {
	return v != nil && time.Since(at) < db.settleWait && v.Extends(db.cat.Current())
}

// Seal lets the writing sessions waiting to pin read t's writes before its
// COMMIT arrives (catalog.Txn.Seal): the SQL layer calls it when t's
// session is about to go idle inside its transaction, as DuckLake's is
// between its write batch and its COMMIT. It does nothing unless a writer
// is waiting, t claimed a key (settle waits for it), has not started
// committing, and built on the version writers pin now: a sealed version
// off that chain could never land as it is.
//
// Why: DuckLake's commits form a chain, and the next writer would
// otherwise wait for the COMMIT's round trip and its validation before it
// may pin. If t does not commit exactly what it sealed, a transaction
// pinned on it fails at COMMIT with a serialization error (40001), which
// DuckLake retries, just as a transaction that read a version whose store
// write then failed does.
func (t *Txn) Seal() {
	db := t.db
	if db.admitting.Load() == 0 || !t.tx.Dirty() {
		return
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	w := db.writers[t]
	if w == nil || w.committing || t.tx.Base() != db.pinBaseLocked() {
		return
	}
	v := t.tx.Seal()
	if v == nil || v == w.sealed {
		return
	}
	now := time.Now()
	db.spec, w.sealed, db.specAt, w.sealedAt = v, v, now, now
	close(w.sealedCh)
	w.sealedCh = make(chan struct{})
}

// admit waits until t may pin a snapshot. Only transactions of writing
// sessions wait (for the lease, then for the writes under way): a reader
// gains nothing from a fresher head and must not pay a store write (on an
// object store, tens of milliseconds) for one, exactly as PostgreSQL's
// readers never wait for writers.
func (t *Txn) admit(ctx context.Context) error {
	if !t.writer {
		return nil
	}
	t.db.admitting.Add(1)
	defer t.db.admitting.Add(-1)
	if err := t.db.acquireLease(ctx, t); err != nil {
		return err
	}
	err := t.db.settle(ctx, t)
	t.db.mu.Lock()
	if err != nil {
		t.db.releaseLeaseLocked(t)
	} else if l := &t.db.lease; l.holder == t {
		// LeaseMax counts from the pin, not from the wait in settle: a
		// holder waiting behind a slow store write is not idle.
		l.settling, l.pinned = false, time.Now()
		// Wake the first waiter: it waited without a deadline while the
		// holder settled and must now time its lapse.
		t.db.wakeLeaseHeadLocked()
	}
	t.db.mu.Unlock()
	return err
}
