package main

import (
	"context"
	"fmt"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

func backupMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup --to URL [flags]", stdout, stderr)
	store := fs.storeFlag()
	to := fs.String("to", "", "object store `URL` of the backup (must hold no database)")
	id := fs.String("checkpoint", "", "checkpoint `ID` to copy (default: take one for the backup, and delete it after)")
	keep := fs.Bool("keep-checkpoint", false, "keep the checkpoint the backup took (it holds a copy of the store beside it)")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *to == "" {
		fmt.Fprintln(stderr, "moraine backup: --to is required")
		return 2
	}
	return withStores(ctx, "backup", *store, *to, stderr, func(src, dst objstore.Store) error {
		// The target is checked before anything is copied, or a checkpoint
		// taken: a refused backup leaves nothing behind.
		if err := slate.RequireEmpty(ctx, dst); err != nil {
			return err
		}
		if *id == "" {
			pr := newProgress(stderr, "checkpoint")
			cp, err := slate.CreateCheckpoint(ctx, src, pr.fn())
			if err != nil {
				return err
			}
			pr.done()
			fmt.Fprintf(stdout, "checkpoint %s\tseq %d\n", cp.ID, cp.Seq)
			*id = cp.ID
			if !*keep {
				defer func() {
					if err := slate.DeleteCheckpoint(context.WithoutCancel(ctx), src, cp.ID); err != nil {
						fmt.Fprintf(stderr, "moraine backup: deleting the backup's checkpoint %s: %v\n", cp.ID, err)
					}
				}()
			}
		}
		pr := newProgress(stderr, "backup")
		cp, err := slate.CopyCheckpoint(ctx, src, *id, dst, pr.fn())
		if err != nil {
			return err
		}
		pr.done()
		fmt.Fprintf(stdout, "backed up checkpoint %s (seq %d, %d objects, %d bytes)\n", cp.ID, cp.Seq, len(cp.Objects), cp.Bytes)
		return nil
	})
}
