package slate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

func testOpts() Options {
	return Options{MemtableBytes: 4 << 10, BlockSize: 256, MaxSSTBytes: 2 << 10, GCInterval: -1, MaxWALsPerMemtable: 8}
}

func mustOpen(t testing.TB, s objstore.Store, o Options) *DB {
	t.Helper()
	d, err := Open(context.Background(), s, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return d
}

func put(t testing.TB, d *DB, kv ...string) uint64 {
	t.Helper()
	b := NewBatch()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<del>" {
			b.Delete([]byte(kv[i]))
		} else {
			b.Put([]byte(kv[i]), []byte(kv[i+1]))
		}
	}
	seq, err := d.Write(context.Background(), b)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return seq
}

func scanAll(t testing.TB, it *Iterator) map[string]string {
	t.Helper()
	defer it.Close()
	out := map[string]string{}
	var prev []byte
	for it.Next() {
		if prev != nil && bytes.Compare(prev, it.Key()) >= 0 {
			t.Fatalf("scan out of order: %q then %q", prev, it.Key())
		}
		prev = clone(it.Key())
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	return out
}

func TestBasicLifecycle(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	d := mustOpen(t, s, testOpts())
	for i := 0; i < 200; i++ {
		put(t, d, fmt.Sprintf("k%04d", i), fmt.Sprintf("v%d", i), fmt.Sprintf("x%04d", i), "y")
	}
	put(t, d, "k0005", "<del>")
	snap, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, "k0006", "changed")
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := snap.Get(ctx, []byte("k0006")); err != nil || string(v) != "v6" {
		t.Fatalf("snapshot get = %q, %v", v, err)
	}
	snap.Close()
	if _, err := d.Get(ctx, []byte("k0005")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if v, _ := d.Get(ctx, []byte("k0006")); string(v) != "changed" {
		t.Fatalf("k0006 = %q", v)
	}
	got := scanAll(t, d.ScanPrefix(ctx, []byte("k")))
	if len(got) != 199 {
		t.Fatalf("prefix scan got %d keys", len(got))
	}
	st := d.Stats()
	if st.Flushes == 0 || st.WALObjects == 0 {
		t.Fatalf("stats: %+v", st)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d2 := mustOpen(t, s, testOpts())
	defer d2.Close(ctx)
	got2 := scanAll(t, d2.Scan(ctx, nil, nil))
	if len(got2) != 399 || got2["k0006"] != "changed" || got2["x0100"] != "y" {
		t.Fatalf("after reopen: %d keys", len(got2))
	}
	_ = time.Second
}
