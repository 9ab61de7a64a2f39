package slate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"pgregory.net/rapid"
)

// model is the expected contents: every acknowledged batch applied in
// order, plus at most one batch whose outcome is unknown (its write failed
// or the store crashed under it).
type model struct {
	kv      map[string]string
	pending []op // nil: no batch in doubt
}

func applyOps(kv map[string]string, ops []op) {
	for _, o := range ops {
		if o.kind == kindPut {
			kv[string(o.key)] = string(o.value)
		} else {
			delete(kv, string(o.key))
		}
	}
}

// resolve checks the DB's full contents against the model after a reopen:
// the batch in doubt must be wholly present or wholly absent.
func (m *model) resolve(t *rapid.T, got map[string]string) {
	if m.pending != nil {
		with := maps.Clone(m.kv)
		applyOps(with, m.pending)
		switch {
		case maps.Equal(got, m.kv):
		case maps.Equal(got, with):
			m.kv = with
		default:
			t.Fatalf("after reopen the batch in doubt is partly present or data is wrong:\n got  %v\n want %v\n or   %v", got, m.kv, with)
		}
		m.pending = nil
		return
	}
	if !maps.Equal(got, m.kv) {
		t.Fatalf("after reopen:\n got  %v\n want %v", got, m.kv)
	}
}

func dump(ctx context.Context, d *DB) (map[string]string, error) {
	it := d.Scan(ctx, nil, nil)
	defer it.Close()
	out := map[string]string{}
	for it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out, it.Err()
}

// crashHarness runs a DB over a fault store that may crash at a chosen
// operation; reopening wraps the same underlying Mem in a fresh wrapper.
type crashHarness struct {
	snaps []modelSnap
	mem   *objstore.Mem
	fs    *fault.Store
	db    *DB
	opts  Options
	model model
	seed  uint64
}

func (h *crashHarness) open(t *rapid.T, crashAt int64) {
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		h.seed++
		h.fs = fault.New(h.mem, fault.Config{Seed: h.seed, CrashAtOp: crashAt, CrashAppliesWrite: h.seed%2 == 0})
		d, err := Open(ctx, h.fs, h.opts)
		if err == nil {
			h.db = d
			got, err := dump(ctx, d)
			if err != nil {
				if h.fs.Crashed() {
					h.closeQuiet()
					crashAt = 0
					continue
				}
				t.Fatalf("scan after open: %v", err)
			}
			h.model.resolve(t, got)
			if err := Check(ctx, h.mem); err != nil {
				t.Fatalf("check after reopen: %v", err)
			}
			return
		}
		if !errors.Is(err, fault.ErrCrashed) || attempt > 20 {
			t.Fatalf("open (attempt %d): %v", attempt, err)
		}
		crashAt = 0 // the crash hit recovery itself; recover for real now
	}
}

type modelSnap struct {
	s  *Snapshot
	kv map[string]string
}

func (h *crashHarness) closeQuiet() {
	for _, s := range h.snaps {
		s.s.Close()
	}
	h.snaps = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.db.Close(ctx)
}

// crashed reports whether the store crashed; the DB must then be reopened.
func (h *crashHarness) reopenIfCrashed(t *rapid.T) bool {
	if !h.fs.Crashed() {
		return false
	}
	h.closeQuiet()
	h.open(t, rapid.Int64Range(0, 60).Draw(t, "crashAt"))
	return true
}

var modelKeys = []string{"a", "b", "c", "d", "e", "f", "g", "h", "ab", "abc", "b\x00", "zz"}

func TestModelCrashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := &crashHarness{mem: objstore.NewMem(), model: model{kv: map[string]string{}}}
		h.opts = Options{
			MemtableBytes: rapid.IntRange(64, 4096).Draw(t, "memtable"), MaxWALsPerMemtable: rapid.IntRange(1, 16).Draw(t, "walsPerMem"),
			BlockSize: rapid.IntRange(32, 512).Draw(t, "block"), MaxSSTBytes: rapid.IntRange(64, 2048).Draw(t, "sst"),
			L0CompactionTrigger: rapid.IntRange(2, 5).Draw(t, "l0trig"), RunMergeWidth: 2, GCInterval: -1,
			WALInFlight: rapid.IntRange(1, MaxWALInFlight).Draw(t, "walInFlight"),
			Now:         func() time.Time { return time.Now().Add(time.Hour) }, // GC may delete anything unreachable
		}
		h.open(t, rapid.Int64Range(0, 60).Draw(t, "crashAt"))
		defer func() { h.closeQuiet() }()
		ctx := context.Background()
		t.Repeat(map[string]func(*rapid.T){
			"write": func(t *rapid.T) {
				if h.reopenIfCrashed(t) {
					return
				}
				n := rapid.IntRange(1, 5).Draw(t, "n")
				b := NewBatch()
				for i := 0; i < n; i++ {
					k := rapid.SampledFrom(modelKeys).Draw(t, "key")
					if rapid.IntRange(0, 3).Draw(t, "del") == 0 {
						b.Delete([]byte(k))
					} else {
						b.Put([]byte(k), []byte(fmt.Sprintf("%s-%d", k, rapid.IntRange(0, 1000).Draw(t, "v"))))
					}
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if _, err := h.db.Write(wctx, b); err != nil {
					h.model.pending = b.ops
					h.closeQuiet()
					h.open(t, rapid.Int64Range(0, 60).Draw(t, "crashAt"))
					return
				}
				applyOps(h.model.kv, b.ops)
			},
			"get": func(t *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(t, "key")
				v, err := h.db.Get(ctx, []byte(k))
				if err != nil && !errors.Is(err, ErrNotFound) {
					if h.reopenIfCrashed(t) {
						return
					}
					t.Fatalf("get %q: %v", k, err)
				}
				want, ok := h.model.kv[k]
				if ok != (err == nil) || (ok && string(v) != want) {
					t.Fatalf("get %q = %q, %v; want %q, %v", k, v, err, want, ok)
				}
			},
			"scan": func(t *rapid.T) {
				lo := rapid.SampledFrom(modelKeys).Draw(t, "lo")
				hi := rapid.SampledFrom(modelKeys).Draw(t, "hi")
				it := h.db.Scan(ctx, []byte(lo), []byte(hi))
				var got []string
				for it.Next() {
					got = append(got, string(it.Key())+"="+string(it.Value()))
				}
				if err := it.Close(); err != nil {
					if h.reopenIfCrashed(t) {
						return
					}
					t.Fatalf("scan: %v", err)
				}
				var keys, want []string
				for k := range h.model.kv {
					if k >= lo && k < hi {
						keys = append(keys, k)
					}
				}
				sort.Strings(keys)
				for _, k := range keys {
					want = append(want, k+"="+h.model.kv[k])
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("scan [%q,%q) = %v; want %v", lo, hi, got, want)
				}
			},
			"flush": func(t *rapid.T) {
				if err := h.db.Flush(ctx); err != nil && !h.reopenIfCrashed(t) {
					t.Fatalf("flush: %v", err)
				}
			},
			"compact": func(t *rapid.T) {
				if err := h.db.Compact(ctx); err != nil && !h.reopenIfCrashed(t) {
					t.Fatalf("compact: %v", err)
				}
			},
			"gc": func(t *rapid.T) {
				if _, err := h.db.GC(ctx); err != nil && !h.reopenIfCrashed(t) {
					t.Fatalf("gc: %v", err)
				}
			},
			"snapshot": func(t *rapid.T) {
				if len(h.snaps) >= 3 {
					h.snaps[0].s.Close()
					h.snaps = h.snaps[1:]
				}
				s, err := h.db.Snapshot()
				if err != nil {
					t.Fatalf("snapshot: %v", err)
				}
				h.snaps = append(h.snaps, modelSnap{s: s, kv: maps.Clone(h.model.kv)})
			},
			"snapread": func(t *rapid.T) {
				if len(h.snaps) == 0 {
					return
				}
				ms := h.snaps[rapid.IntRange(0, len(h.snaps)-1).Draw(t, "snap")]
				it := ms.s.Scan(ctx, nil, nil)
				got := map[string]string{}
				for it.Next() {
					got[string(it.Key())] = string(it.Value())
				}
				if err := it.Close(); err != nil {
					if h.reopenIfCrashed(t) {
						return
					}
					t.Fatalf("snapshot scan: %v", err)
				}
				if !maps.Equal(got, ms.kv) {
					t.Fatalf("snapshot at seq %d reads\n %v\nwant\n %v", ms.s.Seq(), got, ms.kv)
				}
				k := rapid.SampledFrom(modelKeys).Draw(t, "key")
				v, err := ms.s.Get(ctx, []byte(k))
				if err != nil && !errors.Is(err, ErrNotFound) {
					if h.reopenIfCrashed(t) {
						return
					}
					t.Fatalf("snapshot get: %v", err)
				}
				if want, ok := ms.kv[k]; ok != (err == nil) || string(v) != want {
					t.Fatalf("snapshot get %q = %q, %v; want %q", k, v, err, want)
				}
			},
			"reopen": func(t *rapid.T) {
				for _, s := range h.snaps {
					s.s.Close()
				}
				h.snaps = nil
				if err := h.db.Close(ctx); err != nil && !h.fs.Crashed() {
					t.Fatalf("close: %v", err)
				}
				h.open(t, rapid.Int64Range(0, 60).Draw(t, "crashAt"))
			},
			"crash": func(t *rapid.T) {
				h.fs.Crash()
				h.reopenIfCrashed(t)
			},
		})
	})
}
