package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	registerMain("repair", "repair a store the catalog loader refuses: drop-table removes a table an older moraine stored that no server can load (run with no server on the store)", repairMain)
}

func repairMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "drop-table" {
		fmt.Fprintln(stderr, "usage: moraine repair drop-table --store URL --database DB --table SCHEMA.TABLE")
		return 2
	}
	fs, store := toolFlags("repair drop-table", stderr)
	db := fs.String("database", "", "the database holding the table")
	table := fs.String("table", "", "the table, as SCHEMA.TABLE")
	if code, ok := parseTool(fs, args[1:]); !ok {
		return code
	}
	schema, name, ok := strings.Cut(*table, ".")
	if *db == "" || !ok || schema == "" || name == "" {
		fmt.Fprintln(stderr, "moraine repair drop-table: --database and --table SCHEMA.TABLE are required")
		return 2
	}
	return withStore(ctx, "repair drop-table", *store, stderr, func(s objstore.Store) error {
		if err := server.DropUnloadableTable(ctx, s, *db, schema, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dropped %s.%s from database %q\n", schema, name, *db)
		return nil
	})
}
