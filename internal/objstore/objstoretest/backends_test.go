package objstoretest_test

import (
	"testing"

	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

// The helpers hand out working stores: the whole suite over each.
func TestBackends(t *testing.T) {
	for _, b := range objstoretest.Backends() {
		t.Run(b.Name, func(t *testing.T) { objstoretest.Run(t, objstoretest.NewStore(b.New)) })
	}
}
