package slate

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
)

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestBlockCacheBoundsMemory: point reads of far more data than the block
// cache holds keep the heap within the cache's bound. Decoded, a block of
// small entries holds several times its encoded size (its entries, the
// arena its keys are rebuilt into, the encoded bytes); a cache bounded by
// encoded size grows the heap by that many times its bound.
func TestBlockCacheBoundsMemory(t *testing.T) {
	ctx := context.Background()
	const bound = 2 << 20
	opts := Options{BlockCacheBytes: bound, GCInterval: -1}
	d := mustOpen(t, objstore.NewMem(), opts)
	defer d.Close(ctx)
	const n = 200_000 // about 8 MiB encoded: four times the bound
	key := func(i int) string { return fmt.Sprintf("k%07d", i) }
	for i := 0; i < n; i += 1000 {
		b := NewBatch()
		for j := i; j < i+1000; j++ {
			b.Put([]byte(key(j)), []byte(fmt.Sprintf("v%015d", j)))
		}
		if _, err := d.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	for i := 0; i < n; i += 7 {
		if _, err := d.Get(ctx, []byte(key(i))); err != nil {
			t.Fatal(err)
		}
	}
	grown := heapInUse() - before
	if used := d.Stats().BlockCacheBytes; used <= bound/2 || used > bound {
		t.Fatalf("the cache holds %d bytes after reads of four times its bound %d", used, bound)
	}
	if grown > 3*bound {
		t.Fatalf("reads through a %d-byte block cache grew the heap by %d bytes", bound, grown)
	}
	t.Logf("heap grown by %d bytes through a %d-byte cache", grown, bound)
	runtime.KeepAlive(d)
}
