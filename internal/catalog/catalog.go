// Package catalog is moraine's resident catalog: every database a client
// attaches, its schemas and tables, and their rows, held in memory in the
// compact datum.Row encoding and versioned copy-on-write.
//
// Structure:
//
//	Server ─ registry of databases by PostgreSQL database name (created on
//	│        first use) and allocator of catalog ids
//	Database ─ current *Version (atomic pointer), commit serialisation
//	│
//	Version ─ immutable: schemas → tables → rows (B-tree by ctid) and a
//	          primary-key index (B-tree by encoded key)
//
// A Version never changes once published. A transaction pins one by holding
// its pointer (O(1)); its writes go into a private working version that
// copies a table (O(1), tidwall/btree's copy-on-write Copy) on its first
// write and shares every untouched node with the base. Applying a commit
// builds the next version the same way, so a commit costs O(rows written ×
// log n) plus O(tables touched), never a copy of a table.
//
// Row locators are PostgreSQL ctids computed by emulating PostgreSQL's heap
// page layout (heap.go): a row's ctid is the one PostgreSQL 15 would give it
// for the same history of inserts, updates and deletes.
//
// Each schema is one DuckLake catalog when it holds DuckLake's tables: a
// (database, metadata schema) pair, named in the keyspace by its catalog id.
//
// docs/catalog.md is the user-facing description of this API.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Committer makes a commit durable. The catalog calls Persist with the
// database's commit lock held, so commits reach it one at a time in the
// order they are published; only if it returns nil does Next become the
// database's current version. A Committer must not call back into the
// same Database's commit path.
type Committer interface {
	Persist(ctx context.Context, c *Commit) error
}

// Commit is one commit offered to a Committer.
type Commit struct {
	DB   *Database
	Base *Version // the current version the commit applies to
	Next *Version // the version it produces
	Ops  []Op     // the transaction's operations, in order
	// Pinned is the version the transaction read (its REPEATABLE READ
	// snapshot); it is Base unless other commits landed meanwhile. The commit
	// pipeline classifies conflicts against what landed after it.
	Pinned *Version
}

// Options configure a Server.
type Options struct {
	// Committer persists commits; nil keeps commits in memory only.
	Committer Committer
}

// Server is the registry of databases.
type Server struct {
	opts Options
	mu   struct {
		sync.Mutex
		dbs map[string]*Database
	}
	nextCatalogID atomic.Uint32
}

// NewServer returns an empty registry.
func NewServer(opts Options) *Server {
	s := &Server{opts: opts}
	s.mu.dbs = map[string]*Database{}
	s.nextCatalogID.Store(1)
	return s
}

func (s *Server) allocCatalogID() uint32 { return s.nextCatalogID.Add(1) - 1 }

// noteCatalogID makes sure later allocations stay above id (after a load).
func (s *Server) noteCatalogID(id uint32) {
	for {
		cur := s.nextCatalogID.Load()
		if cur > id || s.nextCatalogID.CompareAndSwap(cur, id+1) {
			return
		}
	}
}

// Database returns the database called name, creating it (with an empty
// "public" schema) on first use, as PostgreSQL clients expect a database
// named in the connection string to exist.
func (s *Server) Database(name string) *Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.mu.dbs[name]; ok {
		return db
	}
	b := newBuilder(newVersion())
	b.v.seq = 0
	if _, err := b.createSchema("public", s.allocCatalogID()); err != nil {
		panic("BUG: fresh database: " + err.Error())
	}
	db := &Database{name: name, srv: s}
	db.cur.Store(b.finish())
	s.mu.dbs[name] = db
	return db
}

// Lookup returns the database called name if it exists.
func (s *Server) Lookup(name string) (*Database, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	db, ok := s.mu.dbs[name]
	return db, ok
}

// Databases returns the names of the existing databases, sorted.
func (s *Server) Databases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mu.dbs))
	for n := range s.mu.dbs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CatalogRef names one DuckLake catalog: a database and a schema.
type CatalogRef struct {
	Database, Schema string
}

// Catalogs returns every (database, schema) pair with its catalog id.
func (s *Server) Catalogs() map[uint32]CatalogRef {
	s.mu.Lock()
	dbs := make([]*Database, 0, len(s.mu.dbs))
	for _, db := range s.mu.dbs {
		dbs = append(dbs, db)
	}
	s.mu.Unlock()
	out := map[uint32]CatalogRef{}
	for _, db := range dbs {
		for _, sc := range db.Current().Schemas() {
			out[sc.CatalogID] = CatalogRef{db.name, sc.Name}
		}
	}
	return out
}

// Database is one PostgreSQL database: a sequence of versions.
type Database struct {
	name string
	srv  *Server
	cur  atomic.Pointer[Version]
	// commitMu serialises commits and publication.
	commitMu sync.Mutex
}

// Name is the PostgreSQL database name.
func (db *Database) Name() string { return db.name }

// Current returns the current version in O(1).
func (db *Database) Current() *Version { return db.cur.Load() }

// Begin starts a transaction pinned to the current version.
func (db *Database) Begin() *Txn { return &Txn{db: db, base: db.Current()} }

// ErrStale is returned by Publish when the current version is no longer base.
var ErrStale = errors.New("catalog: current version moved on")

// Publish makes next the current version if the current one is still base.
// It is for a commit layer that applies and persists commits itself; Txn
// Commit does the same through the Committer.
func (db *Database) Publish(base, next *Version) error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	if db.cur.Load() != base {
		return ErrStale
	}
	db.cur.Store(next)
	return nil
}

func (db *Database) commit(ctx context.Context, t *Txn) error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	cur := db.cur.Load()
	var next *Version
	if cur == t.base {
		// Nothing landed since the transaction began: its working version
		// is exactly the next version.
		next = t.b.finish()
	} else {
		var err error
		if next, err = cur.Apply(t.ops); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	t.b = nil
	if c := db.srv.opts.Committer; c != nil {
		if err := c.Persist(ctx, &Commit{DB: db, Base: cur, Next: next, Ops: t.ops, Pinned: t.base}); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	db.cur.Store(next)
	return nil
}

// Server returns the registry the database belongs to.
func (db *Database) Server() *Server { return db.srv }
