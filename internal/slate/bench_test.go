package slate

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// loadKeys writes n keys (8-byte big-endian counters under a 12-byte
// catalog-like prefix, 32-byte values) in batches of 1000 and compacts them
// into one sorted run.
func loadKeys(b testing.TB, s objstore.Store, n int) *DB {
	ctx := context.Background()
	d := mustOpen(b, s, Options{GCInterval: -1})
	val := make([]byte, 32)
	key := make([]byte, 20)
	copy(key, "catalog/t/1/")
	for i := 0; i < n; {
		batch := NewBatch()
		for j := 0; j < 1000 && i < n; j, i = j+1, i+1 {
			binary.BigEndian.PutUint64(key[12:], uint64(i))
			batch.Put(key, val)
		}
		if _, err := d.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	d.opts.L0CompactionTrigger = 1
	if err := d.Compact(ctx); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkScan1M measures a full scan of 1M keys held in sorted tables.
// It reports keys/s; the target is at least 1M keys/s.
func BenchmarkScan1M(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	d := loadKeys(b, objstore.NewMem(), n)
	defer d.Close(ctx)
	runtime.GC()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		it := d.Scan(ctx, nil, nil)
		c := 0
		for it.Next() {
			c++
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
		if c != n {
			b.Fatalf("scanned %d keys", c)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "keys/s")
	// On a shared machine wall time mostly measures the neighbours; CPU
	// time (all threads of the process, GC included) does not.
	b.ReportMetric(float64(n*b.N)/(cpuTime()-cpu0).Seconds(), "keys/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReopenLarge measures reopening a store holding about 1 GiB of sorted
// tables and 10,000 WAL objects not yet flushed. It needs
// SLATE_LARGE=1 (several GiB of memory and a minute to build).
func TestReopenLarge(t *testing.T) {
	if os.Getenv("SLATE_LARGE") == "" {
		t.Skip("set SLATE_LARGE=1 to build a 1 GiB store and time its reopen")
	}
	ctx := context.Background()
	gib := 1 << 30
	if v, err := strconv.Atoi(os.Getenv("SLATE_LARGE_MB")); err == nil && v > 0 {
		gib = v << 20
	}
	mem := objstore.NewMem()
	d := mustOpen(t, mem, Options{GCInterval: -1, MemtableBytes: 64 << 20, MaxWALsPerMemtable: 1 << 30, MaxSSTBytes: 64 << 20})
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte(i * 7)
	}
	const perBatch = 1000
	written := 0
	t0 := time.Now()
	for i := 0; written < gib; i++ {
		b := NewBatch()
		for j := 0; j < perBatch; j++ {
			b.Put([]byte(fmt.Sprintf("catalog/%08d/%04d", i, j)), val)
		}
		if _, err := d.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		written += perBatch * (len(val) + 17)
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	// 10,000 small WAL objects after the flushed point.
	for i := 0; i < 10_000; i++ {
		put(t, d, fmt.Sprintf("wal/%05d", i), "v")
	}
	built := time.Since(t0)
	st := d.Stats()
	// Crash-stop the writer: nothing more is flushed.
	crashStop(d)

	t1 := time.Now()
	d2, err := Open(ctx, mem, Options{GCInterval: -1, MaxWALsPerMemtable: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	reopen := time.Since(t1)
	defer d2.Close(ctx)
	if v, err := d2.Get(ctx, []byte("wal/09999")); err != nil || string(v) != "v" {
		t.Fatalf("last WAL write: %q, %v", v, err)
	}
	if v, err := d2.Get(ctx, []byte("catalog/00000000/0000")); err != nil || len(v) != len(val) {
		t.Fatalf("first table key: %v", err)
	}
	t.Logf("built %d MiB of tables (%d flush bytes) + 10000 WAL objects in %v; reopen replayed %d WAL objects in %v",
		written>>20, st.FlushBytes, built, d2.Stats().ReplayedWALs, reopen)
	if reopen > 10*time.Second {
		t.Fatalf("reopen took %v, want < 10s", reopen)
	}
}
