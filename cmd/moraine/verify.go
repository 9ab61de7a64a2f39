package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

func init() {
	register(command{
		name:    "verify",
		summary: "check every persisted DuckLake catalog for dangling files, dropped tombstones, unscheduled removals, snapshot gaps and row-id overlap",
		run:     runVerify,
	})
}

func runVerify(ctx context.Context, args []string) int {
	return verifyMain(ctx, args, os.Stdout, os.Stderr)
}

// verifyMain is `moraine verify [--store URL]`. It opens the store as a
// reader (never fencing a live writer), checks one consistent snapshot of
// it and prints each violation. Exit 0: consistent; 1: violations; 2: usage
// or the store could not be read.
func verifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "file://./moraine-data", "object store URL holding the catalog (as for serve)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: moraine verify [--store URL]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
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
