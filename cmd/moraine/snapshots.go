package main

import (
	"context"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	registerMain("snapshots", "list a store's DuckLake snapshots with their changes [--db D --schema S]", snapshotsMain)
}

func snapshotsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, store := toolFlags("snapshots", stderr)
	db := fs.String("db", "", "only this database")
	schema := fs.String("schema", "", "only this metadata schema")
	if code, ok := parseTool(fs, args); !ok {
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
