// Package catalog is moraine's resident catalog: every database a client
// attaches, its schemas and tables, and their rows, held in memory in the
// compact datum.Row encoding and versioned copy-on-write.
//
// Structure:
//
//	Server ─ registry of databases by PostgreSQL database name (created
//	│        and dropped explicitly, database.go; or forked from another as
//	│        a read-only branch, branch.go) and allocator of catalog ids
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
	"time"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// Committer makes commits durable, pipelined: the catalog calls Submit with
// the database's commit lock held, so commits reach it one at a time in the
// order they are published. Submit fixes the commit's place in the durable
// order and returns; wait reports when it is durable. Every commit
// submitted after a failed one fails too. The database publishes the commit
// to writers (Current) when Submit returns nil and to readers (Durable) when
// wait returns nil. A Committer must not call back into the same Database's
// commit path. commit.Pipeline is the one moraine serves with.
type Committer interface {
	Submit(ctx context.Context, c *Commit) (wait func(context.Context) error, err error)
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
	// Followed: another writer is known to be waiting to commit after this
	// one (Txn.SetFollowed); the Committer may hold this commit briefly to
	// persist both together.
	Followed bool
	// Consumes is the writable branch a merge commit publishes (merge.go):
	// the same batch erases it, as its drop would, without handing its
	// files to anyone, since the commit's rows now name them.
	Consumes *Database
}

// Options configure a Server.
type Options struct {
	// Committer persists commits; nil keeps commits in memory only.
	Committer Committer
	// SealedWait bounds how long a transaction pinned on a sealed version
	// waits, at its commit, for that version's transaction to decide
	// (speculate.go); 0 means DefaultSealedWait.
	SealedWait time.Duration
	// Follow prepares a loaded server to follow a writer (ApplyCommitted):
	// Load indexes the rows of tables without a primary key or lookup
	// index by key as it places them, so that following finds them at
	// once whatever the catalog's size.
	Follow bool
	// ReadAt reads the store as of an earlier seq that a branch record pins
	// (branch.go); Load needs it only for a store holding branches.
	ReadAt ReadAt
	// BranchSeq returns the seqs of the stored record of the branch called
	// name: the one it reads its parent at, and its own (its fork
	// commit's): what a merge reads the fork through (merge.go). Nil:
	// branches cannot be merged.
	BranchSeq func(ctx context.Context, name string) (base, own uint64, err error)
}

// ReadAt returns the pairs under prefix as the store held them at seq, in
// key order; done releases what the read holds.
type ReadAt func(ctx context.Context, seq uint64, prefix []byte) (it Iterator, done func() error, err error)

// DefaultSealedWait is Options.SealedWait's default: a DuckLake writer
// decides within a round trip of sealing, so a second means the sealer
// holds its transaction open, and its followers give up (40001) rather
// than wait for a session they cannot see.
const DefaultSealedWait = time.Second

func (o Options) sealedWait() time.Duration {
	if o.SealedWait > 0 {
		return o.SealedWait
	}
	return DefaultSealedWait
}

// Server is the registry of databases.
type Server struct {
	opts Options
	mu   struct {
		sync.Mutex
		dbs map[string]*Database
	}
	nextCatalogID atomic.Uint32
	// branches counts the branch databases ever registered, so that a
	// commit on a server without any skips checkBranches.
	branches atomic.Int64
	// follow is a follower's state across ApplyCommitted calls (its row
	// indexes); nil until the first.
	follow *followState
}

// NewServer returns an empty registry.
func NewServer(opts Options) *Server {
	s := &Server{opts: opts}
	s.mu.dbs = map[string]*Database{}
	s.nextCatalogID.Store(1)
	return s
}

func (s *Server) allocCatalogID() uint32 { return s.nextCatalogID.Add(1) - 1 }

// Database returns the database called name, creating it in memory (with
// an empty "public" schema) if it does not exist; CreateDatabase makes one
// durable.
func (s *Server) Database(name string) *Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.mu.dbs[name]; ok && !db.dropped.Load() {
		return db
	}
	db := s.newEmptyDatabase(name)
	s.mu.dbs[name] = db
	return db
}

// Lookup returns the database called name if it exists.
func (s *Server) Lookup(name string) (*Database, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	db, ok := s.mu.dbs[name]
	if !ok || db.dropped.Load() {
		return nil, false
	}
	return db, true
}

// Databases returns the names of the existing databases, sorted.
func (s *Server) Databases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mu.dbs))
	for n, db := range s.mu.dbs {
		if !db.dropped.Load() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// CatalogRef names one DuckLake catalog: a database and a schema.
type CatalogRef struct {
	Database, Schema string
}

// Catalogs returns every (database, schema) pair with its catalog id.
// A branch reads its parent's catalog ids and owns none: it is not listed.
func (s *Server) Catalogs() map[uint32]CatalogRef {
	out := map[uint32]CatalogRef{}
	for _, db := range s.primaries() {
		for _, sc := range db.Current().Schemas() {
			out[sc.CatalogID] = CatalogRef{db.name, sc.Name}
		}
	}
	return out
}

// Database is one PostgreSQL database: a sequence of versions.
//
// Two versions are published. cur is the newest commit, which later
// commits build on; its commit may not be durable yet. durable is
// the newest durable commit, an ancestor of cur (or cur). INVARIANT:
// nothing is acknowledged that depends on a version newer than durable:
// a commit built on cur is durable only after the commits before it (the
// store writes in submission order, and one failure fails all later ones),
// and a transaction that read a version without writing waits for that
// version to be durable before its COMMIT is acknowledged (Txn.Commit).
type Database struct {
	name    string
	srv     *Server
	cur     atomic.Pointer[Version]
	durable atomic.Pointer[Version]
	// commitMu serialises commits and publication.
	commitMu sync.Mutex
	// branch is set for a database forked from another (branch.go): what
	// the branch reads, and its record in the store. Never changes.
	branch *keyspace.Branch
	// forkVer is a writable branch's version as its fork commit left it,
	// the ancestor of every later one (what a merge diffs against,
	// merge.go); nil for a branch loaded from the store. It holds little:
	// later versions share all but what they changed.
	forkVer *Version
	// dropped is set, under commitMu, when a DropDatabase commit is
	// submitted: no commit may follow it (it would write the catalogs the
	// drop erases).
	dropped atomic.Bool

	dur struct {
		sync.Mutex
		advanced chan struct{} // closed and replaced when durable advances or failed is set
		failed   error         // a pipelined commit failed: no later version becomes durable
	}
}

func newDatabase(name string, srv *Server, v *Version) *Database {
	db := &Database{name: name, srv: srv}
	db.cur.Store(v)
	db.durable.Store(v)
	db.dur.advanced = make(chan struct{})
	return db
}

// Name is the PostgreSQL database name.
func (db *Database) Name() string { return db.name }

// Current returns the newest version in O(1): possibly
// one whose commit is not durable yet. Writers build on it.
func (db *Database) Current() *Version { return db.cur.Load() }

// Durable returns the newest version whose commit is durable, in O(1).
func (db *Database) Durable() *Version { return db.durable.Load() }

// Begin starts a transaction pinned to the newest durable version: what
// a reader may see without waiting.
func (db *Database) Begin() *Txn { return &Txn{db: db, base: db.Durable()} }

// BeginLatest starts a transaction pinned to the newest version, durable
// or not (see Database). Its commit, and a read-only COMMIT, are
// acknowledged only once that version is durable. Sessions that write use
// it: a commit built on a commit still in flight is pipelined behind it
// instead of waiting for it to become durable.
func (db *Database) BeginLatest() *Txn { return &Txn{db: db, base: db.Current()} }

// BeginOn starts a transaction pinned to v, which must be Current or a
// sealed version that Extends it (Txn.Seal): its commit, and a read-only
// COMMIT, wait for every sealed version under v to land and fail with a
// serialization error if one does not.
func (db *Database) BeginOn(v *Version) *Txn { return &Txn{db: db, base: v} }

// advanceDurable records that v (and so every version before it) is
// durable.
func (db *Database) advanceDurable(v *Version) {
	db.dur.Lock()
	defer db.dur.Unlock()
	// Acknowledgements come in commit order, but their goroutines may run
	// in any order: never move back.
	if d := db.durable.Load(); d.seq >= v.seq {
		return
	}
	db.setDurableLocked(v)
}

// setDurableLocked makes v the durable version and wakes WaitDurable.
// REQUIRES: db.dur held.
func (db *Database) setDurableLocked(v *Version) {
	db.durable.Store(v)
	close(db.dur.advanced)
	db.dur.advanced = make(chan struct{})
}

// failDurable records that a pipelined commit failed: the versions from it
// on will never be durable, and writers go back to the durable version (the
// committer refuses their commits from now on; the server reopens the
// store).
func (db *Database) failDurable(err error) {
	db.commitMu.Lock()
	db.cur.Store(db.durable.Load())
	db.commitMu.Unlock()
	db.dur.Lock()
	defer db.dur.Unlock()
	if db.dur.failed == nil {
		db.dur.failed = err
		close(db.dur.advanced)
		db.dur.advanced = make(chan struct{})
	}
}

// WaitDurable returns once v is durable, or with an error if the commit
// pipeline failed first or ctx ended.
func (db *Database) WaitDurable(ctx context.Context, v *Version) error {
	// A sealed version is not in the chain of commits until it landed.
	if err := v.landed(ctx, db.srv.opts.sealedWait()); err != nil {
		return err
	}
	for {
		db.dur.Lock()
		d, failed, ch := db.durable.Load(), db.dur.failed, db.dur.advanced
		db.dur.Unlock()
		if d == v || d.seq >= v.seq {
			return nil
		}
		if failed != nil {
			return fmt.Errorf("the snapshot this transaction read was never made durable: %w", failed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

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
	db.dur.Lock()
	db.setDurableLocked(next) // a follower's version: its seq may be lower
	db.dur.Unlock()
	return nil
}

// commit persists and publishes t. published, if set, runs once t is
// visible to later writers and before Commit returns (for the SQL layer's
// bookkeeping of commits under way).
func (db *Database) commit(ctx context.Context, t *Txn, published func()) error {
	// A transaction pinned on a sealed version commits only once that
	// version landed (speculate.go); the wait is outside the commit lock.
	if err := t.base.landed(ctx, db.srv.opts.sealedWait()); err != nil {
		t.drop()
		return fmt.Errorf("commit: %w", err)
	}
	db.commitMu.Lock()
	if db.dropped.Load() {
		db.commitMu.Unlock()
		t.drop()
		return fmt.Errorf("commit: %w", errNoDatabase(db.name))
	}
	if err := db.srv.checkBranches(db, t.ops); err != nil {
		db.commitMu.Unlock()
		t.drop()
		return fmt.Errorf("commit: %w", err)
	}
	cur := db.cur.Load()
	if cur != t.base && t.consumes != nil {
		// A merge is planned on the version it read: the ids it gave the
		// branch's rows are the ones free there (MergeBranch plans again).
		db.commitMu.Unlock()
		t.drop()
		return &Error{Kind: ErrSerialization, Code: pgcode.SerializationFailure,
			Message: fmt.Sprintf("could not serialize access due to concurrent update: %q committed while the merge of %q was planned", db.name, t.consumes.name)}
	}
	sealed := t.sealed
	var next *Version
	switch {
	case cur == t.base && t.b != nil:
		// Nothing landed since the transaction began: its working version
		// is exactly the next version.
		next = t.b.finish()
	case cur == t.base:
		next = sealed // sealed and not written since: lands as it is
	default:
		var err error
		if next, err = cur.Apply(t.ops); err != nil {
			db.commitMu.Unlock()
			t.drop()
			return fmt.Errorf("commit: %w", err)
		}
	}
	t.b, t.sealed = nil, nil
	// settleSealed decides the sealed version, once next is current or the
	// commit failed: it lands only as the very version published.
	settleSealed := func(published bool) {
		if sealed != nil {
			sealed.resolve(published && next == sealed)
		}
	}
	c := &Commit{DB: db, Base: cur, Next: next, Ops: t.ops, Pinned: t.base, Followed: t.followed, Consumes: t.consumes}
	cm := db.srv.opts.Committer
	if cm == nil {
		// In memory only: the commit is durable as it is published.
		db.landed(t, next)
		db.cur.Store(next)
		settleSealed(true)
		db.advanceDurable(next)
		db.commitMu.Unlock()
		if published != nil {
			published()
		}
		return nil
	}
	wait, err := cm.Submit(ctx, c)
	if err != nil {
		db.commitMu.Unlock()
		settleSealed(false)
		return fmt.Errorf("commit: %w", err)
	}
	db.landed(t, next)
	db.cur.Store(next)
	settleSealed(true)
	db.commitMu.Unlock()
	if published != nil {
		published()
	}
	// The outcome is recorded whether or not the caller still waits: a
	// failure must stop the versions after it from ever counting as
	// durable.
	done := make(chan error, 1)
	go func() {
		err := wait(context.Background())
		if err != nil {
			db.failDurable(err)
		} else {
			db.advanceDurable(next)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("commit: outcome unknown: %w", ctx.Err())
	}
}

// landed records what a commit of t, queued as next, does beyond its
// version: a drop ends the database, a merge the branch it consumed, and
// a writable branch's fork commit leaves the version its merge diffs
// against. REQUIRES: db.commitMu.
func (db *Database) landed(t *Txn, next *Version) {
	if dropsDatabase(t.ops) {
		db.dropped.Store(true)
	}
	db.srv.consumed(t.consumes)
	if ForkCommit(t.ops) && db.branch != nil && db.branch.Writable() {
		db.forkVer = next
	}
}

// Server returns the registry the database belongs to.
func (db *Database) Server() *Server { return db.srv }
