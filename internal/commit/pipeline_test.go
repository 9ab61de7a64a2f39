package commit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/slate"
)

// walGate holds WAL PUTs while closed, so a test can see commits that are
// submitted but not durable; open lets them through (or fails them).
type walGate struct {
	mu      sync.Mutex
	closed  bool
	fail    bool
	release chan struct{}
	entered chan struct{}
}

func (g *walGate) hook(c fault.Call) fault.Action {
	if c.Op != fault.OpPutIfAbsent || !strings.HasPrefix(c.Key, "wal/") {
		return fault.Pass
	}
	g.mu.Lock()
	closed, release := g.closed, g.release
	g.mu.Unlock()
	if !closed {
		return fault.Pass
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-release
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail {
		return fault.Fail
	}
	return fault.Pass
}

func (g *walGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.release, g.entered = true, make(chan struct{}), make(chan struct{}, 1)
}

func (g *walGate) open(fail bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.fail = false, fail
	close(g.release)
}

func newGatedHarness(t *testing.T) (*harness, *walGate) {
	t.Helper()
	ctx := context.Background()
	g := &walGate{}
	store := fault.New(objstore.NewMem(), fault.Config{Hook: g.hook})
	kv, err := slate.Open(ctx, store, slate.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close(context.Background()) })
	h := &harness{t: t, ctx: ctx, store: store, kv: kv}
	h.pipe = New(kv, Options{})
	h.srv = catalog.NewServer(catalog.Options{Committer: h.pipe})
	h.db = h.srv.Database("lake")
	return h, g
}

// commitLatest commits fn's writes from a transaction pinned to the newest
// version, durable or not, without waiting.
func (h *harness) commitLatest(fn func(tx *catalog.Txn)) <-chan error {
	tx := h.db.BeginLatest()
	fn(tx)
	done := make(chan error, 1)
	go func() { done <- tx.Commit(h.ctx) }()
	return done
}

// snapshotCommit is a snapshot-minting commit creating a table (by its
// change string only).
func (h *harness) snapshotCommit(snap int64, table string) func(tx *catalog.Txn) {
	return func(tx *catalog.Txn) {
		s := fmt.Sprint(snap)
		h.insert(tx, "ducklake_snapshot", s, "2026-01-01 00:00:09+00", s, "2", "0")
		h.insert(tx, "ducklake_snapshot_changes", s, `created_table:"main".`+fmt.Sprintf("%q", table), "NULL", "NULL", "NULL")
	}
}

func (h *harness) waitCurrentSeq(seq uint64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.db.Current().Seq() < seq {
		if time.Now().After(deadline) {
			h.t.Fatalf("current version stuck at seq %d, want %d", h.db.Current().Seq(), seq)
		}
		time.Sleep(time.Millisecond)
	}
}

func pending(t *testing.T, name string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) while the commit before it is not durable", name, err)
	case <-time.After(30 * time.Millisecond):
	}
}

func result(t *testing.T, name string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never returned", name)
		return nil
	}
}

// twoQueued holds the WAL PUT of commit a (snapshot 2), queues commit b
// (snapshot 3) behind it and starts the read-only COMMIT of a transaction
// pinned to b's version. It returns once a and b are published to writers.
func (h *harness) twoQueued(g *walGate) (base *catalog.Version, a, b, ro <-chan error) {
	h.t.Helper()
	base = h.db.Current()
	g.close()
	a = h.commitLatest(h.snapshotCommit(2, "a"))
	<-g.entered // a's WAL PUT is in flight
	h.waitCurrentSeq(base.Seq() + 1)
	b = h.commitLatest(h.snapshotCommit(3, "b"))
	h.waitCurrentSeq(base.Seq() + 2)
	tx := h.db.BeginLatest() // reads b's version, writes nothing
	roDone := make(chan error, 1)
	go func() { roDone <- tx.Commit(h.ctx) }()
	return base, a, b, roDone
}

// A commit built on one still being made durable is validated and queued
// behind it at once (pipelining); neither is acknowledged, nor shown to
// readers, before it is durable, and a transaction that only read the
// newer version waits for it too.
func TestPipelinedCommitsLandInOrder(t *testing.T) {
	h, g := newGatedHarness(t)
	h.initLake()
	base, a, b, roDone := h.twoQueued(g)

	pending(t, "commit a", a)
	pending(t, "commit b", b)
	pending(t, "read-only commit", roDone)
	if h.db.Durable() != base {
		t.Fatal("a reader's version moved before any commit was durable")
	}
	if r := h.db.Begin(); r.Base() != base {
		t.Fatal("Begin pinned a version that is not durable")
	}

	g.open(false)
	for name, ch := range map[string]<-chan error{"a": a, "b": b, "read-only": roDone} {
		if err := result(t, name, ch); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	if h.db.Durable() != h.db.Current() || h.db.Current().Seq() != base.Seq()+2 {
		t.Fatalf("durable seq %d, current %d; want both %d", h.db.Durable().Seq(), h.db.Current().Seq(), base.Seq()+2)
	}
	h.checkStore()
}

// If the write of a pipelined commit fails, every commit queued behind it
// fails, a read of the versions it produced is never acknowledged, and
// readers never saw them.
func TestPipelinedFailureFailsEveryLaterCommit(t *testing.T) {
	h, g := newGatedHarness(t)
	h.initLake()
	base, a, b, roDone := h.twoQueued(g)

	g.open(true)
	for name, ch := range map[string]<-chan error{"a": a, "b": b} {
		if err := result(t, name, ch); !errors.Is(err, ErrStoreFailed) {
			t.Fatalf("commit %s after its WAL write failed: %v, want ErrStoreFailed", name, err)
		}
	}
	if err := result(t, "read-only", roDone); err == nil || !strings.Contains(err.Error(), "never made durable") {
		t.Fatalf("read-only commit of a lost version: %v", err)
	}
	if h.pipe.Failed() == nil {
		t.Fatal("pipeline does not report the failure")
	}
	if h.db.Durable() != base {
		t.Fatal("a lost version became the durable one")
	}
	if err := h.commit(h.snapshotCommit(2, "c")); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("commit after the failure: %v, want ErrStoreFailed", err)
	}
}

// The duplicate-identity check sees rows of commits that are queued but
// not durable, which the store does not show yet.
func TestPipelinedDuplicateIdentityIsRefused(t *testing.T) {
	h, g := newGatedHarness(t)
	h.initLake()
	base := h.db.Current()

	g.close()
	a := h.commitLatest(func(tx *catalog.Txn) {
		h.snapshotCommit(2, "a")(tx)
		h.insert(tx, "ducklake_file_column_stats", "0", "1", "1", "10", "10", "0", "1", "9", "NULL", "NULL")
	})
	<-g.entered
	h.waitCurrentSeq(base.Seq() + 1)
	b := h.commitLatest(func(tx *catalog.Txn) {
		h.snapshotCommit(3, "b")(tx)
		h.insert(tx, "ducklake_file_column_stats", "0", "1", "1", "10", "10", "0", "1", "9", "NULL", "NULL")
	})
	err := result(t, "b", b)
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "already stored") {
		t.Fatalf("commit b repeating a's row: %v, want a shape error (already stored)", err)
	}
	g.open(false)
	if err := result(t, "a", a); err != nil {
		t.Fatalf("commit a: %v", err)
	}
	h.checkStore()
}
