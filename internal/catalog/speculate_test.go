package catalog

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestSealedFollowerWaitsForFate: a transaction pinned on a sealed version
// is acknowledged only once that version's transaction decided — a commit
// waits and then lands on it, a read-only COMMIT fails with a
// serialization error (40001) if the sealed writes never land — and a
// follower of a follower waits for the whole chain.
func TestSealedFollowerWaitsForFate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := setup(t)
		insert := func(tx *Txn, id int64) {
			t.Helper()
			if _, err := tx.InsertRow("public", "snap", snapRow(id, "x")); err != nil {
				t.Fatal(err)
			}
		}
		commitAsync := func(tx *Txn) <-chan error {
			ch := make(chan error, 1)
			go func() { ch <- tx.Commit(ctx) }()
			return ch
		}
		notYet := func(ch <-chan error, what string) {
			t.Helper()
			select {
			case err := <-ch:
				t.Fatalf("%s returned (%v) before the sealed version was decided", what, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		head := db.Current()

		// a seals 1; b follows a and writes 2; c follows b and writes 3.
		a := db.Begin()
		insert(a, 1)
		va := a.Seal()
		b := db.BeginOn(va)
		insert(b, 2)
		vb := b.Seal()
		if !vb.Extends(head) || !vb.Extends(va) || va.Extends(vb) {
			t.Fatal("Extends does not follow the chain of sealed versions")
		}
		c := db.BeginOn(vb)
		insert(c, 3)
		cDone, bDone := commitAsync(c), commitAsync(b)
		notYet(bDone, "the follower's commit")
		notYet(cDone, "the follower's follower's commit")
		if db.Current() != head {
			t.Fatal("a follower published before the sealed version landed")
		}
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		// The followers may land on top of va as soon as a's commit returns,
		// so the check is on va's fate, not on what is current by now: va
		// lands only if a's commit published it itself.
		if va.spec.state.Load() != specLanded {
			t.Fatal("a transaction that committed its sealed writes did not publish the sealed version itself")
		}
		for _, ch := range []<-chan error{bDone, cDone} {
			select {
			case err := <-ch:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a follower still waits after the sealed version landed")
			}
		}
		if vb.spec.state.Load() != specLanded {
			t.Fatal("the follower that committed its sealed writes on the landed version did not publish its sealed version itself")
		}
		tb, _ := db.Current().Table("public", "snap")
		if tb.Len() != 3 {
			t.Fatalf("%d rows after the chain landed, want 3", tb.Len())
		}

		// A read-only follower of a sealed version that is rolled back.
		d := db.Begin()
		insert(d, 4)
		vd := d.Seal()
		r := db.BeginOn(vd)
		rDone := commitAsync(r)
		notYet(rDone, "the read-only follower's COMMIT")
		d.Rollback()
		err := <-rDone
		var ce *Error
		if !errors.Is(err, ErrSerialization) || !errors.As(err, &ce) || ce.Code != "40001" {
			t.Fatalf("read-only follower of a rolled-back seal: %v", err)
		}
		if vd.Speculative() || vd.Extends(db.Current()) {
			t.Fatal("a rolled-back sealed version is still pinnable")
		}
		if err := db.WaitDurable(ctx, vd); !errors.Is(err, ErrSerialization) {
			t.Fatalf("WaitDurable of a failed sealed version: %v", err)
		}
	})
}

// TestSealedWaitBounded: a follower does not wait at its COMMIT longer than
// Options.SealedWait for a sealer that holds its transaction open: it fails
// with a serialization error, and the sealer can still commit after.
func TestSealedWaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 50 * time.Millisecond
		db := setupWith(t, Options{SealedWait: wait})
		a := db.Begin()
		if _, err := a.InsertRow("public", "snap", snapRow(1, "a")); err != nil {
			t.Fatal(err)
		}
		va := a.Seal()
		f := db.BeginOn(va)
		if _, err := f.InsertRow("public", "snap", snapRow(2, "f")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := f.Commit(ctx)
		if el := time.Since(start); !errors.Is(err, ErrSerialization) || el < wait || el > 50*wait {
			t.Fatalf("follower of an idle sealer: %v after %v, want a serialization error after ~%v", err, el, wait)
		}
		if !va.Speculative() {
			t.Fatal("a follower's timeout decided the sealer's fate")
		}
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		tb, _ := db.Current().Table("public", "snap")
		if db.Current() != va || tb.Len() != 1 {
			t.Fatalf("after the sealer's commit: current is the sealed version %v, %d rows; want true, 1", db.Current() == va, tb.Len())
		}
	})
}
