package localdir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// recyclingStore is a store whose deleted files may be reused at once.
func recyclingStore(t *testing.T) *Store {
	t.Helper()
	s, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.pool.mu.cooldown = 0
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// setCooldown sets how long the store's deleted files wait before reuse.
func setCooldown(s *Store, d time.Duration) {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.pool.mu.cooldown = d
}

// recycledNames lists the recycled files waiting in the store's root.
func recycledNames(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(s.root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), poolPrefix+"r-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// reuseInto takes the recycled file the pool would hand a write next and
// writes data into it, as a pooled write does; the file's pool name is
// then removed (the write's object is of no interest).
func reuseInto(t *testing.T, s *Store, data []byte) {
	t.Helper()
	pf, ok := s.pool.reuse()
	if !ok {
		t.Fatal("no recycled file to reuse")
	}
	if _, err := pf.f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := pf.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pf.path); err != nil {
		t.Fatal(err)
	}
}

// A deleted object's file is kept and handed to a later write: a
// descriptor held on the deleted object sees that write's bytes (the
// same file, not merely a reused inode number), its name is gone from
// List, and Close removes what is still waiting.
func TestDeleteRecyclesTheFile(t *testing.T) {
	ctx := context.Background()
	s := recyclingStore(t)
	if err := s.PutIfAbsent(ctx, "wal/1", []byte("first object")); err != nil {
		t.Fatal(err)
	}
	// The write started the filler; once it has filled the pool it waits
	// for a write that leaves the pool low, and none comes: from here on
	// the test alone reuses files.
	for len(s.pool.ready) < poolSize {
		time.Sleep(time.Millisecond)
	}
	held, err := os.Open(filepath.Join(s.root, "wal", "1"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := s.Delete(ctx, "wal/1"); err != nil {
		t.Fatal(err)
	}
	recycled := recycledNames(t, s)
	if len(recycled) != 1 {
		t.Fatalf("recycled files after one delete: %v, want one", recycled)
	}
	// Emptied at once: a file waiting for reuse holds no blocks.
	if fi, err := os.Stat(filepath.Join(s.root, recycled[0])); err != nil || fi.Size() != 0 {
		t.Fatalf("the recycled file: %v, %v; want it empty", fi, err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("List after the delete: %v, %v; want nothing", l, err)
	}
	if _, err := s.Get(ctx, "wal/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get of the deleted object: %v, want ErrNotFound", err)
	}

	second := []byte("second object")
	reuseInto(t, s, second)
	got := make([]byte, 64)
	n, err := held.ReadAt(got, 0)
	if !bytes.Equal(got[:n], second) {
		t.Fatalf("the held descriptor reads %q (%v), want the next write's %q: its file was not reused", got[:n], err, second)
	}

	if err := s.PutIfAbsent(ctx, "wal/2", second); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "wal/2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recycledNames(t, s); len(got) != 0 {
		t.Fatalf("recycled files left after Close: %v", got)
	}
}

// A reader that opened an object before it was deleted and its file
// reused reads ErrNotFound, not the new bytes: whether the reuse came
// before it checked the file (the name no longer leads to it) or while it
// read (the file's size and modification time changed). The new bytes
// are as long as the old, so without the checks the read would succeed.
func TestReaderOfRecycledFileSeesDeletion(t *testing.T) {
	ctx := context.Background()
	old, next := []byte("old object bytes"), []byte("new object bytes")
	for _, tc := range []struct {
		name string
		read func(f *os.File, fi os.FileInfo, path string) ([]byte, error)
	}{
		{"reused before the check", func(f *os.File, _ os.FileInfo, path string) ([]byte, error) {
			return readOpened(f, path, 0, -1)
		}},
		{"reused during the read", func(f *os.File, fi os.FileInfo, _ string) ([]byte, error) {
			return readChecked(f, fi, 0, -1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := recyclingStore(t)
			if err := s.PutIfAbsent(ctx, "sst/1", old); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(s.root, "sst", "1")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if !sameObject(path, fi) {
				t.Fatal("a file just opened is not the object's")
			}
			if err := s.Delete(ctx, "sst/1"); err != nil {
				t.Fatal(err)
			}
			reuseInto(t, s, next)
			got, err := tc.read(f, fi, path)
			if !errors.Is(err, errRecycled) {
				t.Fatalf("read %q, %v; want errRecycled", got, err)
			}
			if _, err := s.Get(ctx, "sst/1"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get after the delete: %v, want ErrNotFound", err)
			}
		})
	}
}

// Only a lone regular file is recycled: a file with another hard link
// (a backup's copy) and the target of a symbolic link at the key's path
// keep their bytes when the key is deleted.
func TestRecycleSparesSharedFiles(t *testing.T) {
	ctx := context.Background()
	precious := []byte("precious bytes")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store, path, elsewhere string)
	}{
		{"hard link", func(t *testing.T, s *Store, path, elsewhere string) {
			if err := s.PutIfAbsent(ctx, "sst/1", precious); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(path, elsewhere); err != nil {
				t.Fatal(err)
			}
		}},
		{"symbolic link", func(t *testing.T, s *Store, path, elsewhere string) {
			if err := os.WriteFile(elsewhere, precious, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := recyclingStore(t)
			// A write first: a pool that never wrote recycles nothing.
			if err := s.PutIfAbsent(ctx, "wal/1", []byte("x")); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(s.root, "sst", "1")
			elsewhere := filepath.Join(t.TempDir(), "copy")
			tc.setup(t, s, path, elsewhere)
			if err := s.Delete(ctx, "sst/1"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Fatalf("the key's path after Delete: %v, want it gone", err)
			}
			if got := recycledNames(t, s); len(got) != 0 {
				t.Fatalf("recycled %v", got)
			}
			if _, ok := s.pool.reuse(); ok {
				t.Fatal("the pool reused a file")
			}
			if got, err := os.ReadFile(elsewhere); err != nil || !bytes.Equal(got, precious) {
				t.Fatalf("the other name reads %q, %v; want %q", got, err, precious)
			}
		})
	}
}

// reuseWaiting puts a file named name holding content, last modified at
// mtime, in the pool as a recycled file waiting for reuse, has the pool
// hand it out, and returns what the handed-out file then is.
func reuseWaiting(t *testing.T, s *Store, name string, content []byte, mtime time.Time) os.FileInfo {
	t.Helper()
	path := filepath.Join(s.root, poolPrefix+name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	s.pool.mu.Lock()
	s.pool.mu.recycled = append(s.pool.mu.recycled, recycledFile{path: path})
	s.pool.mu.Unlock()
	pf, ok := s.pool.reuse()
	if !ok {
		t.Fatal("the recycled file was not reused")
	}
	defer pf.f.Close()
	fi, err := pf.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// The pool hands out a recycled file empty even if it was written to
// while it waited (a Put racing the Delete can put its file where the
// deleted one was, and that file is the one recycled).
func TestReusedFileIsEmpty(t *testing.T) {
	s := recyclingStore(t)
	if fi := reuseWaiting(t, s, "r-raced", []byte("a racing Put's object"), time.Now()); fi.Size() != 0 {
		t.Fatalf("the reused file holds %d bytes; want it empty", fi.Size())
	}
}

// A recycled file that is empty already is handed out untouched: a
// truncation would mark it on ext4 for writeback at its next close
// (prepareRecycled). Linux's ftruncate sets the modification time even
// when the size does not change, so an old one left as it was shows that
// no truncation ran.
func TestEmptyRecycledFileIsNotTruncated(t *testing.T) {
	s := recyclingStore(t)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	fi := reuseWaiting(t, s, "r-empty", nil, old)
	if fi.Size() != 0 || !fi.ModTime().Equal(old) {
		t.Fatalf("the reused file: size %d, modified %v; want it empty and untouched (modified %v)", fi.Size(), fi.ModTime(), old)
	}
}

// A store that never wrote (an offline GC, say) unlinks what it deletes:
// recycled files would only wait for its Close.
func TestDeleteOnlyStoreUnlinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.PutIfAbsent(ctx, "sst/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Delete(ctx, "sst/1"); err != nil {
		t.Fatal(err)
	}
	if got := recycledNames(t, s); len(got) != 0 {
		t.Fatalf("a store that never wrote recycled %v", got)
	}
}

// A recycled file that vanished before reuse (another process's sweep of
// orphaned pool files) is skipped, and writes go on.
func TestRecycledFileVanished(t *testing.T) {
	ctx := context.Background()
	s := recyclingStore(t)
	// The pool's filler, still filling after the first write, must not
	// reuse the file before the sweep: it would hold it locked.
	setCooldown(s, time.Hour)
	if err := s.PutIfAbsent(ctx, "wal/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "wal/1"); err != nil {
		t.Fatal(err)
	}
	if n := removeOrphanedPoolFiles(s.root); n != 1 {
		t.Fatalf("the sweep removed %d files, want the unlocked recycled one", n)
	}
	setCooldown(s, 0)
	if _, ok := s.pool.reuse(); ok {
		t.Fatal("reused a file that is gone")
	}
	if err := s.PutIfAbsent(ctx, "wal/2", []byte("y")); err != nil {
		t.Fatal(err)
	}
}

// Under concurrent writes, deletes and reads with every deleted file
// reused at once, a read returns the bytes written under its key or
// ErrNotFound, never another object's.
func TestRecyclingConcurrentReads(t *testing.T) {
	ctx := context.Background()
	s := recyclingStore(t)
	const writers, rounds = 4, 200
	// Lengths differ from round to round, so that a reused file's old
	// bytes would show past a shorter new object.
	content := func(w, r int) []byte {
		return fmt.Appendf(nil, "writer %d round %d %s", w, r, strings.Repeat("x", r%7))
	}
	key := func(w, r int) string { return fmt.Sprintf("wal/%d/%d", w, r) }
	var wg sync.WaitGroup
	var errs, found atomic.Int64
	fail := func(err error) {
		if errs.Add(1) <= 5 {
			t.Error(err)
		}
	}
	for w := 0; w < writers; w++ {
		var latest atomic.Int64 // the round whose object the writer last put
		latest.Store(-1)
		var done atomic.Bool
		var seen atomic.Int64 // objects this writer's reader found
		// The writer: each round's object replaces the last one's.
		wg.Go(func() {
			defer done.Store(true)
			// At least rounds, and on until the reader has found one: the
			// test must race reads with deletes however the two are
			// scheduled.
			for r := 0; r < rounds || seen.Load() == 0; r++ {
				if err := s.Put(ctx, key(w, r), content(w, r)); err != nil {
					fail(err)
					return
				}
				latest.Store(int64(r))
				if r > 0 {
					if err := s.Delete(ctx, key(w, r-1)); err != nil {
						fail(err)
						return
					}
				}
			}
		})
		wg.Go(func() {
			for !done.Load() {
				r := int(latest.Load())
				if r < 0 {
					continue
				}
				got, err := s.Get(ctx, key(w, r))
				if errors.Is(err, objstore.ErrNotFound) {
					continue
				}
				if err != nil {
					fail(err)
				} else if !bytes.Equal(got, content(w, r)) {
					fail(fmt.Errorf("Get(%s) = %q, want %q", key(w, r), got, content(w, r)))
				}
				seen.Add(1)
				found.Add(1)
			}
		})
	}
	wg.Wait()
	if found.Load() == 0 {
		t.Fatal("no read found an object: the test raced nothing")
	}
}

// BenchmarkPutAndCollect is a store that writes an object per commit and
// garbage-collects behind it: each op writes an object and deletes the one
// written 4096 ops before, the first 4096 written before the clock starts.
// Deleted files are reused at once (the steady state, where they have long
// cooled) or never. cpu-µs/op is the process's CPU, the pool's filler
// included: creating a file is where a file system with many recently
// freed inodes spends it.
func BenchmarkPutAndCollect(b *testing.B) {
	for _, bc := range []struct {
		name  string
		limit int
	}{{"recycle", maxRecycled}, {"unlink", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Create(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.pool.mu.Lock()
			s.pool.mu.cooldown, s.pool.mu.maxRecycled = 0, bc.limit
			s.pool.mu.Unlock()
			data := bytes.Repeat([]byte("w"), 2048)
			const lag = 4096
			key := func(i int) string { return fmt.Sprintf("wal/%d", i) }
			for i := 0; i < lag; i++ {
				if err := s.PutIfAbsent(ctx, key(i), data); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.PutIfAbsent(ctx, key(lag+i), data); err != nil {
					b.Fatal(err)
				}
				if err := s.Delete(ctx, key(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// processCPU is the process's user and system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
