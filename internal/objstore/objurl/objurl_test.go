package objurl_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
)

func mustOpen(t *testing.T, raw string) objstore.Store {
	t.Helper()
	s, err := objurl.Open(context.Background(), raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	return s
}

var memN atomic.Int64

// The named-memory handle is code of this package: the whole suite.
func TestConformanceNamedMem(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return mustOpen(t, fmt.Sprintf("mem://conformance-%d", memN.Add(1)))
	})
}

// Every scheme this build opens gives a working store. (The other backends
// run the whole suite in their own packages.)
func TestEverySchemeOpens(t *testing.T) {
	ctx := context.Background()
	srv := objstoretest.StartS3(t)
	for _, tc := range []struct{ scheme, url string }{
		{"mem", "mem://"},
		{"file", "file://" + filepath.ToSlash(t.TempDir())},
		{"s3", srv.URL(srv.NewBucket(t), "pre/fix/")},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			s := mustOpen(t, tc.url)
			defer s.Close()
			if err := s.PutIfAbsent(ctx, "a/b", []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := s.PutIfAbsent(ctx, "a/b", []byte("w")); !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("second PutIfAbsent = %v", err)
			}
			l, err := s.List(ctx, "a/")
			if err != nil || len(l) != 1 || l[0].Key != "a/b" || l[0].Size != 1 {
				t.Fatalf("List = %v, %v", l, err)
			}
		})
	}
}

func TestNamedMemIsShared(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { objurl.ForgetMem("shared-test") })
	a := mustOpen(t, "mem://shared-test")
	if err := a.PutIfAbsent(ctx, "manifest/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	if _, err := a.Get(ctx, "manifest/1"); !errors.Is(err, objstore.ErrClosed) {
		t.Fatalf("closed handle Get = %v, want ErrClosed", err)
	}
	b := mustOpen(t, "mem://shared-test")
	if got, err := b.Get(ctx, "manifest/1"); err != nil || string(got) != "x" {
		t.Fatalf("reopened Get = %q, %v", got, err)
	}
	// A differently named store and an anonymous one are separate.
	for _, raw := range []string{"mem://other-test", "mem://"} {
		if _, err := mustOpen(t, raw).Get(ctx, "manifest/1"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s sees shared-test's object: %v", raw, err)
		}
	}
	objurl.ForgetMem("other-test")
	objurl.ForgetMem("shared-test")
	if _, err := mustOpen(t, "mem://shared-test").Get(ctx, "manifest/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after ForgetMem: %v", err)
	}
}

func TestFileURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct{ url, path string }{
		{"file://" + filepath.ToSlash(filepath.Join(dir, "abs")), filepath.Join(dir, "abs", "k")},
		{"file://localhost" + filepath.ToSlash(filepath.Join(dir, "lh")), filepath.Join(dir, "lh", "k")},
		{"file://./rel/dir", filepath.Join(dir, "rel", "dir", "k")},
		{"file:opaque", filepath.Join(dir, "opaque", "k")},
	} {
		// Open does not make a directory; Create does.
		if _, err := objurl.Open(ctx, tc.url); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open of %s, which does not exist: %v", tc.url, err)
		}
		s, err := objurl.Create(ctx, tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "k", []byte(tc.url)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(tc.path)
		if err != nil || string(b) != tc.url {
			t.Fatalf("%s: file %s = %q, %v", tc.url, tc.path, b, err)
		}
		_ = s.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://host/x", "unknown object store scheme"},
		{"/just/a/path", "a directory is a file:// URL, e.g. file:///just/a/path"},
		{"file://host/x", "host"},
		{"file://", "without a path"},
		{"file:///tmp/x?sync=false", "no parameters"},
		{"mem://x?y=1", "no parameters"},
		{"s3://", "no bucket"},
		{"s3://b?bogus=1", "unknown parameter"},
		{"://bad", "parse"},
	} {
		_, err := objurl.Open(context.Background(), tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want error containing %q", tc.url, err, tc.want)
		}
	}
	_, err := objurl.Open(context.Background(), "ftp://x")
	if !errors.Is(err, objurl.ErrUnknownScheme) || !strings.Contains(err.Error(), "file, ") || !strings.Contains(err.Error(), "mem, ") {
		t.Fatalf("unknown scheme error = %v", err)
	}
}
