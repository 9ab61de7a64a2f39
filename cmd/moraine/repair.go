package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/server"
)

func repairMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const synopsis = "repair drop-table --database DB --table SCHEMA.TABLE [flags]"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, "usage: moraine "+synopsis)
		return 0
	}
	if len(args) == 0 || args[0] != "drop-table" {
		fmt.Fprintln(stderr, "usage: moraine "+synopsis)
		return 2
	}
	fs := newFlags(synopsis, stdout, stderr)
	store := fs.storeFlag()
	db := fs.String("database", "", "the `DB` holding the table")
	table := fs.String("table", "", "the table, as `SCHEMA.TABLE`")
	if code, ok := fs.parse(args[1:], noArgs); !ok {
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
