package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	register(command{
		name:    "inspect",
		summary: "report a store: head snapshots, tables with row counts, files, resident size, objects",
		run: func(ctx context.Context, args []string) int {
			return inspectMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

// toolFlags is the flag set of an operator command, with --store defaulting
// like serve's (MORAINE_STORE, then file://./moraine-data).
func toolFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("moraine "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("MORAINE_STORE")
	if def == "" {
		def = "file://./moraine-data"
	}
	return fs, fs.String("store", def, "object store URL [env MORAINE_STORE]")
}

// parseTool parses args; the int is the exit code when ok is false.
func parseTool(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

func withStore(ctx context.Context, name, url string, stderr io.Writer, fn func(objstore.Store) error) int {
	s, err := server.OpenStore(ctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "moraine %s: %v\n", name, err)
		return 1
	}
	defer s.Close()
	if err := fn(s); err != nil {
		fmt.Fprintf(stderr, "moraine %s: %v\n", name, err)
		return 1
	}
	return 0
}

func inspectMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, store := toolFlags("inspect", stderr)
	if code, ok := parseTool(fs, args); !ok {
		return code
	}
	return withStore(ctx, "inspect", *store, stderr, func(s objstore.Store) error {
		return server.Inspect(ctx, s, stdout)
	})
}
