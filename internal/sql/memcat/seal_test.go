package memcat

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
)

// waitAdmitting waits until n writing sessions' transactions wait to pin.
func waitAdmitting(t *testing.T, db *DB, n int32) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); db.admitting.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writers waiting to pin, want %d", db.admitting.Load(), n)
		}
	}
}

// TestSealHandsHeadToWaitingWriter: a writer waiting behind a claimer pins
// the claimer's sealed writes as soon as it seals, without waiting for its
// COMMIT; the follower's commit lands after the claimer's if that one
// commits what it sealed, and fails with a serialization error, changing
// nothing, if it rolls back. A seal with nobody waiting seals nothing.
func TestSealHandsHeadToWaitingWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(wideWait, wideWait)
		snapshotTable(t, db)
		writer := func() *Txn {
			tx, err := db.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			return tx
		}
		insert := func(tx *Txn, id int64) {
			t.Helper()
			if _, err := tx.Insert("public", "ducklake_snapshot", row(id, id)); err != nil {
				t.Fatal(err)
			}
		}
		current := func() []int64 { return headIDs(t, db.versionOf(db.cat.Current())) }

		// Nobody waits: Seal leaves the transaction as it was.
		a := writer()
		insert(a, 1)
		a.Seal()
		if db.spec != nil || db.writers[a].sealed != nil {
			t.Fatal("a seal with no writer waiting was published")
		}

		// A writer waiting behind a's claim pins a's sealed writes.
		b := beginAsync(db, true)
		waitAdmitting(t, db, 1)
		start := time.Now()
		a.Seal()
		bt := mustWait(t, b, "a writer behind a sealed claimer")
		if el := time.Since(start); el > wideWait/2 {
			t.Fatalf("the follower waited %v after the seal", el)
		}
		if got := headIDs(t, bt.View()); !slices.Equal(got, []int64{1}) {
			t.Fatalf("follower sees %v, want [1]", got)
		}
		if got := current(); len(got) != 0 {
			t.Fatalf("current version %v before the sealed COMMIT, want []", got)
		}
		insert(bt, 2)
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := bt.Commit(ctx); err != nil {
			t.Fatalf("follower of a landed seal: %v", err)
		}
		if got := current(); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("current %v, want [1 2]", got)
		}

		// The sealer rolls back: the follower read writes that never landed.
		c := writer()
		insert(c, 3)
		d := beginAsync(db, true)
		waitAdmitting(t, db, 1)
		c.Seal()
		dt := mustWait(t, d, "a writer behind a sealed claimer")
		if got := headIDs(t, dt.View()); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("follower sees %v, want [1 2 3]", got)
		}
		insert(dt, 4)
		c.Rollback()
		err := dt.Commit(ctx)
		if !errors.Is(err, catalog.ErrSerialization) {
			t.Fatalf("follower of a rolled-back seal committed: %v", err)
		}
		if got := current(); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("current %v after the failed follower, want [1 2]", got)
		}
		// The next writer pins the current version again, and may take 3.
		e := writer()
		if got := headIDs(t, e.View()); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("writer after the failed seal sees %v", got)
		}
		insert(e, 3)
		if err := e.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStaleSealNotPinned: a seal older than settleWait is no longer handed
// to new writers (its session may be holding its transaction open): they
// pin the current version.
func TestStaleSealNotPinned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := NewServer("lake").Database("lake")
		db.SetWaits(30*time.Millisecond, wideWait)
		snapshotTable(t, db)
		a, err := db.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
			t.Fatal(err)
		}
		b := beginAsync(db, true)
		waitAdmitting(t, db, 1)
		a.Idle() // its statement ended, and the session goes idle: it seals
		a.Seal()
		bt := mustWait(t, b, "a writer behind a sealed claimer")
		if got := headIDs(t, bt.View()); !slices.Equal(got, []int64{1}) {
			t.Fatalf("follower sees %v, want [1]", got)
		}
		bt.Rollback()
		time.Sleep(2 * db.settleWait)
		c := mustWait(t, beginAsync(db, true), "a writer behind a stale seal")
		if got := headIDs(t, c.View()); len(got) != 0 {
			t.Fatalf("a writer after the seal went stale sees %v, want []", got)
		}
		c.Rollback()
		a.Rollback()
	})
}
