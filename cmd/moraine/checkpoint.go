package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

func checkpointMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("checkpoint [flags]", stdout, stderr)
	store := fs.storeFlag()
	list := fs.Bool("list", false, "list the checkpoints instead of creating one")
	del := fs.String("delete", "", "delete checkpoint `ID`")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	return withStore(ctx, "checkpoint", *store, stderr, func(s objstore.Store) error {
		switch {
		case *list:
			cps, err := slate.ListCheckpoints(ctx, s)
			if err != nil {
				return err
			}
			for _, cp := range cps {
				fmt.Fprintf(stdout, "%s\tseq %d\t%s\t%d objects\t%d bytes\n", cp.ID, cp.Seq, cp.Created.Format(time.RFC3339), len(cp.Objects), cp.Bytes)
			}
			return nil
		case *del != "":
			if err := slate.DeleteCheckpoint(ctx, s, *del); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted checkpoint %s\n", *del)
			return nil
		}
		pr := newProgress(stderr, "checkpoint")
		cp, err := slate.CreateCheckpoint(ctx, s, pr.fn())
		if err != nil {
			return err
		}
		pr.done()
		fmt.Fprintf(stdout, "%s\tseq %d\t%d objects\t%d bytes\n", cp.ID, cp.Seq, len(cp.Objects), cp.Bytes)
		return nil
	})
}
