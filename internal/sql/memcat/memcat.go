// Package memcat is the SQL layer's view of the resident catalog
// (internal/catalog): the shapes the executor reads — versions, schemas and
// tables with their pg_catalog object ids — and transactions that stage row
// operations into a catalog.Txn, plus the session-local temp tables that are
// never persisted.
//
// Invariants:
//   - A lake table's rows live only in the catalog, in its compact encoding;
//     Table.Scan decodes them on demand. Only temp tables keep Values.
//   - A table looked up through a *Version never changes: for a transaction
//     that wrote, View builds a fresh Version after each write, and a
//     Version answers every later lookup of a table as it answered the first.
//   - Primary keys are claimed at INSERT against every live transaction, so a
//     second inserter of a key fails at once with a unique violation
//     (PostgreSQL makes it wait for the first and then fail; DuckLake's
//     retry loop accepts either). The catalog re-checks at COMMIT against
//     what committed meanwhile.
package memcat

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
)

// DB is one database.
type DB struct {
	Name string
	cat  *catalog.Database
	mu   sync.Mutex
	// head and prev cache the views of the two catalog versions asked for
	// last: with commits in flight, writing sessions read the newest
	// version and everyone else the newest durable one, and a one-entry
	// cache would rebuild a view at every switch.
	head, prev struct {
		src *catalog.Version
		v   *Version
	}
	claims map[string]*Txn
	// spec is the newest sealed version (Txn.Seal), sealed at specAt:
	// writing sessions pin it instead of the current version while it
	// Extends that and is younger than settleWait.
	spec   *catalog.Version
	specAt time.Time
	// defs caches the TableDef derived from each catalog TableInfo.
	defs sync.Map
	// settleWait, leaseHold and leaseMax are SettleWait, LeaseHold and
	// LeaseMax (tests widen them to tell waiting from scheduling noise).
	settleWait, leaseHold, leaseMax time.Duration
	// writers holds the transactions that claimed a key or are
	// committing: what a new snapshot may wait for (see settle).
	writers map[*Txn]*writer
	// lease admits writing sessions to pin a snapshot one at a time (see
	// acquireLease).
	lease struct {
		holder   *Txn
		settling bool      // holder is still waiting in settle: no expiry
		pinned   time.Time // when the holder pinned (its LeaseMax counts from here)
		// queue holds the waiting transactions in arrival order; only the
		// first is woken (when the lease is released or its holder pins),
		// so a handoff wakes one goroutine, not every waiter.
		queue []*leaseWaiter
	}
	oids atomic.Uint32
	// admitting counts writing sessions' transactions waiting to pin (for
	// the lease or in settle): each is about to build on the commit under
	// way, which may then be held for it (Txn.Commit).
	admitting atomic.Int32
}

// NewOID allocates an object id for a session temp table.
func (db *DB) NewOID() uint32 { return db.oids.Add(1) }

// Head returns the newest durable version (an O(1) snapshot): what a read
// outside a transaction, acknowledged at once, may see.
func (db *DB) Head() *Version { return db.versionOf(db.cat.Durable()) }

func (db *DB) versionOf(cv *catalog.Version) *Version {
	db.mu.Lock()
	defer db.mu.Unlock()
	switch cv {
	case db.head.src:
		return db.head.v
	case db.prev.src:
		db.head, db.prev = db.prev, db.head
		return db.head.v
	}
	v := newVersion(cv, &db.defs, db.cat.Branch())
	db.prev = db.head
	db.head.src, db.head.v = cv, v
	return v
}

// Begin starts a transaction reading the newest version, once the commits
// under way have settled (see settle). It fails only if ctx ends first.
//
// writer marks a transaction of a session that has written before: it pins
// under the lease (acquireLease).
func (db *DB) Begin(ctx context.Context, writer bool) (*Txn, error) {
	t := &Txn{db: db, writer: writer}
	if err := t.admit(ctx); err != nil {
		return nil, err
	}
	t.tx = t.begin()
	return t, nil
}

// BeginDeferred starts a transaction whose snapshot is taken later, by Pin
// (PostgreSQL takes a REPEATABLE READ snapshot at the transaction's first
// statement, not at BEGIN). Until then it reads the newest durable version
// without waiting for anything, which is all a Describe needs.
//
// Why: a writing session's BEGIN would otherwise wait for the lease and
// for the commit under way (settle) before answering, and the client's
// next round trip (DuckLake's Parse/Describe of the latest-snapshot query)
// would start only then; deferred, both round trips overlap the commit
// ahead, and the transaction pins at its first real read.
func (db *DB) BeginDeferred(writer bool) *Txn {
	return &Txn{db: db, writer: writer, deferred: true, tx: db.cat.Begin()}
}

// Deferred reports whether the transaction has yet to take its snapshot.
func (t *Txn) Deferred() bool { return t.deferred }

// Pin takes the snapshot of a deferred transaction (see BeginDeferred):
// the newest version, after waiting as Begin does. A Describe answered
// before the pin described the table definitions of an older version; if
// a commit changed a definition since, the transaction fails with a
// serialization error rather than return rows that do not match what it
// described.
func (t *Txn) Pin(ctx context.Context) error {
	if !t.deferred {
		return nil
	}
	early := t.tx.Base()
	if err := t.Rebase(ctx); err != nil { // a deferred transaction has no writes
		return err
	}
	t.deferred = false
	if t.readEarly && t.tx.Base().DDLSeq() != early.DDLSeq() {
		return catalog.SerializationFailure("a table definition changed between the transaction's Describe and its first statement")
	}
	return nil
}

// begin pins the catalog version: a writing session's transactions the
// newest, durable or not, so that a commit follows one still being made
// durable without waiting for it (its own COMMIT is acknowledged only
// after both are durable: catalog.Database); other sessions' the newest
// durable one, which they never wait for.
func (t *Txn) begin() *catalog.Txn {
	if t.writer {
		db := t.db
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.cat.BeginOn(db.pinBaseLocked())
	}
	return t.db.cat.Begin()
}
