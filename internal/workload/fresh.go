package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// FreshDatabase creates a database with a random name on the server that
// conninfo names and returns a dialer for it and a function that drops it
// (forcibly disconnecting leftovers). The workload needs an empty catalog
// per run; a fresh database keeps runs and concurrent test packages apart.
func FreshDatabase(ctx context.Context, conninfo, prefix string) (dial func(context.Context) (*pgconn.PgConn, error), drop func(context.Context) error, err error) {
	cfg, drop, err := FreshDatabaseConfig(ctx, conninfo, prefix)
	if err != nil {
		return nil, nil, err
	}
	dial = func(ctx context.Context) (*pgconn.PgConn, error) { return pgconn.ConnectConfig(ctx, cfg.Copy()) }
	return dial, drop, nil
}

// FreshDatabaseConfig is FreshDatabase for a caller that connects itself
// (a test that wraps the connection): it returns the new database's
// connection config.
func FreshDatabaseConfig(ctx context.Context, conninfo, prefix string) (cfg *pgconn.Config, drop func(context.Context) error, err error) {
	base, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		return nil, nil, fmt.Errorf("workload: parse conninfo: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	admin, err := pgconn.ConnectConfig(ctx, base)
	if err != nil {
		return nil, nil, fmt.Errorf("workload: connect: %w", err)
	}
	defer admin.Close(context.Background())
	if err := exec(ctx, admin, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return nil, nil, fmt.Errorf("workload: create database %s: %w", name, err)
	}
	cfg = base.Copy()
	cfg.Database = name
	drop = func(ctx context.Context) error {
		admin, err := pgconn.ConnectConfig(ctx, base)
		if err != nil {
			return fmt.Errorf("workload: connect: %w", err)
		}
		defer admin.Close(context.Background())
		if err := exec(ctx, admin, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("workload: drop database %s: %w", name, err)
		}
		return nil
	}
	return cfg, drop, nil
}
