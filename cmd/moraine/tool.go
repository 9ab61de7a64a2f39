package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

// flags is a command's flag set: newFlags, then its flags, then parse.
type flags struct {
	*flag.FlagSet
	stdout io.Writer
}

// newFlags returns the flag set of `moraine <synopsis>` (the synopsis
// starts with the command's name). Its usage — the synopsis, then every
// flag with its default — goes to standard output for -h and --help and to
// standard error after a bad flag.
func newFlags(synopsis string, stdout, stderr io.Writer) *flags {
	name := "moraine"
	for _, w := range strings.Fields(synopsis) {
		if strings.ContainsAny(w[:1], "-[<") {
			break
		}
		name += " " + w
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: moraine %s\n", synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return &flags{FlagSet: fs, stdout: stdout}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// anyArgs and noArgs are parse's positional-argument rules.
const (
	anyArgs = -1
	noArgs  = 0
)

// parse parses args, which may hold at most positional arguments after the
// flags (anyArgs: any number). When ok is false the command returns code:
// 0 after -h or --help, 2 after a bad flag or argument.
func (f *flags) parse(args []string, positional int) (code int, ok bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			f.SetOutput(f.stdout)
			f.Usage()
			return 0, false
		}
	}
	if err := f.Parse(args); err != nil {
		return 2, false // the flag package printed the error and the usage
	}
	if positional >= 0 && f.NArg() > positional {
		fmt.Fprintf(f.Output(), "%s: unexpected argument %q\n", f.Name(), f.Arg(positional))
		f.Usage()
		return 2, false
	}
	return 0, true
}

// storeFlag adds --store, defaulting like serve's (MORAINE_STORE, then
// file://./moraine-data).
func (f *flags) storeFlag() *string {
	def := os.Getenv("MORAINE_STORE")
	if def == "" {
		def = "file://./moraine-data"
	}
	return f.String("store", def, "object store `URL` holding the catalog [env MORAINE_STORE]")
}

// withStore opens the existing store at url, runs fn on it and closes it.
// An error from either is printed as "moraine <name>: …" and exits 1.
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

// withStores is withStore over two stores: src, which must exist, at from,
// and dst, created if need be, at to (the copy commands: backup, restore).
func withStores(ctx context.Context, name, from, to string, stderr io.Writer, fn func(src, dst objstore.Store) error) int {
	return withStore(ctx, name, from, stderr, func(src objstore.Store) error {
		dst, err := server.CreateStore(ctx, to)
		if err != nil {
			return err
		}
		defer dst.Close()
		return fn(src, dst)
	})
}
