package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestCheckPrefixCanFail shows the prefix check refuses catalogs that are
// not the acknowledged prefix: commits present that were never
// acknowledged (beyond one in flight per connection), and acknowledged
// commits that are missing.
func TestCheckPrefixCanFail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := serveStack(ctx, objstore.NewMem(), server.StackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	cfg := workload.Config{ConnString: conninfo(s.addr, "lake"), Writers: 2, CommitsPerWriter: 4, Tables: 2,
		Columns: crashColumns, Compactor: true, RetryWait: time.Millisecond, Seed: 5}
	res := runWorkload(t, ctx, cfg)
	if n, err := checkAt(ctx, s.addr, "lake", res, crashColumns); err != nil || n != 0 {
		t.Fatalf("complete run: %d unacknowledged present, %v", n, err)
	}
	// Nothing acknowledged: every writer has several commits present.
	if _, err := checkAt(ctx, s.addr, "lake", nil, crashColumns); !errors.Is(err, errPrefix) {
		t.Fatalf("no acknowledgements: got %v, want a prefix violation", err)
	}
	// A commit acknowledged at another snapshot than the catalog holds it.
	other := runWorkload(t, ctx, workload.Config{ConnString: conninfo(s.addr, "other"), Writers: 2, CommitsPerWriter: 6,
		Tables: 2, Columns: crashColumns, RetryWait: time.Millisecond, Seed: 6})
	if _, err := checkAt(ctx, s.addr, "lake", other, crashColumns); !errors.Is(err, errPrefix) {
		t.Fatalf("another run's acknowledgements: got %v, want a prefix violation", err)
	}
	// Wrong column count: every live file's stats look incomplete.
	if _, err := checkAt(ctx, s.addr, "lake", res, crashColumns+1); !errors.Is(err, errPrefix) {
		t.Fatalf("wrong column count: got %v, want a prefix violation", err)
	}
}
