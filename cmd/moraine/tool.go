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

// mainFunc is a subcommand's body with its output streams as arguments, so
// that tests run it in-process; it returns the exit code.
type mainFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// registerMain registers subcommand name, running main on the process's
// stdout and stderr.
func registerMain(name, summary string, main mainFunc) {
	register(command{name: name, summary: summary, run: func(ctx context.Context, args []string) int {
		return main(ctx, args, os.Stdout, os.Stderr)
	}})
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

// usageFlags is the flag set of a command whose usage message is
// "usage: moraine <synopsis>" followed by the flags.
func usageFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: moraine "+synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// catalogStoreFlag is the --store flag of the read-only catalog checkers
// (verify, erasure).
func catalogStoreFlag(fs *flag.FlagSet) *string {
	return fs.String("store", "file://./moraine-data", "object store URL holding the catalog (as for serve)")
}

// parseFlags parses args; when ok is false the int is the exit code: 0 for
// -h (the flag package has printed the usage), 2 for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseTool parses an operator command's args, which take no positional
// arguments; the int is the exit code when ok is false.
func parseTool(fs *flag.FlagSet, args []string) (int, bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// withStore opens the store at url, runs fn on it and closes it. An error
// from either is printed as "moraine <name>: …" and exits 1.
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

// withStores is withStore over two stores, src at from and dst at to (the
// copy commands: backup, restore).
func withStores(ctx context.Context, name, from, to string, stderr io.Writer, fn func(src, dst objstore.Store) error) int {
	return withStore(ctx, name, from, stderr, func(src objstore.Store) error {
		dst, err := server.OpenStore(ctx, to)
		if err != nil {
			return err
		}
		defer dst.Close()
		return fn(src, dst)
	})
}
