package slate

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"pgregory.net/rapid"
)

// TestPinsModel writes, overwrites and deletes keys, pins the store by
// writing keys under PinPrefix, unpins by deleting them, and flushes,
// compacts, rewrites and reopens in any order. At every step, a snapshot at
// each live pin's seq reads exactly what the store held when that pin was
// written; pins that were deleted promise nothing.
func TestPinsModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		opts := testOpts()
		opts.PinPrefix = []byte("~pin/")
		opts.DisableAutoCompaction = rapid.Bool().Draw(t, "noAutoCompaction")
		mem := objstore.NewMem()
		open := func() *DB {
			d, err := Open(ctx, mem, opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return d
		}
		d := open()
		defer func() { d.Close(ctx) }()

		kv := map[string]string{}
		type pin struct {
			seq  uint64
			want map[string]string
		}
		pins := map[string]pin{} // live pin key → what it saw
		keys := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"})
		write := func(b *Batch) uint64 {
			seq, err := d.Write(ctx, b)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			return seq
		}
		check := func(t *rapid.T) {
			for name, p := range pins {
				s, err := d.SnapshotAt(p.seq)
				if err != nil {
					t.Fatalf("snapshot at %s (seq %d): %v", name, p.seq, err)
				}
				got := map[string]string{}
				it := s.Scan(ctx, nil, nil)
				for it.Next() {
					if k := string(it.Key()); len(k) < 5 || k[:5] != "~pin/" {
						got[k] = string(it.Value())
					}
				}
				if err := it.Close(); err != nil {
					t.Fatalf("scan at %s: %v", name, err)
				}
				s.Close()
				if !maps.Equal(got, p.want) {
					t.Fatalf("at pin %s (seq %d):\n got  %v\n want %v", name, p.seq, got, p.want)
				}
			}
		}
		n := 0
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				b := NewBatch()
				for _, k := range rapid.SliceOfNDistinct(keys, 1, 4, rapid.ID[string]).Draw(t, "keys") {
					n++
					v := fmt.Sprintf("%s%d", k, n)
					b.Put([]byte(k), []byte(v))
					kv[k] = v
				}
				write(b)
			},
			"delete": func(t *rapid.T) {
				k := keys.Draw(t, "key")
				b := NewBatch()
				b.Delete([]byte(k))
				write(b)
				delete(kv, k)
			},
			"pin": func(t *rapid.T) {
				n++
				name := fmt.Sprintf("~pin/%d", n)
				b := NewBatch()
				b.Put([]byte(name), []byte("x"))
				pins[name] = pin{seq: write(b), want: maps.Clone(kv)}
			},
			"unpin": func(t *rapid.T) {
				if len(pins) == 0 {
					t.Skip("no pins")
				}
				var names []string
				for k := range pins {
					names = append(names, k)
				}
				name := rapid.SampledFrom(names).Draw(t, "pin")
				b := NewBatch()
				b.Delete([]byte(name))
				write(b)
				delete(pins, name)
			},
			"flush": func(t *rapid.T) {
				if err := d.Flush(ctx); err != nil {
					t.Fatalf("flush: %v", err)
				}
			},
			"compact": func(t *rapid.T) {
				if err := d.Compact(ctx); err != nil {
					t.Fatalf("compact: %v", err)
				}
			},
			"rewrite": func(t *rapid.T) {
				if err := d.Rewrite(ctx); err != nil {
					t.Fatalf("rewrite: %v", err)
				}
			},
			"reopen": func(t *rapid.T) {
				if err := d.Close(ctx); err != nil {
					t.Fatalf("close: %v", err)
				}
				d = open()
			},
			"": check,
		})
	})
}

// TestUnpinnedVersionsGo checks that pins cost nothing once deleted: after
// the pin goes and the store is rewritten, no table holds the versions it
// kept.
func TestUnpinnedVersionsGo(t *testing.T) {
	ctx := context.Background()
	opts := testOpts()
	opts.PinPrefix = []byte("~pin/")
	d := mustOpen(t, objstore.NewMem(), opts)
	defer d.Close(ctx)
	put(t, d, "k", "old")
	put(t, d, "~pin/1", "x")
	put(t, d, "k", "new")
	if err := d.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	if got := versionsOf(t, d, "k"); got != 2 {
		t.Fatalf("pinned: %d versions of k kept, want 2", got)
	}
	put(t, d, "~pin/1", "<del>")
	if err := d.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	if got := versionsOf(t, d, "k"); got != 1 {
		t.Fatalf("unpinned: %d versions of k kept, want 1", got)
	}
}

// versionsOf counts the versions of key in the store's tables.
func versionsOf(t *testing.T, d *DB, key string) int {
	t.Helper()
	ctx := context.Background()
	d.mu.Lock()
	man := d.man
	d.mu.Unlock()
	var srcs []internalIter
	for _, info := range man.l0 {
		srcs = append(srcs, newSSTIter(ctx, d.tables, info, true))
	}
	for _, r := range man.runs {
		srcs = append(srcs, &runIter{ctx: ctx, c: d.tables, tables: r.tables, scan: true})
	}
	m := newMergeIter(srcs)
	defer m.close()
	if err := m.seek([]byte(key)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for m.ok() && string(m.cur().key) == key {
		n++
		if err := m.next(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestPinValue: a pin whose value names another seq keeps that one too,
// after the key that pinned it first is gone.
func TestPinValue(t *testing.T) {
	ctx := context.Background()
	opts := testOpts()
	opts.PinPrefix = []byte("~pin/")
	opts.PinValue = func(v []byte) (uint64, bool) {
		var seq uint64
		_, err := fmt.Sscanf(string(v), "seq:%d", &seq)
		return seq, err == nil
	}
	d := mustOpen(t, objstore.NewMem(), opts)
	defer d.Close(ctx)
	put(t, d, "k", "old")
	at := put(t, d, "~pin/1", "x")
	put(t, d, "k", "new")
	put(t, d, "~pin/2", fmt.Sprintf("seq:%d", at))
	put(t, d, "~pin/1", "<del>")
	if err := d.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := d.SnapshotAt(at)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get(ctx, []byte("k")); err != nil || string(v) != "old" {
		t.Fatalf("k at the seq pin 2 names: %q, %v", v, err)
	}
}
