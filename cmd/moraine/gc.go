package main

import (
	"context"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
)

func gcMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gc [flags]", stdout, stderr)
	store := fs.storeFlag()
	dry := fs.Bool("dry-run", false, "list what would be deleted; delete nothing")
	grace := fs.Duration("grace", slate.DefaultGCGrace, "keep objects younger than this (readers and a writer in flight may still need them)")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	return withStore(ctx, "gc", *store, stderr, func(s objstore.Store) error {
		_, err := server.GC(ctx, s, *grace, *dry, stdout)
		return err
	})
}
