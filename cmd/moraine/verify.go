package main

import (
	"context"
	"fmt"
	"io"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

// verifyMain is `moraine verify [--store URL]`. It opens the store as a
// reader (never fencing a live writer), checks one consistent snapshot of
// it and prints each violation. Exit 0: consistent; 1: violations; 2: usage
// or the store could not be read.
func verifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("verify [flags]", stdout, stderr)
	store := fs.storeFlag()
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	vs, err := verifyStore(ctx, *store)
	if err != nil {
		fmt.Fprintln(stderr, "moraine verify:", err)
		return 2
	}
	for _, v := range vs {
		fmt.Fprintln(stdout, v)
	}
	if len(vs) > 0 {
		fmt.Fprintf(stdout, "%d violation(s)\n", len(vs))
		return 1
	}
	fmt.Fprintln(stdout, "consistent")
	return 0
}

func verifyStore(ctx context.Context, url string) (vs []verify.Violation, err error) {
	err = server.ReadSnapshotURL(ctx, url, func(snap *slate.Snapshot, _ slate.Stats) error {
		vs, err = verify.CheckStore(ctx, snap)
		return err
	})
	return vs, err
}
