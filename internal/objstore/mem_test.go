package objstore_test

import (
	"context"
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
