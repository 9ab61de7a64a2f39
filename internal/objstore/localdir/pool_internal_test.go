package localdir

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPoolWakesFillerOnlyWhenLow: a take that leaves the pool above half
// full does not kick the filler; the take that brings it to half does, and
// so does one that finds it empty.
func TestPoolWakesFillerOnlyWhenLow(t *testing.T) {
	dir := t.TempDir()
	p := newPool(dir)
	p.mu.started = true // no filler: the test watches its kicks instead
	for len(p.ready) < cap(p.ready) {
		f, err := os.CreateTemp(dir, tmpPrefix+"pool-*")
		if err != nil {
			t.Fatal(err)
		}
		p.ready <- pooledFile{path: f.Name(), f: f, created: time.Now()}
	}
	kicked := func() bool {
		select {
		case <-p.kick:
			return true
		default:
			return false
		}
	}
	for i := 1; i <= cap(p.ready); i++ {
		f, ok := p.take()
		if !ok {
			t.Fatalf("take %d: pool empty", i)
		}
		f.discard()
		left := cap(p.ready) - i
		if want := left <= cap(p.ready)/2; kicked() != want {
			t.Fatalf("take %d leaves %d of %d: kicked %v, want %v", i, left, cap(p.ready), !want, want)
		}
	}
	_, ok := p.take()
	if k := kicked(); ok || !k {
		t.Fatalf("a take from the empty pool: got a file %v, kicked the filler %v; want no file and a kick", ok, k)
	}
}

// A process killed with the store open leaves its pool files behind; the
// next writer's pool removes them (their lock died with their owner) and
// leaves a live owner's alone.
func TestOrphanedPoolFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	// An orphan: a pool file nobody holds a lock on.
	orphan := filepath.Join(dir, poolPrefix+"dead")
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A live one: held by an open, locked descriptor.
	live := filepath.Join(dir, poolPrefix+"live")
	lf, err := os.Create(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if n := removeOrphanedPoolFiles(dir); n != 1 {
		t.Fatalf("removed %d files, want the orphan", n)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the orphan is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live pool file was removed: %v", err)
	}
}

// An idle pool keeps its files: refresh renews the ones about to age out
// (their modification time, and the creation time take checks) instead of
// replacing them, and drops one that vanished.
func TestPoolRefreshKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	p := newPool(dir)
	p.mu.started = true // no filler: the test calls refresh itself
	old := time.Now().Add(-poolMaxAge)
	var paths []string
	for i := 0; i < 3; i++ {
		f, err := os.CreateTemp(dir, poolPrefix+"*")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.Name(), old, old); err != nil {
			t.Fatal(err)
		}
		p.ready <- pooledFile{path: f.Name(), f: f, created: old}
		paths = append(paths, f.Name())
	}
	if err := os.Remove(paths[2]); err != nil { // a sweep took this one
		t.Fatal(err)
	}
	p.refresh()
	if len(p.ready) != 2 {
		t.Fatalf("%d files pooled after refresh, want the two that still exist", len(p.ready))
	}
	for range 2 {
		f := <-p.ready
		if f.path != paths[0] && f.path != paths[1] {
			t.Fatalf("pooled %s, which refresh created instead of keeping %v", f.path, paths[:2])
		}
		fi, err := os.Stat(f.path)
		if err != nil || !fi.ModTime().After(old) || !f.created.After(old) {
			t.Fatalf("%s: %v, modified %v, counted from %v; want both renewed after %v", f.path, err, fi.ModTime(), f.created, old)
		}
		f.discard()
	}
}
