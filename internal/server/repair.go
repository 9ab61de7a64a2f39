package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

// ErrRepairRefused marks a repair that would lose data or is not needed.
var ErrRepairRefused = errors.New("repair refused")

// DropUnloadableTable removes from the store the definition of a table the
// catalog loader refuses (catalog.UnloadableTableError): one DuckLake does
// not create, which moraine now refuses to commit but older versions
// stored. Such a table can hold no rows (no row of a table moraine does not
// know was ever committed), so its definition is all there is. The repair
// opens the store as its writer — it fences any server still running, so
// run it with none — and writes one batch deleting that definition.
//
// It refuses a table that loads (drop that one with DROP TABLE through a
// server) and one of DuckLake's own tables altered out of its shape, whose
// rows are stored under its definition: dropping it would lose them, and
// the way back is a checkpoint or backup taken before the commit that
// altered it.
func DropUnloadableTable(ctx context.Context, store objstore.Store, database, schema, table string) error {
	d, err := slate.Open(ctx, store, slate.Options{GCInterval: -1, PinPrefix: keyspace.BranchPrefix(), PinValue: keyspace.BranchBase})
	if err != nil {
		return err
	}
	defer d.Close(context.WithoutCancel(ctx))
	rk := keyspace.RegistryKey(database, schema)
	rv, err := d.Get(ctx, rk)
	if err != nil {
		if errors.Is(err, slate.ErrNotFound) {
			return fmt.Errorf("%w: database %q has no schema %q", ErrRepairRefused, database, schema)
		}
		return err
	}
	_, _, cid, err := keyspace.DecodeRegistry(rk, rv)
	if err != nil {
		return err
	}
	k := keyspace.TableDefKey(cid, table)
	v, err := d.Get(ctx, k)
	if err != nil {
		if errors.Is(err, slate.ErrNotFound) {
			return fmt.Errorf("%w: schema %s of database %q has no table %q", ErrRepairRefused, schema, database, table)
		}
		return err
	}
	_, _, derr := keyspace.DecodeTableDef(k, v)
	switch {
	case derr == nil:
		return fmt.Errorf("%w: table %s.%s loads; drop it with DROP TABLE through a server", ErrRepairRefused, schema, table)
	case !errors.Is(derr, keyspace.ErrUnknownShape):
		return fmt.Errorf("%w: table %s.%s: %v", ErrRepairRefused, schema, table, derr)
	}
	if _, known := keyspace.Known(table); known {
		return fmt.Errorf("%w: %s.%s is one of DuckLake's tables, altered out of its shape (%v); its rows are stored under that definition and dropping it would lose them: restore a checkpoint or backup taken before the commit that altered it",
			ErrRepairRefused, schema, table, derr)
	}
	b := slate.NewBatch()
	b.Delete(k)
	if _, err := d.Write(ctx, b); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	return nil
}
