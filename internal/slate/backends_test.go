package slate

import (
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

type backend struct {
	name string
	open func(t *testing.T) objstore.Store
}

// testBackends lists the object stores the store tests run against.
func testBackends(t *testing.T) []backend {
	return []backend{
		{"mem", func(t *testing.T) objstore.Store { return objstore.NewMem() }},
		{"localdir", func(t *testing.T) objstore.Store {
			s, err := localdir.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"s3", func(t *testing.T) objstore.Store { return objstoretest.NewS3(t) }},
	}
}
