package localdir

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func genRecord() *rapid.Generator[record] {
	return rapid.Custom(func(t *rapid.T) record {
		r := record{
			kind: byte(rapid.IntRange(recPut, recDelete).Draw(t, "kind")),
			key:  rapid.StringMatching(`[a-z0-9/]{1,40}`).Draw(t, "key"),
		}
		if r.kind == recPut {
			r.data = rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "data")
		}
		return r
	})
}

// Records decode to what was encoded, and a log cut anywhere or damaged
// anywhere decodes to a prefix of its records: never a partial or altered
// record.
func TestRecordCodec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := rapid.SliceOfN(genRecord(), 0, 8).Draw(t, "recs")
		var buf []byte
		var ends []int
		for _, r := range recs {
			buf = appendRecord(buf, r)
			ends = append(ends, len(buf))
		}
		log := append(bytes.Clone(buf), make([]byte, rapid.IntRange(0, 64).Draw(t, "zeros"))...)
		got, end := parseRecords(log)
		if end != len(buf) || len(got) != len(recs) {
			t.Fatalf("parsed %d records ending at %d, want %d ending at %d", len(got), end, len(recs), len(buf))
		}
		for i := range recs {
			if got[i].kind != recs[i].kind || got[i].key != recs[i].key || !bytes.Equal(got[i].data, recs[i].data) {
				t.Fatalf("record %d = %+v, want %+v", i, got[i], recs[i])
			}
		}
		if len(buf) == 0 {
			return
		}
		// complete records before the cut or the damage
		complete := func(at int) int {
			n := 0
			for _, e := range ends {
				if e <= at {
					n++
				}
			}
			return n
		}
		cut := rapid.IntRange(0, len(buf)-1).Draw(t, "cut")
		if got, end := parseRecords(buf[:cut]); len(got) != complete(cut) || (len(got) > 0 && end != ends[len(got)-1]) {
			t.Fatalf("cut at %d: %d records ending at %d, want %d", cut, len(got), end, complete(cut))
		}
		flip := rapid.IntRange(0, len(buf)-1).Draw(t, "flip")
		damaged := bytes.Clone(buf)
		damaged[flip] ^= byte(rapid.IntRange(1, 255).Draw(t, "mask"))
		if got, _ := parseRecords(damaged); len(got) != complete(flip) {
			t.Fatalf("damage at %d: %d records, want the %d before it", flip, len(got), complete(flip))
		}
	})
}

// A journal segment is bytes read back from disk after a crash: whatever
// they are, parsing must not panic, and what it accepts must re-encode to
// exactly the prefix it consumed.
func FuzzParseRecords(f *testing.F) {
	f.Add(appendRecord(nil, record{kind: recPut, key: "wal/1", data: []byte("batch")}))
	f.Add(appendRecord(appendRecord(nil, record{kind: recDelete, key: "a"}), record{kind: recSynced, key: "b"}))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, buf []byte) {
		recs, end := parseRecords(buf)
		if end > len(buf) {
			t.Fatalf("end %d beyond %d bytes", end, len(buf))
		}
		var re []byte
		for _, r := range recs {
			re = appendRecord(re, r)
		}
		if !bytes.Equal(re, buf[:end]) {
			t.Fatalf("accepted prefix does not re-encode to itself")
		}
	})
}

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crash stops s as a killed process would stop: no checkpoint, the
// journal left behind, its locks released.
func crash(s *Store) {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	s.pool.shutdown()
	s.journal.abandon()
}

func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), journalPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func mustGet(t *testing.T, s *Store, key string) string {
	t.Helper()
	b, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(b)
}

// A power loss can drop files, directory entries and unlinks that were not
// synced. The journal is what makes acknowledged writes survive it: after a
// crash, objects whose files were lost, emptied or damaged are rebuilt from
// their records, a deleted object that came back is deleted again, and the
// journal is gone.
func TestJournalRecoversLostWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	put := func(key, val string) {
		t.Helper()
		if err := s.PutIfAbsent(ctx, key, []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	put("wal/0001", "one")
	put("wal/0002", "two")
	put("wal/0003", "three")
	put("manifest/0001", "m1")
	if err := s.Put(ctx, "manifest/0001", []byte("m1-overwritten")); err != nil {
		t.Fatal(err)
	}
	put("wal/0004", "four")
	if err := s.Delete(ctx, "wal/0004"); err != nil {
		t.Fatal(err)
	}
	if len(journalFiles(t, dir)) == 0 {
		t.Fatal("no journal segment while writes are unsynced")
	}
	crash(s)

	// What a power loss may leave: a file gone, one empty, one torn, an
	// unlink undone.
	p := func(key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }
	if err := os.Remove(p("wal/0001")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p("wal/0002"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("manifest/0001"), []byte("m1-over"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("wal/0004"), []byte("four"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := openStore(t, dir)
	defer r.Close()
	st := r.Recovered()
	// Segments: the one written, and maybe the next one, made ahead.
	if st.Segments < 1 || st.Records != 7 || st.Restored != 3 || st.Deleted != 1 || st.Skipped != 0 {
		t.Fatalf("recovery = %+v, want 7 records, 3 restored, 1 deleted", st)
	}
	for key, want := range map[string]string{"wal/0001": "one", "wal/0002": "two", "wal/0003": "three", "manifest/0001": "m1-overwritten"} {
		if got := mustGet(t, r, key); got != want {
			t.Fatalf("%s = %q after recovery, want %q", key, got, want)
		}
	}
	if _, err := r.Get(ctx, "wal/0004"); err == nil {
		t.Fatal("deleted wal/0004 came back")
	}
	if j := journalFiles(t, dir); len(j) != 0 {
		t.Fatalf("journal left after recovery: %v", j)
	}
}

// A store that closes cleanly leaves no journal, and its objects need none.
func TestJournalGoneAfterClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	for i := range 50 {
		if err := s.PutIfAbsent(ctx, "wal/"+strings.Repeat("x", i+1), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if j := journalFiles(t, dir); len(j) != 0 {
		t.Fatalf("journal left after Close: %v", j)
	}
	r := openStore(t, dir)
	defer r.Close()
	if st := r.Recovered(); st != (RecoveryStats{}) {
		t.Fatalf("recovery after a clean close = %+v, want nothing", st)
	}
}

// Another live store's journal is not replayed (its owner holds its lock);
// it is left for its owner to retire.
func TestJournalOfLiveOwnerSkipped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openStore(t, dir)
	if err := a.PutIfAbsent(ctx, "wal/1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	b := openStore(t, dir)
	before := journalFiles(t, dir)
	if st := b.Recovered(); st.Skipped < 1 || st.Segments != 0 {
		t.Fatalf("b's recovery = %+v, want a's segments skipped", st)
	}
	if len(before) < 1 || !slices.Contains(journalFiles(t, dir), before[0]) {
		t.Fatal("a's journal was touched")
	}
	if err := a.PutIfAbsent(ctx, "wal/2", []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "wal/2", []byte("b2")); err == nil {
		t.Fatal("b's PutIfAbsent over a's object succeeded")
	}
	_ = a.Close()
	_ = b.Close()
	if j := journalFiles(t, dir); len(j) != 0 {
		t.Fatalf("journal left: %v", j)
	}
}

// A large Put is synced by itself; when it replaces an object the journal
// still names, a record says so, or recovery would bring back the old
// bytes.
func TestJournalLargePutSupersedesRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	if err := s.Put(ctx, "sst/1", []byte("small")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("B"), maxInline+1)
	if err := s.Put(ctx, "sst/1", big); err != nil {
		t.Fatal(err)
	}
	crash(s)
	r := openStore(t, dir)
	defer r.Close()
	if got := mustGet(t, r, "sst/1"); got != string(big) {
		t.Fatalf("sst/1 after recovery has %d bytes, want the large object's %d", len(got), len(big))
	}
	if st := r.Recovered(); st.Restored != 0 || st.Records != 2 {
		t.Fatalf("recovery = %+v, want 2 records and nothing restored", st)
	}
}

// Writes past a segment's size move to a new segment; full segments are
// checkpointed and removed in the background, and a crash in the middle of
// it all still recovers every object.
func TestJournalRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	val := bytes.Repeat([]byte("v"), 300<<10)
	n := 3 * segmentSize / len(val)
	for i := range n {
		if err := s.PutIfAbsent(ctx, "wal/"+strings.Repeat("0", 4)+string(rune('a'+i%26))+strings.Repeat("z", i/26), val); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(journalFiles(t, dir)) > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("retired segments not checkpointed: %v", journalFiles(t, dir))
		}
		time.Sleep(10 * time.Millisecond)
	}
	crash(s)
	r := openStore(t, dir)
	defer r.Close()
	l, err := r.List(ctx, "wal/")
	if err != nil || len(l) != n {
		t.Fatalf("List after recovery: %d objects, %v; want %d", len(l), err, n)
	}
	for _, o := range l {
		if o.Size != int64(len(val)) {
			t.Fatalf("%s has %d bytes", o.Key, o.Size)
		}
	}
}

// Only the valid prefix of a segment is replayed: a torn last record (the
// write a crash interrupted, never acknowledged) is ignored.
func TestJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	seg := appendRecord(nil, record{kind: recPut, key: "wal/1", data: []byte("kept")})
	torn := appendRecord(nil, record{kind: recPut, key: "wal/2", data: []byte("never acknowledged")})
	seg = append(seg, torn[:len(torn)-3]...)
	seg = append(seg, make([]byte, 1000)...)
	if err := os.WriteFile(filepath.Join(dir, journalPrefix+"00000000000000aa-0000000000000001"), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir)
	defer s.Close()
	if st := s.Recovered(); st.Records != 1 || st.Restored != 1 {
		t.Fatalf("recovery = %+v, want the one whole record restored", st)
	}
	if got := mustGet(t, s, "wal/1"); got != "kept" {
		t.Fatalf("wal/1 = %q", got)
	}
	if _, err := s.Get(context.Background(), "wal/2"); err == nil {
		t.Fatal("the torn record's object exists")
	}
}

// A file in the root that looks like a journal but is not named like one
// is a clear error, not something recovery guesses about.
func TestJournalUnexpectedName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, journalPrefix+"garbage"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "unexpected file") {
		t.Fatalf("Open = %v, want an error naming the unexpected journal file", err)
	}
}
