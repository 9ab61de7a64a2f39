// Package objstoretest holds the conformance suite every objstore backend
// must pass, and helpers that give other packages' tests real backends (an
// in-process S3 server, a temporary directory).
//
// The suite pins the Store contract as slate relies on it: exact bytes back,
// ranged reads clamped at the end, List sorted by key and filtered by prefix,
// wrapped sentinel errors that name the key, honoured contexts, and a
// PutIfAbsent that has exactly one winner under concurrency.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"pgregory.net/rapid"
)

// NewStore returns a fresh, empty, open store. The suite closes what it gets
// (closing twice must be harmless); the factory may register t.Cleanup for
// anything else it started.
type NewStore func(t *testing.T) objstore.Store

// Run runs every conformance test against the stores newStore makes.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, NewStore)
	}{
		{"PutGet", testPutGet},
		{"PutIfAbsent", testPutIfAbsent},
		{"NotFound", testNotFound},
		{"GetRange", testGetRange},
		{"List", testList},
		{"Stat", testStat},
		{"Delete", testDelete},
		{"DeleteMany", testDeleteMany},
		{"InvalidKey", testInvalidKey},
		{"ContextCanceled", testContextCanceled},
		{"Closed", testClosed},
		{"ConcurrentPutIfAbsent", testConcurrentPutIfAbsent},
		{"ConcurrentMixed", testConcurrentMixed},
		{"LargeObject", testLargeObject},
		{"Model", testModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

func open(t *testing.T, newStore NewStore) objstore.Store {
	t.Helper()
	s := newStore(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}

func wantErr(t *testing.T, what string, err, target error, key string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
	if key != "" && !strings.Contains(err.Error(), key) {
		t.Fatalf("%s: error %q does not name key %q", what, err, key)
	}
}

func allBytes() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func testPutGet(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	for _, tc := range []struct {
		key  string
		data []byte
	}{
		{"a", []byte("hello")},
		{"empty", []byte{}},
		{"nil", nil},
		{"bin/all-bytes", allBytes()},
		{"deep/er/and/deeper/key.wal", []byte("x")},
		{"spaces and ünïcödé/%2F+?#&=", []byte("odd key")},
	} {
		mustPut(t, s, tc.key, tc.data)
		got := mustGet(t, s, tc.key)
		if !bytes.Equal(got, tc.data) || got == nil {
			t.Fatalf("Get(%q) = %q (nil=%v), want %q", tc.key, got, got == nil, tc.data)
		}
	}

	// Put replaces.
	mustPut(t, s, "a", []byte("replaced, and longer than before"))
	if got := mustGet(t, s, "a"); string(got) != "replaced, and longer than before" {
		t.Fatalf("after overwrite Get = %q", got)
	}
	mustPut(t, s, "a", []byte("short"))
	if got := mustGet(t, s, "a"); string(got) != "short" {
		t.Fatalf("after shrinking overwrite Get = %q", got)
	}

	// The store owns copies: neither the caller's input buffer nor a returned
	// slice aliases stored bytes.
	buf := []byte("original")
	mustPut(t, s, "alias", buf)
	copy(buf, "XXXXXXXX")
	got := mustGet(t, s, "alias")
	if string(got) != "original" {
		t.Fatalf("store aliases the Put buffer: %q", got)
	}
	copy(got, "YYYYYYYY")
	if got := mustGet(t, s, "alias"); string(got) != "original" {
		t.Fatalf("store aliases the Get result: %q", got)
	}
	buf = []byte("first")
	if err := s.PutIfAbsent(ctx, "alias2", buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	if got := mustGet(t, s, "alias2"); string(got) != "first" {
		t.Fatalf("store aliases the PutIfAbsent buffer: %q", got)
	}
}

func testPutIfAbsent(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	const key = "manifest/00000000000000000001"
	if err := s.PutIfAbsent(ctx, key, []byte("one")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, key, []byte("two"))
	wantErr(t, "second PutIfAbsent", err, objstore.ErrExists, key)
	if got := mustGet(t, s, key); string(got) != "one" {
		t.Fatalf("losing PutIfAbsent changed the object: %q", got)
	}
	// An object made by Put also blocks PutIfAbsent, even an empty one.
	mustPut(t, s, "by-put", nil)
	wantErr(t, "PutIfAbsent over Put", s.PutIfAbsent(ctx, "by-put", []byte("x")), objstore.ErrExists, "by-put")
	if got := mustGet(t, s, "by-put"); len(got) != 0 {
		t.Fatalf("losing PutIfAbsent changed the empty object: %q", got)
	}
	// After Delete the key is free again.
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, key, []byte("three")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	if got := mustGet(t, s, key); string(got) != "three" {
		t.Fatalf("Get = %q, want three", got)
	}
	// Put still overwrites a PutIfAbsent object.
	mustPut(t, s, key, []byte("four"))
	if got := mustGet(t, s, key); string(got) != "four" {
		t.Fatalf("Get = %q, want four", got)
	}
}

func testNotFound(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	mustPut(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "dir", "missing/deeper/key", "dir/present/child"} {
		_, err := s.Get(ctx, key)
		wantErr(t, "Get "+key, err, objstore.ErrNotFound, key)
		_, err = s.GetRange(ctx, key, 0, 1)
		wantErr(t, "GetRange "+key, err, objstore.ErrNotFound, key)
		_, err = s.GetRange(ctx, key, 100, -1)
		wantErr(t, "GetRange past end "+key, err, objstore.ErrNotFound, key)
		_, err = s.Stat(ctx, key)
		wantErr(t, "Stat "+key, err, objstore.ErrNotFound, key)
		if err := s.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q) of a missing object: %v", key, err)
		}
	}
}

func testGetRange(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	mustPut(t, s, "digits", []byte("0123456789"))
	mustPut(t, s, "empty", nil)
	for _, tc := range []struct {
		key            string
		offset, length int64
		want           string
	}{
		{"digits", 0, -1, "0123456789"},
		{"digits", 0, 10, "0123456789"},
		{"digits", 0, 100, "0123456789"},
		{"digits", 0, 0, ""},
		{"digits", 0, 1, "0"},
		{"digits", 2, 3, "234"},
		{"digits", 5, 0, ""},
		{"digits", 8, 5, "89"},
		{"digits", 9, -1, "9"},
		{"digits", 9, 1, "9"},
		{"digits", 10, -1, ""},
		{"digits", 10, 1, ""},
		{"digits", 15, -1, ""},
		{"digits", 15, 3, ""},
		{"empty", 0, -1, ""},
		{"empty", 0, 5, ""},
		{"empty", 3, 2, ""},
	} {
		got, err := s.GetRange(ctx, tc.key, tc.offset, tc.length)
		if err != nil {
			t.Fatalf("GetRange(%q, %d, %d): %v", tc.key, tc.offset, tc.length, err)
		}
		if string(got) != tc.want || got == nil {
			t.Fatalf("GetRange(%q, %d, %d) = %q (nil=%v), want %q",
				tc.key, tc.offset, tc.length, got, got == nil, tc.want)
		}
	}
	_, err := s.GetRange(ctx, "digits", -1, 2)
	wantErr(t, "negative offset", err, objstore.ErrInvalidRange, "digits")
}

// listKeys are chosen so that directory-walk order and key order differ
// ('-' < '.' < '/' < '0'), and so that no key is a directory of another (a
// local directory cannot hold both "a" and "a/b").
var listKeys = []string{
	"a.x", "a/b-c", "a/b.c", "a/b/c", "a/b/d/e", "a/b0", "ab", "b", "wal/00000000000000000001.wal",
	"wal/00000000000000000002.wal", "wal/00000000000000000010.wal", "z",
}

func testList(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	got, err := s.List(ctx, "")
	if err != nil || len(got) != 0 {
		t.Fatalf("List on an empty store = %v, %v", got, err)
	}
	// Put in reverse so no backend passes by insertion order.
	for i := len(listKeys) - 1; i >= 0; i-- {
		mustPut(t, s, listKeys[i], bytes.Repeat([]byte{'x'}, i))
	}
	size := func(k string) int64 { return int64(slices.Index(listKeys, k)) }
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", listKeys},
		{"a", []string{"a.x", "a/b-c", "a/b.c", "a/b/c", "a/b/d/e", "a/b0", "ab"}},
		{"a/", []string{"a/b-c", "a/b.c", "a/b/c", "a/b/d/e", "a/b0"}},
		{"a/b", []string{"a/b-c", "a/b.c", "a/b/c", "a/b/d/e", "a/b0"}},
		{"a/b/", []string{"a/b/c", "a/b/d/e"}},
		{"a/b/d", []string{"a/b/d/e"}},
		{"a/b/d/e", []string{"a/b/d/e"}},
		{"a/b/d/e/", nil},
		{"wal/0000000000000000000", []string{"wal/00000000000000000001.wal", "wal/00000000000000000002.wal"}},
		{"wal/", []string{"wal/00000000000000000001.wal", "wal/00000000000000000002.wal", "wal/00000000000000000010.wal"}},
		{"zz", nil},
		{"c", nil},
		{"missing/dir/", nil},
	} {
		got, err := s.List(ctx, tc.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.prefix, err)
		}
		var keys []string
		for _, o := range got {
			keys = append(keys, o.Key)
			if o.Size != size(o.Key) {
				t.Fatalf("List(%q): %s has size %d, want %d", tc.prefix, o.Key, o.Size, size(o.Key))
			}
			if o.ModTime.IsZero() {
				t.Fatalf("List(%q): %s has a zero ModTime", tc.prefix, o.Key)
			}
		}
		if !slices.Equal(keys, tc.want) {
			t.Fatalf("List(%q) = %q, want %q", tc.prefix, keys, tc.want)
		}
	}
}

func testStat(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	before := time.Now().Add(-time.Hour)
	mustPut(t, s, "dir/obj", []byte("twelve bytes"))
	info, err := s.Stat(ctx, "dir/obj")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "dir/obj" || info.Size != 12 {
		t.Fatalf("Stat = %+v, want key dir/obj size 12", info)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Hour)) {
		t.Fatalf("Stat ModTime %v is not near now", info.ModTime)
	}
	mustPut(t, s, "dir/obj", nil)
	if info, err := s.Stat(ctx, "dir/obj"); err != nil || info.Size != 0 {
		t.Fatalf("Stat after overwrite = %+v, %v; want size 0", info, err)
	}
}

func testDelete(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	mustPut(t, s, "d/one", []byte("1"))
	mustPut(t, s, "d/two", []byte("2"))
	if err := s.Delete(ctx, "d/one"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, "d/one")
	wantErr(t, "Get after Delete", err, objstore.ErrNotFound, "d/one")
	if err := s.Delete(ctx, "d/one"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	l, err := s.List(ctx, "d/")
	if err != nil || len(l) != 1 || l[0].Key != "d/two" {
		t.Fatalf("List after Delete = %v, %v; want only d/two", l, err)
	}
	if err := s.Delete(ctx, "d/two"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("List after deleting everything = %v, %v", l, err)
	}
	// A key can be reused after its directory emptied.
	mustPut(t, s, "d/one", []byte("again"))
	if got := mustGet(t, s, "d/one"); string(got) != "again" {
		t.Fatalf("Get = %q", got)
	}
}

// testDeleteMany: the objects named go, missing ones are no error, the
// others stay; an invalid key anywhere in the list removes nothing.
func testDeleteMany(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("m/%c/%03d", 'a'+i%3, i)
		mustPut(t, s, k, []byte(k))
		keys = append(keys, k)
	}
	mustPut(t, s, "keep", []byte("k"))
	if err := s.DeleteMany(ctx, nil); err != nil {
		t.Fatalf("DeleteMany of nothing: %v", err)
	}
	var gone, kept []string
	for i, k := range keys {
		if i%4 == 0 {
			kept = append(kept, k)
		} else {
			gone = append(gone, k)
		}
	}
	if err := s.DeleteMany(ctx, append(slices.Clone(gone), "m/missing", gone[0])); err != nil {
		t.Fatalf("DeleteMany: %v", err)
	}
	for _, k := range gone {
		_, err := s.Get(ctx, k)
		wantErr(t, "Get after DeleteMany", err, objstore.ErrNotFound, k)
	}
	l, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, o := range l {
		listed = append(listed, o.Key)
	}
	want := append(slices.Clone(kept), "keep")
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("List after DeleteMany = %v, want %v", listed, want)
	}
	for _, bad := range invalidKeys {
		err := s.DeleteMany(ctx, []string{kept[0], bad, kept[1]})
		wantErr(t, fmt.Sprintf("DeleteMany with %q", bad), err, objstore.ErrInvalidKey, "")
	}
	for _, k := range kept {
		if got := mustGet(t, s, k); string(got) != k {
			t.Fatalf("Get(%q) = %q after a refused DeleteMany", k, got)
		}
	}
}

var invalidKeys = []string{"", "/abs", "trail/", "a//b", "./a", "a/./b", "a/..", "../escape", "nul\x00", "ctl\n", "bad\xffutf8", strings.Repeat("k", objstore.MaxKeyLen+1)}

func testInvalidKey(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	for _, key := range invalidKeys {
		wantErr(t, fmt.Sprintf("Put(%q)", key), s.Put(ctx, key, []byte("x")), objstore.ErrInvalidKey, "")
		wantErr(t, fmt.Sprintf("PutIfAbsent(%q)", key), s.PutIfAbsent(ctx, key, []byte("x")), objstore.ErrInvalidKey, "")
		_, err := s.Get(ctx, key)
		wantErr(t, fmt.Sprintf("Get(%q)", key), err, objstore.ErrInvalidKey, "")
		_, err = s.GetRange(ctx, key, 0, 1)
		wantErr(t, fmt.Sprintf("GetRange(%q)", key), err, objstore.ErrInvalidKey, "")
		_, err = s.Stat(ctx, key)
		wantErr(t, fmt.Sprintf("Stat(%q)", key), err, objstore.ErrInvalidKey, "")
		wantErr(t, fmt.Sprintf("Delete(%q)", key), s.Delete(ctx, key), objstore.ErrInvalidKey, "")
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("invalid keys left objects behind: %v, %v", l, err)
	}
}

func testContextCanceled(t *testing.T, newStore NewStore) {
	s := open(t, newStore)
	mustPut(t, s, "k", []byte("v"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a canceled context: err = %v, want context.Canceled", op, err)
		}
	}
	check("Put", s.Put(ctx, "k", []byte("changed")))
	check("PutIfAbsent", s.PutIfAbsent(ctx, "new", []byte("x")))
	_, err := s.Get(ctx, "k")
	check("Get", err)
	_, err = s.GetRange(ctx, "k", 0, 1)
	check("GetRange", err)
	_, err = s.List(ctx, "")
	check("List", err)
	_, err = s.Stat(ctx, "k")
	check("Stat", err)
	check("Delete", s.Delete(ctx, "k"))
	check("DeleteMany", s.DeleteMany(ctx, []string{"k"}))
	// Nothing happened.
	if got := mustGet(t, s, "k"); string(got) != "v" {
		t.Fatalf("canceled Put changed the object: %q", got)
	}
	if _, err := s.Stat(context.Background(), "new"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("canceled PutIfAbsent created the object: %v", err)
	}

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if _, err := s.Get(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get past deadline: err = %v, want context.DeadlineExceeded", err)
	}
}

func testClosed(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := newStore(t)
	mustPut(t, s, "k", []byte("v"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	check := func(op string, err error) {
		t.Helper()
		wantErr(t, op+" after Close", err, objstore.ErrClosed, "")
	}
	check("Put", s.Put(ctx, "k", []byte("x")))
	check("PutIfAbsent", s.PutIfAbsent(ctx, "n", []byte("x")))
	_, err := s.Get(ctx, "k")
	check("Get", err)
	_, err = s.GetRange(ctx, "k", 0, 1)
	check("GetRange", err)
	_, err = s.List(ctx, "")
	check("List", err)
	_, err = s.Stat(ctx, "k")
	check("Stat", err)
	check("Delete", s.Delete(ctx, "k"))
	check("DeleteMany", s.DeleteMany(ctx, []string{"k"}))
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// testConcurrentPutIfAbsent races 16 writers on one key, several times:
// exactly one wins, every other gets ErrExists, and the object holds the
// winner's bytes.
func testConcurrentPutIfAbsent(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	const writers, rounds = 16, 8
	for round := range rounds {
		key := fmt.Sprintf("manifest/%020d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, writers)
			payload = func(w int) []byte { return fmt.Appendf(nil, "writer %d of round %d", w, round) }
		)
		for w := range writers {
			wg.Go(func() {
				<-start
				errs[w] = s.PutIfAbsent(ctx, key, payload(w))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both won", round, winner, w)
				}
				winner = w
			case errors.Is(err, objstore.ErrExists):
			default:
				t.Fatalf("round %d: writer %d: unexpected error %v", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		if got := mustGet(t, s, key); !bytes.Equal(got, payload(winner)) {
			t.Fatalf("round %d: object = %q, want the winner's %q", round, got, payload(winner))
		}
	}
}

// testConcurrentMixed runs writers and readers on disjoint and shared keys;
// with -race it catches unsynchronised state, and it checks that a reader
// never sees a torn object (every version is one repeated byte).
func testConcurrentMixed(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	const workers, iters = 8, 20
	mustPut(t, s, "shared", bytes.Repeat([]byte{'a'}, 4096))
	var wg sync.WaitGroup
	errc := make(chan error, workers*2)
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				key := fmt.Sprintf("w%d/%d", w, i)
				if err := s.Put(ctx, key, []byte(key)); err != nil {
					errc <- err
					return
				}
				if err := s.Put(ctx, "shared", bytes.Repeat([]byte{byte('a' + (w+i)%26)}, 4096)); err != nil {
					errc <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range iters {
				b, err := s.Get(ctx, "shared")
				if err != nil {
					errc <- err
					return
				}
				if len(b) != 4096 || bytes.Count(b, b[:1]) != 4096 {
					errc <- fmt.Errorf("torn read of shared: %d bytes, first %q", len(b), b[:min(len(b), 8)])
					return
				}
				if _, err := s.List(ctx, fmt.Sprintf("w%d/", w)); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	l, err := s.List(ctx, "w")
	if err != nil || len(l) != workers*iters {
		t.Fatalf("List(w) = %d objects, %v; want %d", len(l), err, workers*iters)
	}
}

// testLargeObject moves an object bigger than the S3 SDK's default part
// size, so multipart uploads (and their create-if-absent) are exercised.
func testLargeObject(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore)
	big := make([]byte, 9<<20+123)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	if err := s.PutIfAbsent(ctx, "big", big); err != nil {
		t.Fatalf("PutIfAbsent big: %v", err)
	}
	wantErr(t, "second PutIfAbsent big", s.PutIfAbsent(ctx, "big", big[:10]), objstore.ErrExists, "big")
	if got := mustGet(t, s, "big"); !bytes.Equal(got, big) {
		t.Fatalf("Get big: %d bytes back, want %d (equal=%v)", len(got), len(big), false)
	}
	got, err := s.GetRange(ctx, "big", 8<<20, 1<<20)
	if err != nil || !bytes.Equal(got, big[8<<20:9<<20]) {
		t.Fatalf("GetRange big: %d bytes, %v", len(got), err)
	}
	if info, err := s.Stat(ctx, "big"); err != nil || info.Size != int64(len(big)) {
		t.Fatalf("Stat big = %+v, %v", info, err)
	}
}

// testModel drives random operation sequences against the store and a map,
// and requires identical answers. All iterations share one store; each
// works under its own key prefix, so a backend that is slow to create (an
// S3 server) is created once.
func testModel(t *testing.T, newStore NewStore) {
	s := open(t, newStore)
	var iteration int
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		ns := fmt.Sprintf("model%04d/", iteration)
		keys := []string{ns + "k0", ns + "k1", ns + "k2", ns + "d/k0", ns + "d/k1", ns + "d/e/k0", ns + "d0"}
		prefixes := []string{ns, ns + "k", ns + "d", ns + "d/", ns + "d/e/", ns + "x"}
		ctx := context.Background()
		model := map[string][]byte{}
		data := func() []byte { return rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "data") }
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(rt *rapid.T) {
				k, d := rapid.SampledFrom(keys).Draw(rt, "key"), data()
				if err := s.Put(ctx, k, d); err != nil {
					rt.Fatalf("Put(%q): %v", k, err)
				}
				model[k] = d
			},
			"putIfAbsent": func(rt *rapid.T) {
				k, d := rapid.SampledFrom(keys).Draw(rt, "key"), data()
				err := s.PutIfAbsent(ctx, k, d)
				if _, exists := model[k]; exists {
					if !errors.Is(err, objstore.ErrExists) {
						rt.Fatalf("PutIfAbsent(%q) over an existing object: %v", k, err)
					}
					return
				}
				if err != nil {
					rt.Fatalf("PutIfAbsent(%q): %v", k, err)
				}
				model[k] = d
			},
			"get": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				off := rapid.Int64Range(0, 70).Draw(rt, "offset")
				n := rapid.Int64Range(-1, 70).Draw(rt, "length")
				got, err := s.GetRange(ctx, k, off, n)
				want, exists := model[k]
				if !exists {
					if !errors.Is(err, objstore.ErrNotFound) {
						rt.Fatalf("GetRange(%q) of a missing object: %v", k, err)
					}
					return
				}
				if err != nil {
					rt.Fatalf("GetRange(%q): %v", k, err)
				}
				lo, hi := objstore.ClampRange(int64(len(want)), off, n)
				if !bytes.Equal(got, want[lo:hi]) {
					rt.Fatalf("GetRange(%q, %d, %d) = %q, want %q", k, off, n, got, want[lo:hi])
				}
			},
			"delete": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				if err := s.Delete(ctx, k); err != nil {
					rt.Fatalf("Delete(%q): %v", k, err)
				}
				delete(model, k)
			},
			"deleteMany": func(rt *rapid.T) {
				ks := rapid.SliceOfN(rapid.SampledFrom(keys), 0, len(keys)).Draw(rt, "keys")
				if err := s.DeleteMany(ctx, ks); err != nil {
					rt.Fatalf("DeleteMany(%q): %v", ks, err)
				}
				for _, k := range ks {
					delete(model, k)
				}
			},
			"list": func(rt *rapid.T) {
				p := rapid.SampledFrom(prefixes).Draw(rt, "prefix")
				got, err := s.List(ctx, p)
				if err != nil {
					rt.Fatalf("List(%q): %v", p, err)
				}
				var want []string
				for k := range model {
					if strings.HasPrefix(k, p) {
						want = append(want, k)
					}
				}
				slices.Sort(want)
				var gotKeys []string
				for _, o := range got {
					gotKeys = append(gotKeys, o.Key)
					if o.Size != int64(len(model[o.Key])) {
						rt.Fatalf("List(%q): %s size %d, want %d", p, o.Key, o.Size, len(model[o.Key]))
					}
				}
				if !slices.Equal(gotKeys, want) {
					rt.Fatalf("List(%q) = %q, want %q", p, gotKeys, want)
				}
			},
		})
	})
}
