package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Import copies the DuckLake catalog in schema of the PostgreSQL database
// src (a conninfo or URL) into a new moraine database called database,
// created through admin (a conninfo of moraine's maintenance database):
// one consistent read of the source, one commit on moraine. A failed
// import drops the database it created: it leaves nothing behind.
func Import(ctx context.Context, src, admin, schema, database string, progress func(Progress)) (Summary, error) {
	scfg, err := pgconn.ParseConfig(src)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: source: %w", err)
	}
	s, err := beginRead(ctx, scfg)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: source: %w", err)
	}
	defer s.Close(context.Background())
	// Refuse what cannot be imported before creating anything.
	if _, err := catalogVersion(ctx, s, schema); err != nil {
		return Summary{}, err
	}
	if _, err := tables(ctx, s, schema); err != nil {
		return Summary{}, err
	}
	acfg, err := pgconn.ParseConfig(admin)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: moraine: %w", err)
	}
	a, err := pgconn.ConnectConfig(ctx, acfg)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: moraine: %w", err)
	}
	defer a.Close(context.Background())
	if _, err := a.Exec(ctx, "CREATE DATABASE "+ident(database)).ReadAll(); err != nil {
		return Summary{}, fmt.Errorf("transfer: moraine: %w", err)
	}
	sum, err := func() (Summary, error) {
		dcfg := acfg.Copy()
		dcfg.Database = database
		d, err := pgconn.ConnectConfig(ctx, dcfg)
		if err != nil {
			return Summary{}, err
		}
		defer d.Close(context.Background())
		return inTransaction(ctx, d, func() (Summary, error) { return copyCatalog(ctx, s, d, schema, schema, progress) })
	}()
	if err != nil {
		if _, derr := a.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(database)+" WITH (FORCE)").ReadAll(); derr != nil {
			err = errors.Join(err, fmt.Errorf("dropping the half-made database %s: %w", database, derr))
		}
		return sum, fmt.Errorf("transfer: import into moraine database %s: %w", database, err)
	}
	return sum, nil
}

// Export copies the DuckLake catalog in schema of the moraine database
// database, on the server moraine (a conninfo of any of its databases),
// into the PostgreSQL database dst, which must hold no
// DuckLake catalog in that schema: the tables and rows DuckLake itself
// would have there, so DuckDB attaches the result as a plain PostgreSQL
// catalog. One consistent read of moraine, one transaction on PostgreSQL.
func Export(ctx context.Context, moraine, database, dst, schema string, progress func(Progress)) (Summary, error) {
	cfg, err := pgconn.ParseConfig(moraine)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: moraine: %w", err)
	}
	cfg.Database = database
	s, err := beginRead(ctx, cfg)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: moraine: %w", err)
	}
	defer s.Close(context.Background())
	d, err := pgconn.Connect(ctx, dst)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: destination: %w", err)
	}
	defer d.Close(context.Background())
	existing, err := tables(ctx, d, schema)
	if err != nil {
		return Summary{}, fmt.Errorf("transfer: destination: %w", err)
	}
	if len(existing) > 0 {
		return Summary{}, fmt.Errorf("transfer: the destination's schema %s already holds DuckLake tables (%s, …): export needs an empty one", schema, existing[0].name)
	}
	sum, err := inTransaction(ctx, d, func() (Summary, error) { return copyCatalog(ctx, s, d, schema, schema, progress) })
	if err != nil {
		return sum, fmt.Errorf("transfer: export: %w", err)
	}
	return sum, nil
}

// beginRead connects and opens the one REPEATABLE READ transaction every
// read of a transfer shares.
func beginRead(ctx context.Context, cfg *pgconn.Config) (*pgconn.PgConn, error) {
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").ReadAll(); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// inTransaction runs fn in a transaction on c: committed if fn succeeds,
// rolled back otherwise.
func inTransaction(ctx context.Context, c *pgconn.PgConn, fn func() (Summary, error)) (Summary, error) {
	if _, err := c.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return Summary{}, err
	}
	sum, err := fn()
	if err != nil {
		c.Exec(context.Background(), "ROLLBACK").ReadAll()
		return sum, err
	}
	if _, err := c.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		return sum, fmt.Errorf("commit: %w", err)
	}
	return sum, nil
}
