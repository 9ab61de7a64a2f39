package slate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"
)

func TestReaderFollowsWriter(t *testing.T) {
	ctx := context.Background()
	for _, backend := range testBackends(t) {
		t.Run(backend.name, func(t *testing.T) {
			s := backend.open(t)
			if _, err := OpenReader(ctx, s, Options{}); !errors.Is(err, ErrNoDB) {
				t.Fatalf("reader on empty store: %v", err)
			}
			opts := testOpts()
			opts.L0CompactionTrigger = 2
			w := mustOpen(t, s, opts)
			defer w.Close(ctx)
			r, err := OpenReader(ctx, s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			if _, err := r.Write(ctx, NewBatch()); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("reader write: %v", err)
			}
			want := map[string]string{}
			for round := 0; round < 6; round++ {
				for i := 0; i < 40; i++ {
					k, v := fmt.Sprintf("k%03d", (round*17+i)%90), fmt.Sprintf("r%d-%d", round, i)
					if i%9 == 0 {
						put(t, w, k, "<del>")
						delete(want, k)
					} else {
						put(t, w, k, v)
						want[k] = v
					}
				}
				var snap *Snapshot
				if round == 2 {
					if snap, err = r.Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
				before, _ := dump(ctx, r)
				switch round % 3 {
				case 1:
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				case 2:
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					if err := w.Compact(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Refresh(ctx); err != nil {
					t.Fatalf("round %d refresh: %v", round, err)
				}
				got, err := dump(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if !maps.Equal(got, want) {
					t.Fatalf("round %d: reader has %d keys, writer %d", round, len(got), len(want))
				}
				if snap != nil {
					it := snap.Scan(ctx, nil, nil)
					old := map[string]string{}
					for it.Next() {
						old[string(it.Key())] = string(it.Value())
					}
					if err := it.Close(); err != nil {
						t.Fatal(err)
					}
					if !maps.Equal(old, before) || maps.Equal(old, got) {
						t.Fatalf("reader snapshot moved with refresh")
					}
					snap.Close()
				}
			}
			if r.Stats().LastSeq != w.Stats().LastSeq {
				t.Fatalf("reader seq %d, writer %d", r.Stats().LastSeq, w.Stats().LastSeq)
			}
			// A polling reader catches up on its own.
			pr, err := OpenReader(ctx, s, Options{PollInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close(ctx)
			put(t, w, "polled", "yes")
			deadline := time.Now().Add(5 * time.Second)
			for {
				v, err := pr.Get(ctx, []byte("polled"))
				if err == nil && string(v) == "yes" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("polling reader never saw the write: %v", err)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
}
