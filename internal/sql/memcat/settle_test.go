package memcat

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// gateCommitter holds every commit until the test releases it: a store
// write that takes as long as the test wants.
type gateCommitter struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gateCommitter) Submit(ctx context.Context, _ *catalog.Commit) (func(context.Context) error, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return durable, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// durable is the wait of a commit that is durable once submitted.
func durable(context.Context) error { return nil }

func headIDs(t *testing.T, v *Version) []int64 {
	t.Helper()
	tb, ok := v.Lookup("public", "ducklake_snapshot")
	if !ok {
		t.Fatal("table missing")
	}
	var ids []int64
	if err := tb.Scan(func(_ int64, vals []datum.Value) bool { ids = append(ids, vals[0].I); return true }); err != nil {
		t.Fatal(err)
	}
	return ids
}

// beginAsync starts Begin in a goroutine and returns a channel with its
// transaction.
func beginAsync(db *DB, writer bool) <-chan *Txn {
	ch := make(chan *Txn, 1)
	go func() {
		tx, err := db.Begin(context.Background(), writer)
		if err != nil {
			panic(err)
		}
		ch <- tx
	}()
	return ch
}

func mustWait(t *testing.T, ch <-chan *Txn, what string) *Txn {
	t.Helper()
	select {
	case tx := <-ch:
		return tx
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5s", what)
	}
	return nil
}

func mustNotYet(t *testing.T, ch <-chan *Txn, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: returned while it should wait", what)
	case <-time.After(d):
	}
}

// TestSettleWaitsForCommitUnderWay: a writing session's snapshot taken
// while a commit is being made durable waits for it and includes it,
// however long the write takes; one taken while a transaction merely holds
// claims waits at most settleWait; a reader never waits.
func TestSettleWaitsForCommitUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := &gateCommitter{entered: make(chan struct{}, 1), release: make(chan struct{})}
		close(g.release) // the setup commit passes
		db := On(catalog.NewServer(catalog.Options{Committer: g})).Database("lake")
		db.SetWaits(wideWait, wideWait)
		snapshotTable(t, db)
		<-g.entered
		g.release = make(chan struct{})

		a := begin(t, db)
		if _, err := a.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Commit(ctx) }()
		<-g.entered // a is in the store write now
		// A reader pins at once (it never waits for writers); a writing
		// session's transaction waits for the commit.
		rd := mustWait(t, beginAsync(db, false), "a reader during a commit under way")
		if ids := headIDs(t, rd.View()); len(ids) != 0 {
			t.Fatalf("a reader sees %v before the commit landed", ids)
		}
		rd.Rollback()
		reader := beginAsync(db, true)
		mustNotYet(t, reader, 2*wideWait, "a writer's snapshot during a commit under way")
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r := mustWait(t, reader, "snapshot after the commit landed")
		if ids := headIDs(t, r.View()); len(ids) != 1 || ids[0] != 1 {
			t.Fatalf("the snapshot after the commit sees %v, want [1]", ids)
		}
		r.Rollback()

		// A claimer that never commits delays a new snapshot until it sat idle
		// for settleWait after its statement, and not at all after that.
		c := begin(t, db)
		claimed := time.Now()
		if _, err := c.Insert("public", "ducklake_snapshot", row(2, 2)); err != nil {
			t.Fatal(err)
		}
		c.Idle()
		r2 := mustWait(t, beginAsync(db, true), "snapshot behind an idle claimer")
		if el := time.Since(claimed); el < wideWait {
			t.Fatalf("a snapshot behind a fresh claim waited only %v, want %v", el, wideWait)
		}
		r2.Rollback()
		start := time.Now()
		r3 := mustWait(t, beginAsync(db, true), "snapshot behind an old claim")
		if el := time.Since(start); el > wideWait/2 {
			t.Fatalf("waited %v behind a claim older than settleWait", el)
		}
		r3.Rollback()
		c.Rollback()
	})
}

// wideWait replaces SettleWait and LeaseHold in these tests: long enough
// that waiting cannot be mistaken for scheduling delay on a loaded machine.
const wideWait = 400 * time.Millisecond

// TestLeaseOneWriterAtATime: a writing session's transaction pins only once
// the lease holder claimed its snapshot and that commit landed, so it sees
// the holder's commit instead of colliding with it; a reader is never held
// by the lease; a holder that never claims loses the lease after LeaseHold.
func TestLeaseOneWriterAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(db.settleWait, wideWait)
		snapshotTable(t, db)

		h, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		next := beginAsync(db, true)
		mustNotYet(t, next, wideWait/2, "a second writer while the holder has not claimed")
		reader := mustWait(t, beginAsync(db, false), "a reader while a writer holds the lease")
		reader.Rollback()
		if _, err := h.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		if err := h.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		n := mustWait(t, next, "the next writer after the holder committed")
		if ids := headIDs(t, n.View()); len(ids) != 1 || ids[0] != 1 {
			t.Fatalf("the next writer pinned %v, want the holder's commit [1]", ids)
		}
		// n now holds the lease, finishes a statement and never claims: the
		// next writer gets in once n sat idle for leaseHold.
		n.Idle()
		start := time.Now()
		m := mustWait(t, beginAsync(db, true), "a writer behind an idle holder")
		if el := time.Since(start); el < wideWait/2 {
			t.Fatalf("got the lease after %v, before the holder's leaseHold ran out", el)
		}
		m.Rollback()
		n.Rollback()
		// Released leases do not linger: a fresh writer gets in at once.
		start = time.Now()
		w := mustWait(t, beginAsync(db, true), "a writer with the lease free")
		if el := time.Since(start); el > wideWait/2 {
			t.Fatalf("a free lease took %v", el)
		}
		w.Rollback()
	})
}

// TestLeaseHeldWhileHolderBusy: the lease lapses only after its holder
// sat idle between statements for leaseHold; while the holder keeps
// running statements it holds the lease (up to leaseMax), and each
// statement restarts the idle clock. A DuckLake writer whose reads before
// its first write take long on a large catalog would otherwise lose the
// lease and be certain to fail on the snapshot key.
func TestLeaseHeldWhileHolderBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(db.settleWait, wideWait/4)
		if db.leaseMax != 10*db.leaseHold {
			t.Fatalf("leaseMax %v, want 10× leaseHold %v", db.leaseMax, db.leaseHold)
		}
		snapshotTable(t, db)

		h, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		h.Busy() // a long read
		next := beginAsync(db, true)
		mustNotYet(t, next, 3*db.leaseHold, "a writer behind a holder running a statement for 3× leaseHold")
		h.Idle()
		time.Sleep(db.leaseHold / 2)
		h.Busy() // the next statement arrives within leaseHold
		h.Idle()
		mustNotYet(t, next, db.leaseHold*3/4, "a writer behind a holder that was idle for less than leaseHold at a time")
		start := time.Now()
		n := mustWait(t, next, "a writer behind a holder idle for leaseHold")
		if el := time.Since(start); el > 2*db.leaseHold {
			t.Fatalf("the next writer waited %v after the holder went idle, want about leaseHold (%v)", el, db.leaseHold)
		}
		h.Rollback()

		// leaseMax bounds a holder that never stops: n runs one statement
		// forever.
		n.Busy()
		start = time.Now()
		m := mustWait(t, beginAsync(db, true), "a writer behind a holder busy past leaseMax")
		if el := time.Since(start); el < db.leaseMax-db.leaseHold {
			t.Fatalf("got the lease after %v, before the busy holder's leaseMax (%v)", el, db.leaseMax)
		}
		m.Rollback()
		n.Rollback()

	})
}

// TestSettleWaitsForABusyClaimer: a new snapshot waits for a claimer that
// is still running statements (a large write batch) past settleWait, until
// it sat idle for settleWait — or its first claim is leaseMax old.
func TestSettleWaitsForABusyClaimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := NewServer("lake").Database("lake")
		db.SetWaits(wideWait/4, wideWait/4) // leaseMax is 10× this
		snapshotTable(t, db)

		c := begin(t, db)
		c.Busy()
		if _, err := c.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		next := beginAsync(db, true)
		mustNotYet(t, next, 3*db.settleWait, "a snapshot behind a claimer running a statement for 3× settleWait")
		c.Idle()
		start := time.Now()
		n := mustWait(t, next, "a snapshot behind a claimer that went idle")
		if el := time.Since(start); el < db.settleWait/2 || el > 3*db.settleWait {
			t.Fatalf("waited %v after the claimer went idle, want about settleWait (%v)", el, db.settleWait)
		}
		n.Rollback()
		c.Rollback()

		// A claimer that never ends its statement is waited for leaseMax.
		c = begin(t, db)
		c.Busy()
		claimed := time.Now()
		if _, err := c.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		n = mustWait(t, beginAsync(db, true), "a snapshot behind a claimer busy past leaseMax")
		if el := time.Since(claimed); el < db.leaseMax-db.settleWait {
			t.Fatalf("waited only %v behind a busy claimer, want leaseMax (%v)", el, db.leaseMax)
		}
		n.Rollback()
		c.Rollback()
	})
}

// TestLeaseHeldWhileSettling: a lease holder waiting in settle behind a
// slow store write keeps the lease however long that takes (on an object
// store, a PUT is tens of milliseconds): otherwise every writer queued
// behind it would pin the same head when the write lands, and all but one
// would fail.
func TestLeaseHeldWhileSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := &gateCommitter{entered: make(chan struct{}, 1), release: make(chan struct{})}
		close(g.release)
		db := On(catalog.NewServer(catalog.Options{Committer: g})).Database("lake")
		db.SetWaits(db.settleWait, wideWait/4)
		snapshotTable(t, db)
		<-g.entered
		g.release = make(chan struct{})

		a, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Commit(ctx) }()
		<-g.entered // a's store write is under way, and stays so

		second := beginAsync(db, true) // takes the lease, settles behind a
		time.Sleep(wideWait / 8)
		third := beginAsync(db, true)
		mustNotYet(t, second, wideWait, "a writer behind a commit under way")
		mustNotYet(t, third, 10*time.Millisecond, "a writer behind a settling lease holder, after 4× leaseHold")
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		s := mustWait(t, second, "the lease holder after the write landed")
		if ids := headIDs(t, s.View()); len(ids) != 1 {
			t.Fatalf("the holder pinned %v, want a's commit", ids)
		}
		s.Idle() // its first statement ended
		mustNotYet(t, third, wideWait/8, "the next writer while the holder has just pinned")
		th := mustWait(t, third, "the next writer after the holder's leaseHold")
		th.Rollback()
		s.Rollback()
	})
}
