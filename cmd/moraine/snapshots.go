package main

import (
	"context"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func snapshotsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("snapshots [flags]", stdout, stderr)
	store := fs.storeFlag()
	db := fs.String("db", "", "only this database")
	schema := fs.String("schema", "", "only this metadata schema")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	return withStore(ctx, "snapshots", *store, stderr, func(s objstore.Store) error {
		rows, err := server.Snapshots(ctx, s, *db, *schema)
		if err != nil {
			return err
		}
		return server.WriteSnapshots(stdout, rows)
	})
}
