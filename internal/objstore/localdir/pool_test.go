package localdir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// poolFiles lists the pooled temporary files in the store's root.
func poolFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".objstore-tmp-pool-") {
			out[e.Name()] = true
		}
	}
	return out
}

func waitPool(t *testing.T, dir string, n int) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := poolFiles(t, dir)
		if len(p) >= n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d files after 5s, want %d", len(p), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPool: writes consume pre-created files from the pool (the fast path
// is really taken), pooled files are never listed, a sweep of temporary
// files under a live pool costs no write, and Close leaves no pool file.
func TestPool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if p := poolFiles(t, dir); len(p) != 0 {
		t.Fatalf("a store that never wrote created pool files: %v", p)
	}
	if err := s.PutIfAbsent(ctx, "wal/1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	// The first write may itself take a file the filler had just made, and
	// the filler tops up only at half: wait for more than half, not all.
	before := waitPool(t, dir, 17)
	if err := s.PutIfAbsent(ctx, "wal/2", []byte("second")); err != nil {
		t.Fatal(err)
	}
	after := poolFiles(t, dir)
	used := 0
	for name := range before {
		if !after[name] {
			used++
		}
	}
	if used != 1 {
		t.Fatalf("a write consumed %d pooled files, want 1 (before %v, after %v)", used, before, after)
	}
	// A refused create-if-absent returns its pooled file, leaving nothing.
	if err := s.PutIfAbsent(ctx, "wal/2", []byte("again")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent over an object = %v, want ErrExists", err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 2 {
		t.Fatalf("List = %v, %v; want wal/1 and wal/2 only", l, err)
	}
	// Sweep every temporary file, pooled ones included, then write: the
	// writes fall back to fresh temporary files.
	waitPool(t, dir, 1)
	if _, err := s.RemoveStaleTemp(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		key := fmt.Sprintf("wal/%d", 10+i)
		if err := s.PutIfAbsent(ctx, key, []byte(key)); err != nil {
			t.Fatalf("write after a sweep: %v", err)
		}
		if err := s.Put(ctx, "manifest/current", []byte(key)); err != nil {
			t.Fatalf("overwrite after a sweep: %v", err)
		}
	}
	for i := range 8 {
		key := fmt.Sprintf("wal/%d", 10+i)
		if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, []byte(key)) {
			t.Fatalf("Get(%s) = %q, %v", key, got, err)
		}
	}
	if got, _ := s.Get(ctx, "manifest/current"); string(got) != "wal/17" {
		t.Fatalf("manifest/current = %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if p := poolFiles(t, dir); len(p) != 0 {
		t.Fatalf("Close left pool files: %v", p)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal", "2")); err != nil {
		t.Fatal(err)
	}
}
