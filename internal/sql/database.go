package sql

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// CREATE DATABASE, DROP DATABASE and ALTER DATABASE … MERGE_INTO, as
// PostgreSQL runs its database statements: outside any transaction block,
// each its own commit. A new database holds an empty "public" schema,
// unless its TEMPLATE is a database of the server, which it then branches;
// dropping one erases every catalog in it; merging a writable branch
// publishes its commits on its parent and consumes it (docs/branches.md).
// A database others are connected to is dropped only WITH (FORCE), which
// terminates their sessions first (Executor.Terminate), and merged only
// once they have gone.

// databaseStmt runs CREATE DATABASE, DROP DATABASE or ALTER DATABASE.
func (s *Session) databaseStmt(ctx context.Context, n *pg.Node, out sink) error {
	verb := "CREATE DATABASE"
	switch {
	case n.GetDropdbStmt() != nil:
		verb = "DROP DATABASE"
	case n.GetAlterDatabaseStmt() != nil:
		verb = "ALTER DATABASE"
	}
	if s.tx.inBlock() || s.multi {
		return errf(pgcode.ActiveSQLTransaction, "%s cannot run inside a transaction block", verb)
	}
	if s.tx.readOnly || s.ex.InStandby() {
		return errf(pgcode.ReadOnlySQLTransaction, "cannot execute %s in a read-only transaction", verb)
	}
	if c := n.GetCreatedbStmt(); c != nil {
		template, fork, err := checkCreatedbOptions(c.Options)
		if err != nil {
			return err
		}
		if template != "" {
			err = s.ex.cat.ForkDatabase(ctx, c.Dbname, template, fork)
		} else if fork.DataPath != "" || fork.HasAt {
			err = errf(pgcode.FeatureNotSupported, "LOCATION and AT_SNAPSHOT go with a TEMPLATE to fork")
		} else {
			err = s.ex.cat.CreateDatabase(ctx, c.Dbname)
		}
		if err != nil {
			return err
		}
		return out.complete(verb)
	}
	if a := n.GetAlterDatabaseStmt(); a != nil {
		return s.mergeStmt(ctx, a, out)
	}
	d := n.GetDropdbStmt()
	force := false
	for _, o := range d.Options {
		de := o.GetDefElem()
		if de == nil || de.Defname != "force" {
			return errf(pgcode.SyntaxError, "unrecognized DROP DATABASE option %q", defName(de))
		}
		force = true
	}
	if _, ok := s.ex.cat.Lookup(d.Dbname); !ok {
		if d.MissingOk {
			out.notice(&pgwire.Error{Code: pgcode.InvalidCatalogName, Message: fmt.Sprintf("database %q does not exist, skipping", d.Dbname)})
			return out.complete(verb)
		}
		return errf(pgcode.InvalidCatalogName, "database %q does not exist", d.Dbname)
	}
	if d.Dbname == s.dbName {
		return errf(pgcode.ObjectInUse, "cannot drop the currently open database")
	}
	others := s.ex.sessionsOn(d.Dbname, s)
	if !force {
		var err error
		if others, err = s.awaitNoSessions(ctx, d.Dbname); err != nil {
			return err
		}
	}
	if err := s.ex.cat.DropDatabase(ctx, d.Dbname); err != nil {
		return err
	}
	// The drop is durable: nothing the sessions on it stage can commit any
	// more (catalog.Database.Dropped). Ending them is PostgreSQL's courtesy,
	// and as PostgreSQL, the drop returns once they have gone (or after
	// five seconds): a client that goes on using one then learns it ended.
	if t := s.ex.Terminate; t != nil && len(others) > 0 {
		for _, o := range others {
			t(o.pid)
		}
		s.ex.awaitGone(ctx, others)
	}
	return out.complete(verb)
}

// awaitGone returns once none of sessions is open, or after five seconds.
func (ex *Executor) awaitGone(ctx context.Context, sessions []*Session) {
	_ = await(ctx, func() bool {
		for _, o := range sessions {
			if _, ok := ex.sessions.Load(o); ok {
				return false
			}
		}
		return true
	})
}

// await polls done every 100 ms until it holds or five seconds (PostgreSQL's
// wait for backends to go) have passed; it fails only with ctx.
func await(ctx context.Context, done func() bool) error {
	for i := 0; !done(); i++ {
		if i == 50 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// awaitNoSessions returns once no other session is connected to db, or
// fails as PostgreSQL does (55006): it gives sessions that are ending a
// moment (up to five seconds) to go, since a client that just disconnected
// may still be counted.
func (s *Session) awaitNoSessions(ctx context.Context, db string) ([]*Session, error) {
	var others []*Session
	if err := await(ctx, func() bool { others = s.ex.sessionsOn(db, s); return len(others) == 0 }); err != nil {
		return nil, err
	}
	if len(others) == 0 {
		return nil, nil
	}
	e := errf(pgcode.ObjectInUse, "database %q is being accessed by other users", db)
	if len(others) == 1 {
		e.Detail = "There is 1 other session using the database."
	} else {
		e.Detail = fmt.Sprintf("There are %d other sessions using the database.", len(others))
	}
	return others, e
}

// mergeStmt runs ALTER DATABASE branch MERGE_INTO parent: the one ALTER
// DATABASE moraine has. It reports what it published as a NOTICE.
func (s *Session) mergeStmt(ctx context.Context, a *pg.AlterDatabaseStmt, out sink) error {
	into := ""
	for _, o := range a.Options {
		de := o.GetDefElem()
		if de == nil || de.Defname != "merge_into" || defString(de) == "" {
			return unsupported("ALTER DATABASE other than ALTER DATABASE branch MERGE_INTO parent")
		}
		into = defString(de)
	}
	if into == "" {
		return unsupported("ALTER DATABASE other than ALTER DATABASE branch MERGE_INTO parent")
	}
	if a.Dbname == s.dbName {
		return errf(pgcode.ObjectInUse, "cannot merge the currently open database")
	}
	if err := s.ex.cat.CheckMerge(a.Dbname, into); err != nil {
		return err
	}
	if _, err := s.awaitNoSessions(ctx, a.Dbname); err != nil {
		return err
	}
	res, err := s.ex.cat.MergeBranch(ctx, a.Dbname, into)
	if err != nil {
		return err
	}
	out.notice(&pgwire.Error{Code: pgcode.SuccessfulCompletion, Message: fmt.Sprintf(
		"merged snapshots %d to %d of %q into %q as its snapshots %d to %d (%d files)", res.From, res.To, a.Dbname, into, res.First, res.Last, res.Files)})
	return out.complete("ALTER DATABASE")
}

// checkCreatedbOptions admits the CREATE DATABASE options whose PostgreSQL
// meaning moraine has: a template (template0 and template1 are the empty
// database every new one starts as; any other database is forked: the new
// database is a branch of it, docs/branches.md), UTF8, and an owner (roles
// own nothing here); and two of a fork: LOCATION, the data path of a
// writable branch (PostgreSQL retired the option; here it says where the
// new database's files go), and AT_SNAPSHOT, the parent's DuckLake snapshot a
// read-only branch reads as of. It returns the database to fork, if any.
func checkCreatedbOptions(opts []*pg.Node) (template string, fork catalog.ForkOptions, err error) {
	for _, o := range opts {
		de := o.GetDefElem()
		if de == nil {
			return "", fork, unsupported("this CREATE DATABASE option")
		}
		val := strings.ToLower(defString(de))
		switch de.Defname {
		case "owner":
		case "template":
			if val != "template0" && val != "template1" {
				template = defString(de)
			}
		case "location":
			if fork.DataPath = defString(de); fork.DataPath == "" {
				return "", fork, errf(pgcode.InvalidParameterValue, "LOCATION must name a data path")
			}
		case "at_snapshot":
			n, perr := strconv.ParseInt(defString(de), 10, 64)
			if perr != nil || n < 0 {
				return "", fork, errf(pgcode.InvalidParameterValue, "AT_SNAPSHOT must be a DuckLake snapshot id, not %q", defString(de))
			}
			fork.HasAt, fork.At = true, n
		case "encoding":
			if val != "utf8" && val != "utf-8" && val != "unicode" && val != "6" {
				return "", fork, unsupported("ENCODING %s (databases are UTF8)", defString(de))
			}
		default:
			return "", fork, unsupported("CREATE DATABASE option %s", strings.ToUpper(de.Defname))
		}
	}
	return template, fork, nil
}

func defName(de *pg.DefElem) string {
	if de == nil {
		return ""
	}
	return de.Defname
}

// defString is an option's argument as written: a name, a string or a
// number.
func defString(de *pg.DefElem) string {
	a := de.Arg
	switch {
	case a == nil:
		return ""
	case a.GetString_() != nil:
		return a.GetString_().Sval
	case a.GetTypeName() != nil:
		return strings.Join(names(a.GetTypeName().Names), ".")
	case a.GetInteger() != nil:
		return fmt.Sprint(a.GetInteger().Ival)
	case a.GetAConst() != nil:
		c := a.GetAConst()
		if c.GetSval() != nil {
			return c.GetSval().Sval
		}
		if c.GetIval() != nil {
			return fmt.Sprint(c.GetIval().Ival)
		}
	}
	return ""
}

// sessionsOn returns the open sessions on database db, except self.
func (ex *Executor) sessionsOn(db string, self *Session) []*Session {
	var out []*Session
	ex.sessions.Range(func(k, _ any) bool {
		if s := k.(*Session); s != self && s.dbName == db {
			out = append(out, s)
		}
		return true
	})
	return out
}
