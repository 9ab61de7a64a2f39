package main

import (
	"context"
	"fmt"
	"io"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

func restoreMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("restore [flags]", stdout, stderr)
	from := fs.String("from", "", "object store URL of the backup (or of a store holding --checkpoint)")
	to := fs.String("to", "", "object store URL to restore into (must hold no database)")
	id := fs.String("checkpoint", "", "restore checkpoint `ID` of --from instead of the backup itself")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *from == "" || *to == "" {
		fmt.Fprintln(stderr, "moraine restore: --from and --to are required")
		return 2
	}
	return withStores(ctx, "restore", *from, *to, stderr, func(src, dst objstore.Store) error {
		if *id != "" {
			pr := newProgress(stderr, "restore")
			cp, err := slate.CopyCheckpoint(ctx, src, *id, dst, pr.fn())
			if err != nil {
				return err
			}
			pr.done()
			fmt.Fprintf(stdout, "restored checkpoint %s (seq %d)\n", cp.ID, cp.Seq)
			return nil
		}
		// The backup is checked before a byte is copied: a backup with a
		// gap in its WAL (or no database at all) restores nothing.
		if err := slate.Check(ctx, src); err != nil {
			return fmt.Errorf("the backup at --from fails its check: %w", err)
		}
		pr := newProgress(stderr, "restore")
		n, err := slate.CopyDB(ctx, src, dst, pr.fn())
		if err != nil {
			return err
		}
		pr.done()
		if err := slate.Check(ctx, dst); err != nil {
			return fmt.Errorf("the restored store fails its check: %w", err)
		}
		fmt.Fprintf(stdout, "restored %d objects; serve it with: moraine serve --store '%s'\n", n, *to)
		return nil
	})
}
