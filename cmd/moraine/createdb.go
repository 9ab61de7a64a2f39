package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/replay"
)

// createdbMain is `moraine createdb [flags] <name>`, and dropdbMain `moraine
// dropdb [flags] <name>`: PostgreSQL's createdb and dropdb against a running
// server, through its maintenance database; createdb -template forks a
// database into a branch. (PostgreSQL's own createdb, -T included, and
// dropdb work as well.)
func createdbMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("createdb [flags] <name>", stdout, stderr)
	addr, maint := dbToolFlags(fs)
	template := fs.String("template", "", "a database of the server to fork: the new database is a branch of it (CREATE DATABASE … TEMPLATE …; docs/branches.md)")
	location := fs.String("location", "", "with --template: the branch's own data path, which makes it writable (… LOCATION '…')")
	at := fs.Int64("at-snapshot", -1, "with --template: fork at this earlier DuckLake snapshot of it; writable with --location (… AT_SNAPSHOT n)")
	if code, ok := fs.parse(args, 1); !ok {
		return code
	}
	return runDBTool(ctx, fs, *addr, *maint, stderr, func(name string) string {
		sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
		if *template != "" {
			sql += " TEMPLATE " + pgx.Identifier{*template}.Sanitize()
		}
		if *location != "" {
			sql += " LOCATION '" + strings.ReplaceAll(*location, "'", "''") + "'"
		}
		if *at >= 0 {
			sql += fmt.Sprintf(" AT_SNAPSHOT %d", *at)
		}
		return sql
	})
}

func dropdbMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("dropdb [flags] <name>", stdout, stderr)
	addr, maint := dbToolFlags(fs)
	force := fs.Bool("force", false, "terminate the sessions connected to the database first (DROP DATABASE … WITH (FORCE))")
	ifExists := fs.Bool("if-exists", false, "do not fail if the database does not exist")
	if code, ok := fs.parse(args, 1); !ok {
		return code
	}
	return runDBTool(ctx, fs, *addr, *maint, stderr, func(name string) string {
		sql := "DROP DATABASE "
		if *ifExists {
			sql += "IF EXISTS "
		}
		sql += pgx.Identifier{name}.Sanitize()
		if *force {
			sql += " WITH (FORCE)"
		}
		return sql
	})
}

// mergedbMain is `moraine mergedb -into <parent> <branch>`: ALTER DATABASE
// branch MERGE_INTO parent, which publishes a writable branch's commits on
// its parent and consumes it (docs/branches.md, "Merging"). What it
// merged is reported on stderr.
func mergedbMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mergedb -into <parent> [flags] <branch>", stdout, stderr)
	addr, maint := dbToolFlags(fs)
	into := fs.String("into", "", "the branch's parent, which the merge publishes its commits on (required)")
	if code, ok := fs.parse(args, 1); !ok {
		return code
	}
	if *into == "" {
		fmt.Fprintf(stderr, "%s: -into names the branch's parent\n", fs.Name())
		fs.Usage()
		return 2
	}
	return runDBTool(ctx, fs, *addr, *maint, stderr, func(name string) string {
		return "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " MERGE_INTO " + pgx.Identifier{*into}.Sanitize()
	})
}

func dbToolFlags(fs *flags) (addr, maint *string) {
	addr = fs.String("addr", replay.DefaultAddr, "server: `host:port`, a conninfo (host=… port=… user=…) or a postgres:// URL")
	maint = fs.String("maintenance-db", "postgres", "the database to connect to while creating or dropping")
	return addr, maint
}

// runDBTool runs the statement stmt(name) on the server's maintenance
// database; notices (IF EXISTS, what a merge did) go to stderr.
func runDBTool(ctx context.Context, fs *flags, addr, maint string, stderr io.Writer, stmt func(string) string) int {
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "%s: name one database\n", fs.Name())
		fs.Usage()
		return 2
	}
	ci, err := replay.AdminConninfo(addr)
	if err == nil {
		var cfg *pgconn.Config
		if cfg, err = pgconn.ParseConfig(ci); err == nil {
			cfg.Database = maint
			cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), n.Message) }
			var c *pgconn.PgConn
			if c, err = pgconn.ConnectConfig(ctx, cfg); err == nil {
				_, err = c.Exec(ctx, stmt(fs.Arg(0))).ReadAll()
				c.Close(context.Background())
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}
