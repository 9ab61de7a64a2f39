package objstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

func TestMemConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewMem() })
}

func TestCounterConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewCounter(objstore.NewMem()) })
}

func TestMemClone(t *testing.T) {
	ctx := context.Background()
	m := objstore.NewMem()
	if err := m.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if err := m.Put(ctx, "a", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "b", []byte("3")); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	got, err := c.Get(ctx, "a")
	if err != nil || string(got) != "1" {
		t.Fatalf("clone Get(a) = %q, %v; want 1", got, err)
	}
	if _, err := c.Get(ctx, "b"); err == nil {
		t.Fatal("clone sees a Put made after Clone")
	}
}

func TestCounterStats(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounter(objstore.NewMem())
	_ = c.Put(ctx, "a", []byte("12345"))
	_ = c.PutIfAbsent(ctx, "a", []byte("xx")) // ErrExists: an error, no bytes
	_ = c.PutIfAbsent(ctx, "b", []byte("xyz"))
	_, _ = c.Get(ctx, "a")
	_, _ = c.GetRange(ctx, "a", 1, 2)
	_, _ = c.Get(ctx, "missing")
	_, _ = c.List(ctx, "")
	_, _ = c.Stat(ctx, "a")
	_ = c.Delete(ctx, "b")
	want := objstore.Stats{
		Puts: 1, PutIfAbsents: 2, Gets: 2, GetRanges: 1, Lists: 1, Deletes: 1, Stats: 1,
		Errors: 2, BytesWritten: 8, BytesRead: 7,
	}
	got := c.Stats()
	if got != want {
		t.Fatalf("Stats = %+v\nwant    %+v", got, want)
	}
	if got.Ops() != 9 {
		t.Fatalf("Ops = %d, want 9", got.Ops())
	}
	if d := got.Sub(objstore.Stats{Puts: 1, BytesRead: 7}); d.Puts != 0 || d.BytesRead != 0 || d.Gets != 2 {
		t.Fatalf("Sub = %+v", d)
	}
}

func TestRecorderConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewRecorder(objstore.NewMem()) })
}

func TestRecorderTrace(t *testing.T) {
	ctx := context.Background()
	r := objstore.NewRecorder(objstore.NewMem())
	_ = r.Put(ctx, "wal/1", []byte("12345"))
	_ = r.PutIfAbsent(ctx, "wal/1", []byte("xx"))
	_, _ = r.Get(ctx, "wal/1")
	_, _ = r.GetRange(ctx, "wal/1", 1, 2)
	_, _ = r.GetRange(ctx, "wal/1", 3, -1)
	_, _ = r.Stat(ctx, "nope")
	_, _ = r.List(ctx, "wal/")
	_ = r.Delete(ctx, "//bad")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = r.Get(cctx, "wal/1")
	want := []string{
		"put wal/1 5B: ok",
		"put-if-absent wal/1 2B: exists",
		"get wal/1: 5B",
		"get-range wal/1 @1+2: 2B",
		"get-range wal/1 @3..: 2B",
		"stat nope: not found",
		"list wal/: 1 objects",
		"delete //bad: invalid key",
		"get wal/1: canceled",
	}
	got := r.Take()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Take()) != 0 {
		t.Fatal("Take did not clear")
	}
}
