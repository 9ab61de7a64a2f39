package main

import (
	"context"
	"fmt"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

func backupMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup [flags]", stdout, stderr)
	store := fs.storeFlag()
	to := fs.String("to", "", "object store URL of the backup (must hold no database)")
	id := fs.String("checkpoint", "", "checkpoint `ID` to copy (default: take a new checkpoint)")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *to == "" {
		fmt.Fprintln(stderr, "moraine backup: --to is required")
		return 2
	}
	return withStores(ctx, "backup", *store, *to, stderr, func(src, dst objstore.Store) error {
		if *id == "" {
			cp, err := slate.CreateCheckpoint(ctx, src)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "checkpoint %s\tseq %d\n", cp.ID, cp.Seq)
			*id = cp.ID
		}
		cp, err := slate.CopyCheckpoint(ctx, src, *id, dst)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "backed up checkpoint %s (seq %d, %d objects, %d bytes)\n", cp.ID, cp.Seq, len(cp.Objects), cp.Bytes)
		return nil
	})
}
