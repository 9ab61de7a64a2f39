package slate

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"pgregory.net/rapid"
)

func genKey(t *rapid.T, label string) []byte {
	// Small alphabet and shared prefixes, like catalog keys.
	return []byte("k/" + rapid.StringMatching(`[ab\x00\xff]{0,6}`).Draw(t, label))
}

func TestWALRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "batches")
		var batches []walBatch
		seq := rapid.Uint64Range(1, 1<<60).Draw(t, "seq")
		for i := 0; i < n; i++ {
			var ops []op
			for j := rapid.IntRange(1, 4).Draw(t, "ops"); j > 0; j-- {
				o := op{kind: kindDelete, key: genKey(t, "key")}
				if rapid.Bool().Draw(t, "put") {
					o.kind, o.value = kindPut, rapid.SliceOf(rapid.Byte()).Draw(t, "value")
				}
				ops = append(ops, o)
			}
			batches = append(batches, walBatch{seq: seq, ops: ops})
			seq += rapid.Uint64Range(1, 10).Draw(t, "gap")
		}
		id, epoch := rapid.Uint64().Draw(t, "id"), rapid.Uint64().Draw(t, "epoch")
		h := walHeader{epoch: epoch, base: id - rapid.Uint64Range(0, min(id, MaxWALInFlight-1)).Draw(t, "in flight")}
		data := encodeWAL(id, h, batches)
		h2, got, err := decodeWAL("w", id, data)
		if err != nil || h2 != h || !reflect.DeepEqual(normOps(got), normOps(batches)) {
			t.Fatalf("round trip: %v", err)
		}
		if _, _, err := decodeWAL("w", id+1, data); err == nil {
			t.Fatal("WAL object accepted under another id")
		}
		cut := rapid.IntRange(1, len(data)-1).Draw(t, "cut")
		if _, _, err := decodeWAL("w", id, data[:cut]); err == nil {
			t.Fatal("torn WAL object accepted")
		}
	})
}

// TestSSTRoundTrip builds a table from random sorted entries (several
// versions per key, spanning blocks) and checks full iteration, seeks and
// the point lookup path against the input.
func TestSSTRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var es []entry
		for i := rapid.IntRange(1, 200).Draw(t, "n"); i > 0; i-- {
			e := entry{key: genKey(t, "key"), seq: rapid.Uint64Range(1, 50).Draw(t, "seq"), kind: kindDelete}
			if rapid.IntRange(0, 4).Draw(t, "kind") > 0 {
				e.kind, e.value = kindPut, []byte(rapid.StringN(0, 20, -1).Draw(t, "value"))
			}
			es = append(es, e)
		}
		slices.SortFunc(es, func(a, b entry) int {
			if entryLess(a, b) {
				return -1
			}
			if entryLess(b, a) {
				return 1
			}
			return 0
		})
		es = slices.CompactFunc(es, func(a, b entry) bool { return bytes.Equal(a.key, b.key) && a.seq == b.seq })
		b := newSSTBuilder(rapid.IntRange(16, 512).Draw(t, "block"))
		for _, e := range es {
			b.add(e)
		}
		data, info := b.finish()
		info.id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		mem := objstore.NewMem()
		ctx := context.Background()
		if err := mem.Put(ctx, sstName(info.id), data); err != nil {
			t.Fatal(err)
		}
		c := newTableCache(mem, 1<<20)
		for _, scan := range []bool{true, false} {
			it := newSSTIter(ctx, c, &info, scan)
			if err := it.seek(nil); err != nil {
				t.Fatal(err)
			}
			var got []entry
			for it.ok() {
				got = append(got, it.cur())
				if err := it.next(); err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != len(es) {
				t.Fatalf("iterated %d entries, built %d", len(got), len(es))
			}
			for i := range es {
				if !bytes.Equal(got[i].key, es[i].key) || got[i].seq != es[i].seq || got[i].kind != es[i].kind || !bytes.Equal(got[i].value, es[i].value) {
					t.Fatalf("entry %d differs", i)
				}
			}
		}
		target := genKey(t, "seek")
		want := slices.IndexFunc(es, func(e entry) bool { return bytes.Compare(e.key, target) >= 0 })
		it := newSSTIter(ctx, c, &info, rapid.Bool().Draw(t, "scanseek"))
		if err := it.seek(target); err != nil {
			t.Fatal(err)
		}
		if want < 0 {
			if it.ok() {
				t.Fatalf("seek past the end found %q", it.cur().key)
			}
		} else if !it.ok() || !bytes.Equal(it.cur().key, es[want].key) || it.cur().seq != es[want].seq {
			t.Fatalf("seek %q: got ok=%v, want the first version of %q", target, it.ok(), es[want].key)
		}
		t2, err := c.get(ctx, &info)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if !bloomMayContain(t2.filter, e.key) {
				t.Fatalf("bloom filter misses %q", e.key)
			}
		}
		if err := checkTable(ctx, mem, &info, 1<<62); err != nil {
			t.Fatalf("check: %v", err)
		}
	})
}

func TestManifestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mk := func() *sstInfo {
			b := newSSTBuilder(64)
			k := genKey(t, "first")
			b.add(entry{key: k, value: []byte("v"), seq: rapid.Uint64Range(1, 100).Draw(t, "seq"), kind: kindPut})
			_, info := b.finish()
			info.id = newULID(timeNowForTest())
			return &info
		}
		m := &manifest{id: rapid.Uint64().Draw(t, "id"), writerEpoch: rapid.Uint64().Draw(t, "epoch"),
			replayAfterWAL: rapid.Uint64().Draw(t, "replay"), walIDLastSeen: rapid.Uint64().Draw(t, "last"),
			lastL0Seq: rapid.Uint64().Draw(t, "l0seq"), nextRunID: rapid.Uint64().Draw(t, "run")}
		for i := rapid.IntRange(0, 4).Draw(t, "l0"); i > 0; i-- {
			m.l0 = append(m.l0, mk())
		}
		for i := rapid.IntRange(0, 3).Draw(t, "runs"); i > 0; i-- {
			m.runs = append(m.runs, &sortedRun{id: uint64(i), tables: []*sstInfo{mk()}})
		}
		data := encodeManifest(m)
		got, err := decodeManifest("m", m.id, data)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: %v", err)
		}
		cut := rapid.IntRange(0, len(data)-1).Draw(t, "cut")
		if _, err := decodeManifest("m", m.id, data[:cut]); err == nil {
			t.Fatal("truncated manifest accepted")
		}
	})
}

func TestNames(t *testing.T) {
	for _, id := range []uint64{1, 42, 1<<64 - 1} {
		if got, ok := parseID(walName(id), walPrefix, walSuffix); !ok || got != id {
			t.Fatalf("wal %d -> %q -> %d %v", id, walName(id), got, ok)
		}
		if got, ok := parseID(manifestName(id), manifestPrefix, manifestSuffix); !ok || got != id {
			t.Fatalf("manifest %d round trip", id)
		}
	}
	if walName(1) != "wal/00000000000000000001.wal" || manifestName(7) != "manifest/00000000000000000007.manifest" {
		t.Fatalf("name format changed: %s %s", walName(1), manifestName(7))
	}
	for _, bad := range []string{"wal/1.wal", "wal/0000000000000000000x.wal", "wal/00000000000000000001.sst", "manifest/00000000000000000001.wal"} {
		if _, ok := parseID(bad, walPrefix, walSuffix); ok {
			t.Fatalf("parsed %q", bad)
		}
	}
	prev := ""
	for i := 0; i < 1000; i++ {
		u := newULID(timeNowForTest())
		if _, ok := parseSSTName(sstName(u)); !ok || u <= prev {
			t.Fatalf("ULID %q after %q", u, prev)
		}
		prev = u
	}
}

func TestPickCompaction(t *testing.T) {
	o := Options{}.withDefaults()
	run := func(size uint64) *sortedRun { return &sortedRun{tables: []*sstInfo{{size: size}}} }
	l0 := func(n int) []*sstInfo { return make([]*sstInfo, n) }
	for _, tc := range []struct {
		name string
		m    *manifest
		want compactionPlan
		ok   bool
	}{
		{"nothing", &manifest{l0: l0(3)}, compactionPlan{}, false},
		{"l0 trigger, no runs", &manifest{l0: l0(4)}, compactionPlan{l0Count: 4, dropTombs: true}, true},
		{"l0 trigger capped", &manifest{l0: l0(11), runs: []*sortedRun{run(1)}}, compactionPlan{l0Count: 8}, true},
		{"similar runs", &manifest{runs: []*sortedRun{run(10), run(12), run(15), run(20)}}, compactionPlan{runStart: 0, runEnd: 4, dropTombs: true}, true},
		{"big oldest run excluded", &manifest{runs: []*sortedRun{run(10), run(12), run(15), run(20), run(1000)}}, compactionPlan{runStart: 0, runEnd: 4}, true},
		{"too few similar", &manifest{runs: []*sortedRun{run(10), run(100), run(1000), run(10000)}}, compactionPlan{}, false},
	} {
		got, ok := pickCompaction(tc.m, o)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func timeNowForTest() time.Time { return time.Now() }

// TestWALHeader: fences carry their writer's epoch, version 1 objects (no
// base) read with their own id as base, and headers that could not have
// been written are corruption.
func TestWALHeader(t *testing.T) {
	batch := []walBatch{{seq: 9, ops: []op{{kind: kindPut, key: []byte("k"), value: []byte("v")}}}}
	// v1 is v2 without the base field.
	v1 := func(id, epoch uint64, batches []walBatch) []byte {
		v2 := stripCRC(encodeWAL(id, walHeader{epoch: epoch, base: id}, batches))
		out := append([]byte(nil), v2[:4]...)
		out = append(out, 1, 0)
		out = append(out, v2[6:22]...)
		out = append(out, v2[30:]...)
		return appendCRC(out)
	}
	for _, tc := range []struct {
		name    string
		id      uint64
		data    []byte
		want    walHeader
		batches int
		corrupt bool
	}{
		{"fence", 7, encodeWAL(7, walHeader{epoch: 3, base: 7}, nil), walHeader{epoch: 3, base: 7}, 0, false},
		{"zero-byte fence", 7, nil, walHeader{base: 7}, 0, false},
		{"data in flight behind two", 7, encodeWAL(7, walHeader{epoch: 3, base: 5}, batch), walHeader{epoch: 3, base: 5}, 1, false},
		{"version 1 data", 7, v1(7, 3, batch), walHeader{epoch: 3, base: 7}, 1, false},
		{"version 1 without batches", 7, v1(7, 3, nil), walHeader{}, 0, true},
		{"fence without epoch", 7, encodeWAL(7, walHeader{base: 7}, nil), walHeader{}, 0, true},
		{"base above id", 7, encodeWAL(7, walHeader{epoch: 3, base: 8}, batch), walHeader{}, 0, true},
		{"base beyond the window", 7, encodeWAL(7, walHeader{epoch: 3, base: 7 - MaxWALInFlight}, batch), walHeader{}, 0, true},
	} {
		h, batches, err := decodeWAL("w", tc.id, tc.data)
		if tc.corrupt {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: %+v, %v; want ErrCorrupt", tc.name, h, err)
			}
			continue
		}
		if err != nil || h != tc.want || len(batches) != tc.batches {
			t.Errorf("%s: %+v, %d batches, %v; want %+v, %d", tc.name, h, len(batches), err, tc.want, tc.batches)
		}
	}
	if got := len(encodeWAL(1, walHeader{epoch: 1, base: 1}, nil)); !isFence(int64(got)) || isFence(int64(len(encodeWAL(1, walHeader{epoch: 1, base: 1}, batch)))) {
		t.Errorf("isFence misjudges a %d-byte fence or a data object", got)
	}
}
