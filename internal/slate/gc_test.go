package slate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
)

func countObjects(t *testing.T, s objstore.Store) map[string]int {
	t.Helper()
	infos, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, in := range infos {
		kind := in.Key[:strings.IndexByte(in.Key, '/')]
		if kind == "wal" && isFence(in.Size) {
			kind = "fence"
		}
		out[kind]++
	}
	return out
}

// TestGCReclaims checks that GC removes superseded objects, keeps fences
// and the data, and respects the grace period.
func TestGCReclaims(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	future := time.Now()
	opts := testOpts()
	opts.L0CompactionTrigger = 2
	opts.Now = func() time.Time { return future }
	want := map[string]string{}
	for round := 0; round < 3; round++ { // three writers, and a fourth below: four fence runs
		d := mustOpen(t, s, opts)
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf("k%03d", (i*7+round)%120)
			put(t, d, k, fmt.Sprint(round, i))
			want[k] = fmt.Sprint(round, i)
		}
		if err := d.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d := mustOpen(t, s, opts)
	defer d.Close(ctx)
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	before := countObjects(t, s)
	// Within the grace period nothing goes.
	if n, err := d.GC(ctx); err != nil || n != 0 {
		t.Fatalf("GC inside grace deleted %d (%v)", n, err)
	}
	future = time.Now().Add(time.Hour)
	n, err := d.GC(ctx)
	if err != nil || n == 0 {
		t.Fatalf("GC deleted %d (%v)", n, err)
	}
	after := countObjects(t, s)
	t.Logf("objects before %v, after %v", before, after)
	if after["fence"] != before["fence"] || after["fence"] != 4*MaxWALInFlight {
		t.Fatalf("fences changed: %d -> %d", before["fence"], after["fence"])
	}
	if after["manifest"] != 1 || after["compacted"] > before["compacted"] || after["wal"] >= before["wal"] {
		t.Fatalf("GC left too much: %v", after)
	}
	got, err := dump(ctx, d)
	if err != nil || len(got) != len(want) {
		t.Fatalf("after GC: %d keys, %v", len(got), err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// On a local directory, the objects GC deletes keep their files for reuse
// (localdir's recycling): after a GC round the root holds recycled files,
// no more than the objects deleted.
func TestGCRecyclesLocalFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	opts := testOpts()
	opts.L0CompactionTrigger = 2
	opts.Now = func() time.Time { return now }
	d := mustOpen(t, s, opts)
	defer d.Close(ctx)
	for i := 0; i < 200; i++ {
		put(t, d, fmt.Sprintf("k%03d", i%50), fmt.Sprint(i))
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	now = time.Now().Add(time.Hour) // every object past the grace
	deleted, err := d.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	recycled := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".objstore-tmp-pool-r-") {
			recycled++
		}
	}
	if deleted == 0 || recycled == 0 || recycled > deleted {
		t.Fatalf("GC deleted %d objects and %d files wait for reuse; want some, no more than deleted", deleted, recycled)
	}
}

// TestZombieAfterWALGC is the regression test for SlateDB #352/#1622: the
// new writer flushes past the old writer's next WAL id and GC runs; the old
// writer's next write must still be fenced, because fences are never
// collected.
func TestZombieAfterWALGC(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	opts := testOpts()
	opts.Now = func() time.Time { return time.Now().Add(time.Hour) }
	a := mustOpen(t, s, opts)
	put(t, a, "a", "1")
	b := mustOpen(t, s, opts)
	for i := 0; i < 20; i++ {
		put(t, b, fmt.Sprint("b", i), "x")
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(ctx, batchOf("a", "2")); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie write after GC: %v, want ErrFenced", err)
	}
	if err := a.Flush(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie flush: %v", err)
	}
	if _, err := a.GC(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie GC: %v", err)
	}
	_ = a.Close(ctx)
	if v, err := b.Get(ctx, []byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("a = %q, %v", v, err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestZombieManifestAfterGC: a stalled writer whose manifest id was
// garbage-collected must not believe its re-created manifest won.
func TestZombieManifestAfterGC(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	opts := testOpts()
	opts.Now = func() time.Time { return time.Now().Add(time.Hour) }
	a := mustOpen(t, s, opts)
	put(t, a, "a", "1")
	b := mustOpen(t, s, opts)
	for i := 0; i < 5; i++ {
		put(t, b, fmt.Sprint("b", i), "x")
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.GC(ctx); err != nil {
		t.Fatal(err)
	}
	// A's cached manifest id+1 was deleted by GC; its flush re-creates it.
	if err := a.Flush(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie flush: %v, want ErrFenced", err)
	}
	_ = a.Close(ctx)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, s, opts)
	defer c.Close(ctx)
	got, err := dump(ctx, c)
	if err != nil || got["a"] != "1" || got["b4"] != "x" {
		t.Fatalf("after zombie: %v %v", got, err)
	}
}

func batchOf(kv ...string) *Batch {
	b := NewBatch()
	for i := 0; i < len(kv); i += 2 {
		b.Put([]byte(kv[i]), []byte(kv[i+1]))
	}
	return b
}

// TestIdleWriterNoticesFence: a writer that does not write learns it was
// fenced from its manifest poll.
func TestIdleWriterNoticesFence(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	opts := testOpts()
	opts.FencePollInterval = 5 * time.Millisecond
	a := mustOpen(t, s, opts)
	defer a.Close(ctx)
	put(t, a, "a", "1")
	if err := a.Err(); err != nil {
		t.Fatalf("healthy writer: %v", err)
	}
	b := mustOpen(t, s, opts)
	defer b.Close(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for !errors.Is(a.Err(), ErrFenced) {
		if time.Now().After(deadline) {
			t.Fatalf("idle writer never noticed the fence: %v", a.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("new writer: %v", err)
	}
	if _, err := a.Write(ctx, batchOf("x", "y")); !errors.Is(err, ErrFenced) {
		t.Fatalf("write after fence noticed: %v", err)
	}
}

// TestGCKeepsTablesOfWorkUnderWay: a sorted table that no manifest
// references yet but that was written after the latest manifest may be the
// output of a flush or compaction still running — one that has run longer
// than the grace period. Neither the writer's GC nor `moraine gc`'s plan
// deletes it; an unreferenced table older than the latest manifest is
// garbage and goes.
func TestGCKeepsTablesOfWorkUnderWay(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	opts := testOpts()
	opts.Now = func() time.Time { return time.Now().Add(time.Hour) } // everything is past grace
	d := mustOpen(t, s, opts)
	defer d.Close(ctx)
	put(t, d, "a", "1")
	orphan := sstName(newULID(time.Now()))
	if err := s.Put(ctx, orphan, []byte("an abandoned output")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := d.Flush(ctx); err != nil { // publishes a newer manifest
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	inFlight := sstName(newULID(time.Now()))
	if err := s.Put(ctx, inFlight, []byte("a compaction's first output")); err != nil {
		t.Fatal(err)
	}
	plan, err := GCPlan(ctx, s, time.Minute, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]bool{}
	for _, in := range plan {
		planned[in.Key] = true
	}
	if !planned[orphan] || planned[inFlight] {
		t.Fatalf("gc plan: orphan %v (want true), in-flight %v (want false)", planned[orphan], planned[inFlight])
	}
	if _, err := d.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, inFlight); err != nil {
		t.Fatalf("the writer's GC deleted a table written after the latest manifest: %v", err)
	}
	if _, err := s.Stat(ctx, orphan); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the orphan survived GC: %v", err)
	}
	if got, err := d.Get(ctx, []byte("a")); err != nil || string(got) != "1" {
		t.Fatalf("a = %q, %v", got, err)
	}
}
