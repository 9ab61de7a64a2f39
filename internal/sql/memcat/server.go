package memcat

import (
	"context"
	"sync"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/merge"
)

// Server is the SQL layer's view of every database of a catalog server.
type Server struct {
	cat *catalog.Server
	mu  sync.Mutex
	dbs map[string]*DB
}

// NewServer returns a view of a fresh in-memory catalog (no persistence)
// holding the named databases.
func NewServer(databases ...string) *Server {
	s := On(catalog.NewServer(catalog.Options{}))
	for _, name := range databases {
		s.Database(name)
	}
	return s
}

// On returns the SQL layer's view of cat.
func On(cat *catalog.Server) *Server { return &Server{cat: cat, dbs: map[string]*DB{}} }

// Catalog returns the underlying resident catalog.
func (s *Server) Catalog() *catalog.Server { return s.cat }

// Database returns the named database, creating it in memory (with schema
// "public", as PostgreSQL's template does) if it does not exist: for
// in-process use. Clients reach only existing databases (Lookup).
func (s *Server) Database(name string) *DB { return s.view(s.cat.Database(name)) }

// Lookup returns the named database if it exists.
func (s *Server) Lookup(name string) (*DB, bool) {
	cdb, ok := s.cat.Lookup(name)
	if !ok {
		return nil, false
	}
	return s.view(cdb), true
}

// view returns the view of cdb, made once per catalog database: a database
// dropped and created again under the same name is a new one.
func (s *Server) view(cdb *catalog.Database) *DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.dbs[cdb.Name()]; ok && db.cat == cdb {
		return db
	}
	db := &DB{Name: cdb.Name(), cat: cdb, settleWait: SettleWait, leaseHold: LeaseHold, leaseMax: LeaseMax}
	db.oids.Store(firstTempOID)
	s.dbs[cdb.Name()] = db
	return db
}

// CreateDatabase creates a database (catalog.Server.CreateDatabase).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	_, err := s.cat.CreateDatabase(ctx, name)
	return err
}

// ForkDatabase creates a branch of parent (catalog.Server.ForkDatabase).
func (s *Server) ForkDatabase(ctx context.Context, name, parent string, o catalog.ForkOptions) error {
	_, err := s.cat.ForkDatabase(ctx, name, parent, o)
	return err
}

// CheckMerge reports whether name can be merged into into
// (catalog.Server.CheckMerge).
func (s *Server) CheckMerge(name, into string) error { return s.cat.CheckMerge(name, into) }

// MergeBranch merges the writable branch name into its parent into
// (merge.Branch).
func (s *Server) MergeBranch(ctx context.Context, name, into string) (merge.Result, error) {
	res, err := merge.Branch(ctx, s.cat, name, into)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.dbs[name]; ok && db.cat.Dropped() {
		delete(s.dbs, name)
	}
	return res, nil
}

// DropDatabase drops a database (catalog.Server.DropDatabase).
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.cat.DropDatabase(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.dbs[name]; ok && db.cat.Dropped() {
		delete(s.dbs, name)
	}
	return nil
}

// firstTempOID starts the oids of session temp tables above every oid the
// catalog or rowTypeOID hands out.
const firstTempOID = 3 << 30
