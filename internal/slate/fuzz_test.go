package slate

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// The fuzz targets feed untrusted bytes to every decoder. The fuzzer
// cannot forge CRC32C checksums, so each target appends a valid checksum to
// the fuzzed payload to reach the parsing code behind it. Properties: no
// panic; anything that decodes re-encodes to something that decodes to the
// same value.

func seedWAL() []byte {
	return encodeWAL(3, walHeader{epoch: 2, base: 2}, []walBatch{
		{seq: 10, ops: []op{{kind: kindPut, key: []byte("a"), value: []byte("1")}, {kind: kindDelete, key: []byte("b")}}},
		{seq: 11, ops: []op{{kind: kindPut, key: []byte("catalog/1"), value: nil}}},
	})
}

func seedBlock() []byte {
	b := newSSTBuilder(1 << 20)
	for i := 0; i < 40; i++ {
		b.add(entry{key: []byte(fmt.Sprintf("key/%03d", i/2)), value: []byte("v"), seq: uint64(100 - i%2), kind: kind(1 + i%2)})
	}
	b.finishBlock()
	return b.buf
}

func seedManifest() []byte {
	b := newSSTBuilder(64)
	b.add(entry{key: []byte("a"), value: []byte("x"), seq: 1, kind: kindPut})
	b.add(entry{key: []byte("b"), seq: 2, kind: kindDelete})
	_, info := b.finish()
	info.id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	info2 := info
	info2.id = "01ARZ3NDEKTSV4RRFFQ69G5FAW"
	return encodeManifest(&manifest{id: 7, writerEpoch: 3, replayAfterWAL: 5, walIDLastSeen: 6, lastL0Seq: 2, nextRunID: 2,
		l0: []*sstInfo{&info}, runs: []*sortedRun{{id: 1, tables: []*sstInfo{&info2}}}})
}

func stripCRC(b []byte) []byte { return b[:len(b)-4] }

func FuzzDecodeWAL(f *testing.F) {
	f.Add(stripCRC(seedWAL()))
	f.Fuzz(func(t *testing.T, payload []byte) {
		data := appendCRC(append([]byte(nil), payload...))
		h, batches, err := decodeWAL("wal/x", 3, data)
		if err != nil {
			return
		}
		again := encodeWAL(3, h, batches)
		h2, b2, err := decodeWAL("wal/x", 3, again)
		if err != nil || h2 != h || !reflect.DeepEqual(normOps(b2), normOps(batches)) {
			t.Fatalf("round trip changed the WAL object: %v", err)
		}
	})
}

// normOps maps empty values to nil so DeepEqual compares content.
func normOps(bs []walBatch) []walBatch {
	out := make([]walBatch, len(bs))
	for i, b := range bs {
		out[i].seq = b.seq
		for _, o := range b.ops {
			if len(o.value) == 0 {
				o.value = nil
			}
			out[i].ops = append(out[i].ops, o)
		}
	}
	return out
}

func FuzzDecodeBlock(f *testing.F) {
	f.Add(stripCRC(seedBlock()))
	f.Fuzz(func(t *testing.T, payload []byte) {
		blk, err := decodeBlock("sst/x", appendCRC(append([]byte(nil), payload...)))
		if err != nil {
			return
		}
		b := newSSTBuilder(1 << 30)
		for _, e := range blk.entries {
			b.add(e)
		}
		b.finishBlock()
		again, err := decodeBlock("sst/x", b.buf)
		if err != nil || len(again.entries) != len(blk.entries) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range blk.entries {
			a, c := blk.entries[i], again.entries[i]
			if string(a.key) != string(c.key) || string(a.value) != string(c.value) || a.seq != c.seq || a.kind != c.kind {
				t.Fatalf("entry %d changed", i)
			}
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(stripCRC(seedManifest()))
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := decodeManifest("manifest/x", 7, appendCRC(append([]byte(nil), payload...)))
		if err != nil {
			return
		}
		again, err := decodeManifest("manifest/x", 7, encodeManifest(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip changed the manifest: %v", err)
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	b := newSSTBuilder(32)
	for i := 0; i < 20; i++ {
		b.add(entry{key: []byte(fmt.Sprintf("k%02d", i)), value: []byte("v"), seq: 1, kind: kindPut})
	}
	_, info := b.finish()
	f.Add(stripCRC(b.buf[info.indexOff:info.indexOff+uint64(info.indexLen)]), info.indexOff)
	f.Fuzz(func(t *testing.T, payload []byte, size uint64) {
		idx, err := decodeIndex("sst/x", appendCRC(append([]byte(nil), payload...)), size)
		if err != nil {
			return
		}
		var end uint64
		for _, ie := range idx {
			if ie.off != end || ie.off+uint64(ie.length) > size {
				t.Fatalf("accepted a bad block handle %+v (size %d)", ie, size)
			}
			end = ie.off + uint64(ie.length)
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz seed corpora when
// SLATE_WRITE_FUZZ_SEEDS is set; otherwise it checks they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := map[string][]string{
		"FuzzDecodeWAL":      {fuzzBytes(stripCRC(seedWAL())), fuzzBytes(nil)},
		"FuzzDecodeBlock":    {fuzzBytes(stripCRC(seedBlock())), fuzzBytes([]byte{0, 1, 1, 'a', 'x', 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0})},
		"FuzzDecodeManifest": {fuzzBytes(stripCRC(seedManifest())), fuzzBytes(stripCRC(encodeManifest(&manifest{id: 7})))},
	}
	for name, corpus := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		for i, body := range corpus {
			path := filepath.Join(dir, "seed"+strconv.Itoa(i))
			if os.Getenv("SLATE_WRITE_FUZZ_SEEDS") != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("go test fuzz v1\n"+body+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if _, err := os.Stat(path); err != nil {
				t.Fatalf("missing seed corpus %s (run with SLATE_WRITE_FUZZ_SEEDS=1)", path)
			}
		}
	}
}

func fuzzBytes(b []byte) string { return "[]byte(" + strconv.Quote(string(b)) + ")" }
