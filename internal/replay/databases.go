package replay

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// AdminConninfo turns an Options.Addr into a conninfo for administrative
// statements: a conninfo or URL is used as given; a bare host:port connects
// as user postgres to database postgres, as the fixtures' captures did.
func AdminConninfo(addr string) (string, error) {
	if strings.Contains(addr, "=") || strings.Contains(addr, "://") {
		return addr, nil
	}
	hp, err := HostPort(addr)
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", fmt.Errorf("replay: address %q: %w", addr, err)
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port), nil
}

// RecreateDatabases drops (WITH (FORCE)) and creates each named database
// through the admin connection, so transcripts meet the empty database
// their capture started from. It is for validating against a real
// PostgreSQL, which, unlike moraine, does not create a database on first use.
func RecreateDatabases(ctx context.Context, conninfo string, names []string) error {
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		return fmt.Errorf("replay: connect for database setup: %w", err)
	}
	defer c.Close(ctx)
	for _, name := range names {
		ident := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		for _, sql := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident} {
			if _, err := c.Exec(ctx, sql).ReadAll(); err != nil {
				return fmt.Errorf("replay: %s: %w", sql, err)
			}
		}
	}
	return nil
}
