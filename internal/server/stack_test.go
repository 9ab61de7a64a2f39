package server

import (
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
	"github.com/moraine-db/moraine/internal/slate"
)

// TestWALInFlightFor: one WAL write at a time on a local directory, as
// many as slate allows on an object store.
func TestWALInFlightFor(t *testing.T) {
	ld, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if got := walInFlightFor(ld); got != 1 {
		t.Errorf("local directory: %d in flight", got)
	}
	if got := walInFlightFor(objstore.NewMem()); got != slate.MaxWALInFlight {
		t.Errorf("object store: %d in flight, want %d", got, slate.MaxWALInFlight)
	}
}
