package memcat

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// TestDeferredPin: a deferred transaction of a writing session does not
// wait at its start while another writer holds the lease; it reads the
// durable head until Pin, and Pin waits for the holder's commit and pins
// it.
func TestDeferredPin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(db.settleWait, wideWait)
		snapshotTable(t, db)

		h, err := db.Begin(ctx, true) // holds the lease
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		d := db.BeginDeferred(true)
		if el := time.Since(start); el > wideWait/2 {
			t.Fatalf("BeginDeferred waited %v behind the lease holder", el)
		}
		if !d.Deferred() {
			t.Fatal("a deferred transaction reports it has pinned")
		}
		if ids := headIDs(t, d.View()); len(ids) != 0 {
			t.Fatalf("before its pin the transaction reads %v, want the durable head (empty)", ids)
		}
		pinned := make(chan error, 1)
		go func() { pinned <- d.Pin(ctx) }()
		select {
		case err := <-pinned:
			t.Fatalf("Pin returned (%v) while the holder had not claimed", err)
		case <-time.After(wideWait / 2):
		}
		if _, err := h.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		if err := h.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-pinned; err != nil {
			t.Fatalf("Pin after the holder committed: %v", err)
		}
		// The View read before the pin was of the old head; the definitions
		// did not change, so the pin succeeds and reads the new head.
		if ids := headIDs(t, d.View()); len(ids) != 1 || ids[0] != 1 {
			t.Fatalf("after its pin the transaction reads %v, want [1]", ids)
		}
		if d.Deferred() {
			t.Fatal("still deferred after Pin")
		}
		d.Rollback()
	})
}

// TestDeferredPinAfterDDL: a transaction that described tables before its
// pin fails with a serialization error if a commit changed a table
// definition in between; one that read nothing early does not.
func TestDeferredPinAfterDDL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		snapshotTable(t, db)
		described := db.BeginDeferred(false)
		_ = described.View() // what a Describe reads
		blind := db.BeginDeferred(false)

		ddl := begin(t, db)
		if err := ddl.AddColumn("public", "ducklake_snapshot", Column{Name: "extra", Type: datum.Int8}); err != nil {
			t.Fatal(err)
		}
		if err := ddl.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := described.Pin(ctx); !errors.Is(err, catalog.ErrSerialization) {
			t.Fatalf("pin after a definition changed under a Describe: %v, want catalog.ErrSerialization", err)
		}
		described.Rollback()
		if err := blind.Pin(ctx); err != nil {
			t.Fatalf("pin of a transaction that read nothing before: %v", err)
		}
		tb, ok := blind.View().Lookup("public", "ducklake_snapshot")
		if !ok || tb.Def.ColumnIndex("extra") < 0 {
			t.Fatal("the pinned transaction does not see the new column")
		}
		blind.Rollback()
	})
}

// TestVersionKeepsFirstLookup: a Version over a transaction's view answers
// every lookup of a table as the first one did, whatever the transaction
// writes after; the next View sees the writes. Target sees them at once.
func TestVersionKeepsFirstLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		snapshotTable(t, db)
		tx := begin(t, db)
		if _, err := tx.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		v := tx.View()
		if ids := headIDs(t, v); len(ids) != 1 {
			t.Fatalf("view after one insert: %v", ids)
		}
		if _, err := tx.Insert("public", "ducklake_snapshot", row(2, 2)); err != nil {
			t.Fatal(err)
		}
		if ids := headIDs(t, v); len(ids) != 1 {
			t.Fatalf("an earlier view changed under a later write: %v", ids)
		}
		if ids := headIDs(t, tx.View()); len(ids) != 2 {
			t.Fatalf("the view after two inserts: %v", ids)
		}
		target, ok := tx.Target("public", "ducklake_snapshot")
		if !ok || target.Len() != 2 {
			t.Fatalf("Target: ok=%v", ok)
		}
		if _, err := tx.Insert("public", "ducklake_snapshot", row(3, 3)); err != nil {
			t.Fatal(err)
		}
		if target.Len() != 3 {
			t.Fatalf("Target reads the working table: %d rows, want 3", target.Len())
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if ids := headIDs(t, db.Head()); len(ids) != 3 {
			t.Fatalf("head after commit: %v", ids)
		}
	})
}

// followCommitter records catalog.Commit.Followed of every commit.
type followCommitter struct{ followed chan bool }

func (f *followCommitter) Submit(_ context.Context, c *catalog.Commit) (func(context.Context) error, error) {
	f.followed <- c.Followed
	return durable, nil
}

// TestCommitFollowed: a commit is marked followed exactly when a writing
// session's transaction is waiting to pin behind it.
func TestCommitFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fc := &followCommitter{followed: make(chan bool, 8)}
		db := On(catalog.NewServer(catalog.Options{Committer: fc})).Database("lake")
		db.SetWaits(db.settleWait, wideWait)
		snapshotTable(t, db)
		<-fc.followed

		alone, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := alone.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		if err := alone.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if <-fc.followed {
			t.Fatal("a commit with nobody waiting was marked followed")
		}

		h, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		next := beginAsync(db, true) // waits for the lease h holds
		mustNotYet(t, next, wideWait/4, "a writer behind the lease holder")
		if _, err := h.Insert("public", "ducklake_snapshot", row(2, 2)); err != nil {
			t.Fatal(err)
		}
		if err := h.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if !<-fc.followed {
			t.Fatal("a commit with a writer waiting behind it was not marked followed")
		}
		mustWait(t, next, "the follower").Rollback()
	})
}

// TestLeaseFIFO: writers get the lease in the order they asked for it, and
// one that gives up (its context ends) leaves the queue without holding
// up the next.
func TestLeaseFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(db.settleWait, time.Hour) // no expiry: only claims hand the lease on
		snapshotTable(t, db)
		h, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		var chans []<-chan *Txn
		for i := 0; i < 3; i++ {
			chans = append(chans, beginAsync(db, true))
			time.Sleep(20 * time.Millisecond) // arrival order
		}
		gaveUp := make(chan error, 1)
		cctx, cancel := context.WithCancel(ctx)
		go func() { _, err := db.Begin(cctx, true); gaveUp <- err }()
		time.Sleep(20 * time.Millisecond)
		last := beginAsync(db, true)
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter whose context ended: %v", err)
		}
		holder := h
		for i, ch := range append(chans, last) {
			// The holder claims: the next in line, and only it, gets the lease.
			if _, err := holder.Insert("public", "ducklake_snapshot", row(int64(10+i), 0)); err != nil {
				t.Fatal(err)
			}
			holder.Idle() // its statement ended: settle waits settleWait for it
			next := mustWait(t, ch, "the next writer in line")
			for _, other := range chans[min(i+1, len(chans)):] {
				mustNotYet(t, other, 10*time.Millisecond, "a writer further back")
			}
			holder.Rollback()
			holder = next
		}
		holder.Rollback()
	})
}
