package replay

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
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
// their capture started from. moraine and PostgreSQL both need it: neither
// creates a database a client names.
func RecreateDatabases(ctx context.Context, conninfo string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		return fmt.Errorf("replay: connect for database setup: %w", err)
	}
	defer c.Close(ctx)
	for _, name := range names {
		ident := pgx.Identifier{name}.Sanitize()
		for _, sql := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident} {
			if _, err := c.Exec(ctx, sql).ReadAll(); err != nil {
				return fmt.Errorf("replay: %s: %w", sql, err)
			}
		}
	}
	return nil
}

// Fresh recreates the databases of transcripts at their first use in a
// run: a later transcript may continue the lake an earlier one built (s07
// after s01), so a database seen before is left as it is.
type Fresh struct {
	// Admin is the conninfo of the administrative connection
	// (AdminConninfo).
	Admin string
	seen  map[string]bool
}

// Prepare recreates the databases t uses that this run has not seen yet.
func (f *Fresh) Prepare(ctx context.Context, t *Transcript) error {
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	var names []string
	for _, db := range t.Databases() {
		if !f.seen[db] {
			f.seen[db] = true
			names = append(names, db)
		}
	}
	return RecreateDatabases(ctx, f.Admin, names)
}
