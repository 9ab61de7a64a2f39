package localdir_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := localdir.Create(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func open(t *testing.T, dir string) *localdir.Store {
	t.Helper()
	s, err := localdir.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Objects are plain files at their key's path; a second Store over the same
// directory sees them (the "restart" case).
func TestLayoutAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.PutIfAbsent(ctx, "manifest/00000000000000000001", []byte("m1")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest", "00000000000000000001"))
	if err != nil || string(b) != "m1" {
		t.Fatalf("file = %q, %v", b, err)
	}
	_ = s.Close()
	r := open(t, dir)
	if got, err := r.Get(ctx, "manifest/00000000000000000001"); err != nil || string(got) != "m1" {
		t.Fatalf("reopened Get = %q, %v", got, err)
	}
	if err := r.PutIfAbsent(ctx, "manifest/00000000000000000001", nil); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("reopened PutIfAbsent = %v, want ErrExists", err)
	}
}

// Temporary files a crashed writer left behind are never listed, and their
// names cannot be used as keys.
func TestTempFilesHidden(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(ctx, "wal/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "wal", ".objstore-tmp-123456")
	if err := os.WriteFile(stray, []byte("half a write"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, "")
	if err != nil || len(l) != 1 || l[0].Key != "wal/1" {
		t.Fatalf("List = %v, %v; want only wal/1", l, err)
	}
	if _, err := s.Get(ctx, "wal/.objstore-tmp-123456"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("Get of a temp name = %v, want ErrInvalidKey", err)
	}
	// Successful writes leave no temporary files of their own.
	for i := range 5 {
		_ = s.Put(ctx, "wal/2", []byte{byte(i)})
		_ = s.PutIfAbsent(ctx, "wal/3", []byte{byte(i)})
	}
	entries, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != ".objstore-tmp-123456,1,2,3" {
		t.Fatalf("directory holds %v", names)
	}
}

func TestKeyConflicts(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if err := s.Put(ctx, "a", []byte("file")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "d/x", []byte("in dir")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"put under a file", s.Put(ctx, "a/b", nil)},
		{"put-if-absent under a file", s.PutIfAbsent(ctx, "a/b", nil)},
		{"put over a directory", s.Put(ctx, "d", nil)},
		{"put-if-absent over a directory", s.PutIfAbsent(ctx, "d", nil)},
	} {
		if !errors.Is(tc.err, localdir.ErrKeyConflict) {
			t.Errorf("%s: err = %v, want ErrKeyConflict", tc.name, tc.err)
		}
	}
	// Nothing changed, and Delete of the directory name is a no-op.
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, "")
	if err != nil || len(l) != 2 {
		t.Fatalf("List = %v, %v", l, err)
	}
}

func TestOpenRejectsAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := localdir.Open(f); err == nil {
		t.Fatal("Open of a regular file succeeded")
	}
}

const (
	childDirEnv = "MORAINE_OBJSTORE_CHILD_DIR"
	childIDEnv  = "MORAINE_OBJSTORE_CHILD_ID"
	childRounds = 40
)

// TestCrossProcessPutIfAbsent re-executes this test binary as several child
// processes that race PutIfAbsent on the same keys of one directory. For
// every key exactly one process must win, and the object must hold the
// winner's bytes. An in-process lock (as in gocloud's fileblob) fails this.
func TestCrossProcessPutIfAbsent(t *testing.T) {
	const children = 6
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = map[int][]int{} // round -> winning children
	)
	for id := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childIDEnv+"="+strconv.Itoa(id))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var round int
				if _, err := fmt.Sscanf(sc.Text(), "WIN %d", &round); err == nil {
					mu.Lock()
					wins[round] = append(wins[round], id)
					mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("child %d: %v\n%s", id, err, stderr.String())
			}
		})
	}
	// Open the gate once every child is running, so they start together.
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	s := open(t, filepath.Join(dir, "store"))
	for round := range childRounds {
		w := wins[round]
		if len(w) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", round, w)
		}
		got, err := s.Get(context.Background(), fmt.Sprintf("race/%d", round))
		if err != nil || string(got) != fmt.Sprintf("child %d", w[0]) {
			t.Fatalf("round %d: object %q, %v; winner was child %d", round, got, err, w[0])
		}
	}
}

// TestCrossProcessChild is the child side of TestCrossProcessPutIfAbsent; it
// does nothing unless started by it.
func TestCrossProcessChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		return
	}
	id := os.Getenv(childIDEnv)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "gate")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gate never opened")
		}
		time.Sleep(time.Millisecond)
	}
	s, err := localdir.Create(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := range childRounds {
		err := s.PutIfAbsent(ctx, fmt.Sprintf("race/%d", round), []byte("child "+id))
		switch {
		case err == nil:
			fmt.Printf("WIN %d\n", round)
		case errors.Is(err, objstore.ErrExists):
		default:
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

func TestRemoveStaleTemp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(ctx, "wal/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "wal", ".objstore-tmp-old")
	fresh := filepath.Join(dir, ".objstore-tmp-fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	n, err := s.RemoveStaleTemp(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("RemoveStaleTemp = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("stale temp file survives: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh temp file removed: %v", err)
	}
	if got, err := s.Get(ctx, "wal/1"); err != nil || string(got) != "x" {
		t.Fatalf("object damaged: %q, %v", got, err)
	}
}
