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

// crashStop stops a writer as a crash would: its commit loop ends once the
// queue is written, and nothing is flushed or closed.
func crashStop(d *DB) {
	d.mu.Lock()
	d.closing = true
	d.commitCond.Broadcast()
	d.mu.Unlock()
	<-d.commitDone
	d.cancel()
	d.wg.Wait()
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

// TestBatchOwnership pins Batch's contract: Put and Delete copy their
// arguments, so a caller may reuse its buffers at once; PutOwned and
// DeleteOwned keep them, for a caller that hands them over.
func TestBatchOwnership(t *testing.T) {
	ctx := context.Background()
	d := mustOpen(t, objstore.NewMem(), testOpts())
	defer d.Close(ctx)
	put(t, d, "gone", "x")

	key, val := []byte("copied"), []byte("v1")
	b := NewBatch()
	b.Put(key, val)
	dk := []byte("gone")
	b.Delete(dk)
	copy(key, "XXXXXX") // reused by the caller after Put
	copy(val, "ZZ")
	copy(dk, "XXXX")
	ok, ov := []byte("owned"), []byte("v2")
	b.PutOwned(ok, ov)
	if _, err := d.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Get(ctx, []byte("copied")); err != nil || string(v) != "v1" {
		t.Fatalf("Put did not copy: copied = %q, %v", v, err)
	}
	if _, err := d.Get(ctx, []byte("gone")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete did not copy its key: gone still there (%v)", err)
	}
	if v, err := d.Get(ctx, []byte("owned")); err != nil || string(v) != "v2" {
		t.Fatalf("owned = %q, %v", v, err)
	}
	if len(b.ops) != 3 || &b.ops[2].key[0] != &ok[0] || &b.ops[2].value[0] != &ov[0] {
		t.Fatalf("PutOwned copied its arguments")
	}
	if s := NewBatchSized(7); cap(s.ops) != 7 || s.Len() != 0 {
		t.Fatalf("NewBatchSized(7): cap %d len %d", cap(s.ops), s.Len())
	}
}
