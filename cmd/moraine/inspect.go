package main

import (
	"context"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	registerMain("inspect", "report a store: head snapshots, tables with row counts, files, resident size, objects", inspectMain)
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
