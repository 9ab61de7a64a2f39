package main

import (
	"context"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func inspectMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect [flags]", stdout, stderr)
	store := fs.storeFlag()
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	return withStore(ctx, "inspect", *store, stderr, func(s objstore.Store) error {
		return server.Inspect(ctx, s, stdout)
	})
}
