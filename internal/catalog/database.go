package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// Databases exist explicitly, as in PostgreSQL: CreateDatabase makes one
// durable and DropDatabase erases it, each as a commit of its own through
// the Committer. Server.Database, which makes a database in memory on first
// use, is for building catalogs (Load, a replica following its writer,
// tests); a server answers clients with Lookup.

var (
	ErrNoDatabase     = errors.New("catalog: database does not exist")
	ErrDatabaseExists = errors.New("catalog: database already exists")
)

func errNoDatabase(name string) error {
	return &Error{Kind: ErrNoDatabase, Code: pgcode.InvalidCatalogName,
		Message: fmt.Sprintf("database %q does not exist", name)}
}

func errDatabaseExists(name string) error {
	return &Error{Kind: ErrDatabaseExists, Code: pgcode.DuplicateDatabase,
		Message: fmt.Sprintf("database %q already exists", name)}
}

// newEmptyDatabase is a database holding only an empty "public" schema, as
// PostgreSQL's template gives every new database.
// REQUIRES: s.mu held.
func (s *Server) newEmptyDatabase(name string) *Database {
	b := newBuilder(newVersion())
	b.v.seq = 0
	if _, err := b.createSchema("public", s.allocCatalogID()); err != nil {
		panic("BUG: fresh database: " + err.Error())
	}
	return newDatabase(name, s, b.finish())
}

// CreateDatabase creates the database called name, with an empty "public"
// schema, and returns once its creation is durable. A database of that
// name already existing is an *Error with Kind ErrDatabaseExists (42P04).
// If the commit fails, the database does not exist.
func (s *Server) CreateDatabase(ctx context.Context, name string) (*Database, error) {
	if name == "" {
		return nil, &Error{Kind: ErrBadDef, Code: pgcode.InvalidName, Message: "database name must not be empty"}
	}
	s.mu.Lock()
	if db, ok := s.mu.dbs[name]; ok && !db.dropped.Load() {
		s.mu.Unlock()
		return nil, errDatabaseExists(name)
	}
	db := s.newEmptyDatabase(name)
	s.mu.dbs[name] = db
	s.mu.Unlock()
	if err := db.commitMarker(ctx, OpCreateDatabase); err != nil {
		s.forget(db)
		return nil, err
	}
	return db, nil
}

// DropDatabase erases the database called name and everything in it, and
// returns once the erasure is durable. From its commit on, the database's
// transactions fail to commit (3D000) and Lookup no longer finds it; who
// is still connected to it is the caller's business. A missing database
// is an *Error with Kind ErrNoDatabase (3D000).
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	db, ok := s.Lookup(name)
	if !ok {
		return errNoDatabase(name)
	}
	if err := db.commitMarker(ctx, OpDropDatabase); err != nil {
		return err
	}
	s.forget(db)
	if b := db.branch; b != nil && b.Writable() {
		// No commit follows the drop: its version holds every file the
		// branch wrote.
		if err := s.releaseBranchFiles(ctx, db.name, b, db.Current()); err != nil {
			return fmt.Errorf("database %q is dropped, but scheduling its files for deletion in %q failed (they stay where they are): %w", db.name, b.Parent, err)
		}
	}
	return nil
}

// Forget removes the database called name from the registry in memory
// only: a replica whose writer dropped it.
func (s *Server) Forget(name string) {
	if db, ok := s.Lookup(name); ok {
		db.dropped.Store(true)
		s.forget(db)
	}
}

// forget removes db from the registry if it is still the one registered
// under its name.
func (s *Server) forget(db *Database) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.dbs[db.name] == db {
		delete(s.mu.dbs, db.name)
	}
}

// commitMarker commits a transaction whose only op is kind.
// It is the one write a branch, which is otherwise read-only, makes.
func (db *Database) commitMarker(ctx context.Context, kind OpKind) error {
	t := db.BeginLatest()
	t.b = newBuilder(t.base)
	t.ops = []Op{{Kind: kind}}
	return t.Commit(ctx)
}

// Dropped reports whether the database was dropped: its sessions may
// read what they pinned, but nothing they write will commit.
func (db *Database) Dropped() bool { return db.dropped.Load() }

// dropsDatabase reports whether ops are a DropDatabase commit.
func dropsDatabase(ops []Op) bool { return len(ops) == 1 && ops[0].Kind == OpDropDatabase }

// ForkCommit reports whether ops are a fork's commit (ForkDatabase): its
// op comes first, then the rows a writable fork writes on the branch.
func ForkCommit(ops []Op) bool { return len(ops) > 0 && ops[0].Kind == OpForkDatabase }
