package slate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
)

// buildCorpusStore writes a DB with data in a sorted run, in L0 tables and
// in WAL objects not yet flushed, and returns the store and its contents.
func buildCorpusStore(t *testing.T) (*objstore.Mem, map[string]string) {
	ctx := context.Background()
	mem := objstore.NewMem()
	opts := Options{MemtableBytes: 1 << 20, BlockSize: 128, MaxSSTBytes: 512, GCInterval: -1, DisableAutoCompaction: true}
	d := mustOpen(t, mem, opts)
	want := map[string]string{}
	w := func(i int) {
		k, v := fmt.Sprintf("key/%03d", i%60), fmt.Sprintf("value-%d", i)
		put(t, d, k, v)
		want[k] = v
	}
	put(t, d, "gone", "soon")
	for i := 0; i < 60; i++ {
		w(i)
	}
	put(t, d, "gone", "<del>")
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 60; i < 90; i++ {
		w(i)
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	d.opts.L0CompactionTrigger = 2
	if err := d.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 90; i < 110; i++ {
		w(i)
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 110; i < 125; i++ {
		w(i)
	}
	// Leave the last writes in the WAL only: stop without flushing.
	crashStop(d)
	m := d.man
	if len(m.runs) == 0 || len(m.l0) == 0 {
		t.Fatalf("corpus lacks runs or L0: %d runs, %d L0", len(m.runs), len(m.l0))
	}
	return mem, want
}

// checkOpen opens a writer on s and reads everything; the outcome must be
// ErrCorrupt somewhere or exactly want.
func checkOpen(t *testing.T, s objstore.Store, want map[string]string, what string) (corrupt bool) {
	ctx := context.Background()
	d, err := Open(ctx, s, Options{GCInterval: -1, DisableAutoCompaction: true, MemtableBytes: 1 << 20})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return true
		}
		t.Fatalf("%s: open: %v", what, err)
	}
	defer d.Close(ctx)
	got, err := dump(ctx, d)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return true
		}
		t.Fatalf("%s: scan: %v", what, err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: wrong data:\n got  %v\n want %v", what, got, want)
	}
	for k, v := range want {
		g, err := d.Get(ctx, []byte(k))
		if errors.Is(err, ErrCorrupt) {
			return true
		}
		if err != nil || string(g) != v {
			t.Fatalf("%s: get %s = %q, %v; want %q", what, k, g, err, v)
		}
	}
	if _, err := d.Get(ctx, []byte("gone")); !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: deleted key: %v", what, err)
	}
	return false
}

// TestCorruption flips bytes of every object and deletes objects the
// manifest or WAL range needs: each case must read as ErrCorrupt or as the
// exact data, never as wrong data.
func TestCorruption(t *testing.T) {
	ctx := context.Background()
	base, want := buildCorpusStore(t)
	checkOpen(t, base.Clone(), want, "pristine")
	if err := Check(ctx, base); err != nil {
		t.Fatalf("check on the pristine store: %v", err)
	}

	perObject := 48
	if os.Getenv("SLATE_SOAK") != "" {
		perObject = 1 << 30
	}
	rng := rand.New(rand.NewPCG(1, 2))
	objs, err := base.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	corrupt, cases := 0, 0
	var lastWAL string
	for _, o := range objs {
		if _, ok := parseID(o.Key, walPrefix, walSuffix); ok {
			lastWAL = o.Key
		}
	}
	for _, o := range objs {
		data, _ := base.Get(ctx, o.Key)
		var positions []int
		if len(data) <= perObject {
			for i := range data {
				positions = append(positions, i)
			}
		} else {
			for i := 0; i < 8; i++ {
				positions = append(positions, i, len(data)-1-i)
			}
			for len(positions) < perObject {
				positions = append(positions, rng.IntN(len(data)))
			}
		}
		for _, p := range positions {
			s := base.Clone()
			bad := append([]byte(nil), data...)
			bad[p] ^= byte(1 + rng.IntN(255))
			if err := s.Put(ctx, o.Key, bad); err != nil {
				t.Fatal(err)
			}
			cases++
			what := fmt.Sprintf("%s byte %d", o.Key, p)
			checkErr := Check(ctx, s)
			if checkErr != nil && !errors.Is(checkErr, ErrCorrupt) {
				t.Fatalf("%s: check: %v", what, checkErr)
			}
			if checkOpen(t, s, want, what) {
				corrupt++
				if checkErr == nil {
					t.Fatalf("%s: reads found corruption that Check missed", what)
				}
			}
		}
		// Truncation (a torn object).
		if len(data) > 1 {
			s := base.Clone()
			_ = s.Put(ctx, o.Key, data[:len(data)/2])
			cases++
			if checkOpen(t, s, want, o.Key+" truncated") {
				corrupt++
			}
		}
		// Removal: the newest WAL object and old manifests can vanish
		// undetectably (as in SlateDB) and are not tested here.
		_, isSST := parseSSTName(o.Key)
		_, isWAL := parseID(o.Key, walPrefix, walSuffix)
		if isSST || (isWAL && o.Key != lastWAL && len(data) > 0) {
			s := base.Clone()
			_ = s.Delete(ctx, o.Key)
			cases++
			if checkOpen(t, s, want, o.Key+" deleted") {
				corrupt++
			}
		}
	}
	t.Logf("%d objects, %d cases, %d detected as corrupt, the rest read correctly", len(objs), cases, corrupt)
	if corrupt == 0 {
		t.Fatal("no corruption was ever detected")
	}
}
