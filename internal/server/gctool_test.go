package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

// TestGCTool: the offline GC lists in a dry run exactly what it then
// deletes, a line an object, and leaves a store that opens with every key
// and nothing more to collect.
func TestGCTool(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	opts := slate.Options{MemtableBytes: 4 << 10, GCInterval: -1}
	want := map[string]string{}
	for round := range 3 { // each writer fences the last: superseded manifests, WAL and tables
		d, err := slate.Open(ctx, store, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			k, v := fmt.Sprintf("k%03d", i%150), fmt.Sprint(round, i)
			b := slate.NewBatch()
			b.Put([]byte(k), []byte(v))
			if _, err := d.Write(ctx, b); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		if err := d.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var dry, real bytes.Buffer
	n, err := GC(ctx, store, 0, true, &dry)
	if err != nil || n == 0 {
		t.Fatalf("dry run: %d objects, %v", n, err)
	}
	before, _ := store.List(ctx, "")
	m, err := GC(ctx, store, 0, false, &real)
	if err != nil || m != n {
		t.Fatalf("GC deleted %d objects (%v), the dry run listed %d", m, err, n)
	}
	if got, want := strings.ReplaceAll(dry.String(), "would delete", "delete"), real.String(); got != want {
		t.Fatalf("GC printed\n%s\nthe dry run\n%s", want, got)
	}
	after, _ := store.List(ctx, "")
	if len(after) != len(before)-n {
		t.Fatalf("%d objects before, %d after deleting %d", len(before), len(after), n)
	}
	if n, err := GC(ctx, store, 0, false, &bytes.Buffer{}); err != nil || n != 0 {
		t.Fatalf("a second GC: %d objects, %v", n, err)
	}
	d, err := slate.Open(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	for k, v := range want {
		got, err := d.Get(ctx, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("after GC, %s = %q (%v), want %q", k, got, err, v)
		}
	}
}
