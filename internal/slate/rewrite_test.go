package slate

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// holding returns the keys of the store's objects whose bytes contain
// secret.
func holding(t *testing.T, s objstore.Store, secret string) []string {
	t.Helper()
	ctx := context.Background()
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		b, err := s.Get(ctx, in.Key)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			out = append(out, in.Key)
		}
	}
	return out
}

// TestRewriteErasesDeletedValues: a deleted value and an overwritten one
// stay in the store's objects (WAL, sorted tables) through ordinary
// compaction, which is driven by volume; after Rewrite and a GC past the
// grace, no object holds them, while the live data reads back.
func TestRewriteErasesDeletedValues(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	now := time.Now()
	opts := testOpts()
	opts.L0CompactionTrigger = 100 // volume never compacts here
	opts.Now = func() time.Time { return now }
	d := mustOpen(t, s, opts)
	defer d.Close(ctx)
	put(t, d, "gone", "SECRET-deleted", "changed", "SECRET-overwritten", "kept", "live-value")
	for i := 0; i < 50; i++ { // other traffic: several L0 tables
		put(t, d, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	put(t, d, "gone", "<del>", "changed", "new-value")
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(holding(t, s, "SECRET-")) == 0 {
		t.Fatal("the values were never written: the test proves nothing")
	}
	if err := d.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(opts.GCGrace + time.Hour)
	if _, err := d.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if left := holding(t, s, "SECRET-"); len(left) > 0 {
		t.Fatalf("after Rewrite and GC, objects still hold deleted or overwritten values: %v", left)
	}
	for k, want := range map[string]string{"kept": "live-value", "changed": "new-value", "k007": "7"} {
		v, err := d.Get(ctx, []byte(k))
		if err != nil || string(v) != want {
			t.Fatalf("%s = %q, %v; want %q", k, v, err, want)
		}
	}
	if _, err := d.Get(ctx, []byte("gone")); err == nil {
		t.Fatal("the deleted key reads back")
	}
}
