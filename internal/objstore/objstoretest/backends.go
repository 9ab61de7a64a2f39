package objstoretest

import (
	"path/filepath"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
)

// Backend names a way to make a fresh, empty store for a test.
type Backend struct {
	Name string
	New  func(t *testing.T) objstore.Store
}

// Backends returns every backend that runs in-process: memory, a local
// directory and S3 (gofakes3 on loopback). A package runs its store-facing
// tests against all of them with
//
//	for _, b := range objstoretest.Backends() {
//		t.Run(b.Name, func(t *testing.T) { test(t, b.New(t)) })
//	}
//
// Each New registers cleanups on t; stores are closed when t ends.
func Backends() []Backend {
	return []Backend{
		{Name: "mem", New: func(t *testing.T) objstore.Store {
			s := objstore.NewMem()
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{Name: "localdir", New: func(t *testing.T) objstore.Store { return NewDir(t) }},
		{Name: "s3", New: func(t *testing.T) objstore.Store { return NewS3(t) }},
	}
}

// NewDir returns a local-directory store in a fresh temporary directory,
// closed when the test ends. Its Root is the directory, for tests that
// reopen it or look at the files.
func NewDir(t testing.TB) *localdir.Store {
	t.Helper()
	s, err := localdir.Create(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatalf("objstoretest: open directory store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
