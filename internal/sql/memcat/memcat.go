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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// Errors callers branch on. The SQL layer turns them into SQLSTATEs.
var (
	ErrNoSuchTable   = errors.New("memcat: no such table")
	ErrNoSuchSchema  = errors.New("memcat: no such schema")
	ErrTableExists   = errors.New("memcat: table already exists")
	ErrSchemaExists  = errors.New("memcat: schema already exists")
	ErrNoSuchColumn  = errors.New("memcat: no such column")
	ErrColumnExists  = errors.New("memcat: column already exists")
	ErrSerialization = errors.New("memcat: concurrent update")
	ErrNoSuchRow     = errors.New("memcat: no such row")
)

// UniqueError is a primary-key violation.
type UniqueError struct {
	Schema     string // schema name
	Table      string // table name
	Constraint string // "<table>_pkey"
	Columns    []string
	Values     []string // text forms of the duplicate key
	detail     string
}

func (e *UniqueError) Error() string {
	return fmt.Sprintf("duplicate key value violates unique constraint %q", e.Constraint)
}

// Detail is PostgreSQL's DETAIL line for the violation.
func (e *UniqueError) Detail() string {
	if e.detail != "" {
		return e.detail
	}
	return fmt.Sprintf("Key (%s)=(%s) already exists.", strings.Join(e.Columns, ", "), strings.Join(e.Values, ", "))
}

// Column is one column of a table definition.
type Column struct {
	Name    string
	Type    datum.Type
	NotNull bool
}

// TableDef is a table's shape.
type TableDef struct {
	Columns []Column
	PK      []int // indexes into Columns; empty when the table has no primary key
	// memo belongs to a lake table's definition, which is immutable (DDL
	// makes a new one): what the SQL layer derives from the definition
	// alone is kept here once, not rebuilt per statement. Nil for temp
	// tables, whose definitions ALTER changes in place.
	memo *sync.Map
}

// Memo is the definition's cache (see TableDef.memo), nil for a temp table.
// Values stored in it must be immutable.
func (t *Table) Memo() *sync.Map { return t.Def.memo }

// ColumnIndex returns the position of the named column, or -1.
func (d *TableDef) ColumnIndex(name string) int {
	for i, c := range d.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Row is one row version of a temp table.
type Row struct {
	CTID int64 // block<<16 | offset, as datum.TIDValue encodes it
	Vals []datum.Value
}

// Table is one table at one version: a lake table backed by the catalog, or
// a session temp table holding its rows here.
type Table struct {
	Name   string
	OID    uint32
	TypOID uint32 // the table's row type
	PKOID  uint32 // the primary key constraint (and its index), 0 without one
	Def    TableDef
	// Rows are a temp table's rows, ascending CTID. Empty for lake tables:
	// use Scan.
	Rows  []Row
	src   *catalog.Table
	alloc *atomic.Int64
}

// NewTable returns an empty session-local temp table.
func NewTable(name string, oid, typOID, pkOID uint32, def TableDef) *Table {
	def.memo = nil // a temp table's definition changes in place
	return &Table{Name: name, OID: oid, TypOID: typOID, PKOID: pkOID, Def: def, alloc: new(atomic.Int64)}
}

// rowTypeOID derives the pg_type oid of a lake table's row type from its
// pg_class oid. The catalog allocates class oids below 2^30; row types live
// above, so they never collide with another object.
func rowTypeOID(classOID uint32) uint32 { return classOID | 1<<30 }

// Len is the number of rows.
func (t *Table) Len() int {
	if t.src != nil {
		return t.src.Len()
	}
	return len(t.Rows)
}

// Scan calls fn for every row in ctid order with its values until fn
// returns false. The slice is only valid during the call (it is reused):
// fn copies what it keeps.
func (t *Table) Scan(fn func(ctid int64, vals []datum.Value) bool) error {
	if t.src == nil {
		for _, r := range t.Rows {
			if !fn(r.CTID, r.Vals) {
				break
			}
		}
		return nil
	}
	types := t.src.Types()
	var derr error
	// vals is reused from row to row: fn must copy what it keeps.
	var vals []datum.Value
	t.src.Scan(func(c catalog.CTID, r datum.Row) bool {
		var err error
		vals, err = r.Decode(types, vals[:0])
		if err != nil {
			derr = fmt.Errorf("memcat: %s row %s: %w", t.Name, c, err)
			return false
		}
		return fn(int64(c), vals)
	})
	return derr
}

// EncodedRows returns, for a lake table, the types its rows are encoded
// with and a scan over the stored rows in ctid order (a row's bytes are
// valid during fn only); ok is false for a temp table. The binary COPY fast
// path (internal/sql/copyplan.go) encodes straight from these bytes.
func (t *Table) EncodedRows() (types []datum.Type, scan func(fn func(ctid int64, r datum.Row) bool), ok bool) {
	if t.src == nil {
		return nil, nil, false
	}
	src := t.src
	return src.Types(), func(fn func(ctid int64, r datum.Row) bool) {
		src.Scan(func(c catalog.CTID, r datum.Row) bool { return fn(int64(c), r) })
	}, true
}

// Chunk is a run of a lake table's stored rows that later versions share
// while none of its rows changes; its Key names its rows (catalog.Chunk).
type Chunk = catalog.Chunk

// ChunkKey names a Chunk's rows.
type ChunkKey = catalog.ChunkKey

// EncodedChunks is EncodedRows a chunk at a time: ok is false for a temp
// table and for a table the transaction is writing (its rows change in
// place, so no key can name them).
func (t *Table) EncodedChunks() (types []datum.Type, chunks func(fn func(Chunk) bool), ok bool) {
	if t.src == nil {
		return nil, nil, false
	}
	src := t.src
	if !src.Frozen() {
		return nil, nil, false
	}
	return src.Types(), func(fn func(Chunk) bool) { src.Chunks(fn) }, true
}

// Indexed reports whether the table is a lake table with a primary key
// index (LookupKey and EdgeKey answer from it).
func (t *Table) Indexed() bool { return t.src != nil && t.src.HasPrimaryKey() }

// LookupKey returns the row whose primary key equals key (one value per key
// column, each of its column's kind), decoded into buf. ok is false when no
// row has that key or the table has no index.
func (t *Table) LookupKey(key []datum.Value, buf []datum.Value) (ctid int64, vals []datum.Value, ok bool, err error) {
	if !t.Indexed() {
		return 0, nil, false, nil
	}
	c, r, ok := t.src.LookupKey(key)
	if !ok {
		return 0, nil, false, nil
	}
	return t.decodeAt(c, r, buf)
}

// EdgeKey returns the row with the smallest (last false) or largest (last
// true) value of the first primary key column when the index orders that
// column as SQL does; ok is false otherwise or when the table is empty.
func (t *Table) EdgeKey(last bool, buf []datum.Value) (ctid int64, vals []datum.Value, ok bool, err error) {
	if t.src == nil {
		return 0, nil, false, nil
	}
	c, r, ok := t.src.EdgeKey(last)
	if !ok {
		return 0, nil, false, nil
	}
	return t.decodeAt(c, r, buf)
}

// LookupCTID returns the row at ctid, decoded into buf: a TID scan, as
// PostgreSQL answers `WHERE ctid = …`. ok is false when no row is there or
// t is a temp table (the caller then scans).
func (t *Table) LookupCTID(ctid int64, buf []datum.Value) (vals []datum.Value, ok bool, err error) {
	if t.src == nil {
		return nil, false, nil
	}
	r, ok := t.src.Lookup(catalog.CTID(ctid))
	if !ok {
		return nil, false, nil
	}
	_, vals, ok, err = t.decodeAt(catalog.CTID(ctid), r, buf)
	return vals, ok, err
}

// LookupColumns returns the columns of a lake table's lookup index
// (catalog.Table.LookupColumns), nil for a table without one.
func (t *Table) LookupColumns() []int {
	if t.src == nil {
		return nil
	}
	return t.src.LookupColumns()
}

// LookupPrefix calls fn, in ctid order, with the rows whose leading lookup
// columns may equal prefix, decoded; the index only narrows, so fn must
// re-check them. The rows are decoded into buf, reused from one row to the
// next (vals is valid only during the call: fn copies what it keeps). ok is
// false when the table cannot answer (no lookup index, a prefix that does
// not fit it); the caller then scans.
func (t *Table) LookupPrefix(prefix, buf []datum.Value, fn func(ctid int64, vals []datum.Value) error) (ok bool, err error) {
	if t.src == nil {
		return false, nil
	}
	ok = t.src.LookupPrefix(prefix, func(c catalog.CTID, r datum.Row) bool {
		var vals []datum.Value
		if _, vals, _, err = t.decodeAt(c, r, buf); err == nil {
			buf = vals
			err = fn(int64(c), vals)
		}
		return err == nil
	})
	return ok, err
}

func (t *Table) decodeAt(c catalog.CTID, r datum.Row, buf []datum.Value) (int64, []datum.Value, bool, error) {
	vals, err := r.Decode(t.src.Types(), buf[:0])
	if err != nil {
		return 0, nil, false, fmt.Errorf("memcat: %s row %s: %w", t.Name, c, err)
	}
	return int64(c), vals, true, nil
}

// NextCTID allocates a fresh temp-table ctid: (0,1), (0,2), … ; a block
// holds at most 65535 offsets before the next block begins.
func (t *Table) NextCTID() int64 {
	n := t.alloc.Add(1) - 1
	block, off := n/65535, n%65535+1
	return block<<16 | off
}

// CheckPK reports a UniqueError if vals duplicates the primary key of a
// temp-table row other than the one at skip (a ctid, or -1).
func (t *Table) CheckPK(vals []datum.Value, skip int64) error {
	if len(t.Def.PK) == 0 || t.src != nil {
		return nil
	}
	for _, r := range t.Rows {
		if r.CTID == skip {
			continue
		}
		same := true
		for _, i := range t.Def.PK {
			if vals[i].IsNull() || r.Vals[i].IsNull() || datum.Compare(vals[i], r.Vals[i]) != 0 {
				same = false
				break
			}
		}
		if same {
			return uniqueError(t, vals)
		}
	}
	return nil
}

func uniqueError(t *Table, vals []datum.Value) *UniqueError {
	e := &UniqueError{Table: t.Name, Constraint: t.Name + "_pkey"}
	for _, i := range t.Def.PK {
		e.Columns = append(e.Columns, t.Def.Columns[i].Name)
		e.Values = append(e.Values, datum.FormatText(t.Def.Columns[i].Type, vals[i]))
	}
	return e
}

// Schema is one schema at one version, with every table (SchemaList).
type Schema struct {
	Name   string
	OID    uint32
	Tables map[string]*Table
}

// Version is one state of a database's catalog as the executor reads it.
//
// It is lazy: a table's description is made when a statement first looks
// it up, and kept for later lookups through the same Version. A writing
// transaction builds a new Version after every write (Txn.View) and a
// statement names a handful of tables, so building every table's
// description up front cost more than the statement itself. The tables of
// a Version whose source is a transaction's view are frozen at their first
// lookup: a Version keeps answering what it answered first.
type Version struct {
	Seq  uint64
	src  *catalog.Version
	defs *sync.Map // *catalog.TableInfo → *TableDef, shared by a DB's versions

	mu     sync.Mutex
	tables map[[2]string]*Table
	list   []*Schema
}

func newVersion(v *catalog.Version, defs *sync.Map) *Version {
	return &Version{Seq: v.Seq(), src: v, defs: defs}
}

// HasSchema reports whether the named schema exists.
func (v *Version) HasSchema(name string) bool {
	_, ok := v.src.Schema(name)
	return ok
}

// Lookup returns a table.
func (v *Version) Lookup(schema, table string) (*Table, bool) {
	k := [2]string{schema, table}
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.tables[k]; ok {
		return t, true
	}
	s, ok := v.src.Schema(schema)
	if !ok {
		return nil, false
	}
	ct, ok := s.Table(table)
	if !ok {
		return nil, false
	}
	t := lakeTable(ct, v.defs)
	if v.tables == nil {
		v.tables = map[[2]string]*Table{}
	}
	v.tables[k] = t
	return t, true
}

// SchemaList returns the schemas in OID order, each with all its tables.
func (v *Version) SchemaList() []*Schema {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.list != nil {
		return v.list
	}
	list := make([]*Schema, 0, 4)
	for _, s := range v.src.Schemas() {
		tables := make(map[string]*Table, s.Len())
		s.EachTable(func(ct *catalog.Table) {
			k := [2]string{s.Name, ct.Name()}
			t, ok := v.tables[k]
			if !ok {
				t = lakeTable(ct, v.defs)
				if v.tables == nil {
					v.tables = map[[2]string]*Table{}
				}
				v.tables[k] = t
			}
			tables[ct.Name()] = t
		})
		list = append(list, &Schema{Name: s.Name, OID: s.OID, Tables: tables})
	}
	v.list = list
	return list
}

// lakeTable describes a catalog table, reusing the definition derived for
// its TableInfo (immutable: DDL replaces it) when defs is not nil.
func lakeTable(t *catalog.Table, defs *sync.Map) *Table {
	info := t.Info()
	var def *TableDef
	if defs != nil {
		if d, ok := defs.Load(info); ok {
			def = d.(*TableDef)
		}
	}
	if def == nil {
		def = &TableDef{PK: slices.Clone(info.Def.PrimaryKey), memo: new(sync.Map)}
		for _, c := range info.Def.Columns {
			def.Columns = append(def.Columns, Column{Name: c.Name, Type: c.Type, NotNull: c.NotNull})
		}
		if defs != nil {
			defs.Store(info, def)
		}
	}
	return &Table{Name: info.Def.Name, OID: info.OID, TypOID: rowTypeOID(info.OID), PKOID: info.IndexOID, Def: *def, src: t}
}

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
	return convert(err)
}

// DropDatabase drops a database (catalog.Server.DropDatabase).
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.cat.DropDatabase(ctx, name); err != nil {
		return convert(err)
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

// writer is a transaction's entry in DB.writers. Guarded by DB.mu.
type writer struct {
	txn        *Txn             // the claimer (its idle clock: settleDeadlineLocked)
	since      time.Time        // first claim
	committing bool             // COMMIT is under way
	done       chan struct{}    // closed when the transaction ended
	sealed     *catalog.Version // its writes, sealed for the next writer (Txn.Seal)
	sealedAt   time.Time
	sealedCh   chan struct{} // closed when it seals
}

// SettleWait bounds how long a new snapshot waits for a transaction that
// claimed keys but has not sent COMMIT yet while it sits idle — running no
// statement, waiting for its client. DuckLake sends its write batch and
// COMMIT back to back, so its claims end within a round trip or two; a
// session that sits in an open write transaction delays nobody for longer
// than this. A claimer still running its statements (a large batch: a
// commit of many files) is waited for up to LeaseMax from its first claim:
// counted from the claim, a batch longer than SettleWait would let the
// writers behind it pin a head about to go stale, each certain to fail on
// DuckLake's snapshot key (as the lease's holders did, see LeaseHold).
const SettleWait = 10 * time.Millisecond

// settle waits until the writes under way when it is called have ended:
// every commit being made durable, and every transaction that claimed keys
// and has not sat idle for SettleWait (settleDeadlineLocked). A snapshot
// pinned after settle sees each of them that landed.
//
// Why wait: DuckLake numbers a commit's snapshot base+1 from the snapshot
// its transaction pinned. A transaction that pins while another is writing
// base+1 pins a base that is about to be stale, so its own commit is certain
// to fail on the snapshot's primary key and back off (≥ 50 ms by default).
// Waiting about one store write instead and pinning the newer head lets it
// commit. Reading a version newer than strictly required is always
// allowed: the reader is ordered after those commits.
func (db *DB) settle(ctx context.Context, self *Txn) error {
	db.mu.Lock()
	if len(db.writers) == 0 {
		db.mu.Unlock()
		return nil
	}
	pending := make([]*writer, 0, len(db.writers))
	for t, w := range db.writers {
		if t != self { // a transaction never waits for its own claims
			pending = append(pending, w)
		}
	}
	db.mu.Unlock()
	for _, w := range pending {
		if err := db.settleOne(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// settleOne waits for one writer: until it ended if it is committing, else
// until settleDeadlineLocked — re-checking when that time is up, since a
// claimer that sent COMMIT meanwhile is now making its commit durable, and
// that is worth waiting for whatever it takes (on an object store, tens of
// milliseconds), and one that ran another statement has a later deadline.
func (db *DB) settleOne(ctx context.Context, w *writer) error {
	for {
		db.mu.Lock()
		committing, deadline, sealedCh := w.committing, db.settleDeadlineLocked(w, time.Now()), w.sealedCh
		// A writer that sealed its writes on the head is as good as landed
		// for a new snapshot: it pins them (pinBaseLocked), as long as the
		// seal is fresh; one that then sits idle is waited for like any
		// claimer.
		sealed := db.pinnableLocked(w.sealed, w.sealedAt)
		db.mu.Unlock()
		if sealed {
			return nil
		}
		if committing {
			select {
			case <-w.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		d := time.Until(deadline)
		if d <= 0 {
			return nil
		}
		tm := time.NewTimer(d)
		select {
		case <-w.done:
			tm.Stop()
			return nil
		case <-sealedCh:
			tm.Stop()
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
}

// settleDeadlineLocked is when a new snapshot stops waiting for claimer w
// that has not sent COMMIT: settleWait after its last statement ended, and
// while it runs one, settleWait from now (to look again) — never later
// than leaseMax after its first claim. REQUIRES: db.mu.
func (db *DB) settleDeadlineLocked(w *writer, now time.Time) time.Time {
	end := w.since.Add(db.leaseMax)
	idle := now
	if i := w.txn.idleSince.Load(); i != 0 {
		idle = time.Unix(0, i)
	}
	if e := idle.Add(db.settleWait); e.Before(end) {
		end = e
	}
	return end
}

// LeaseHold bounds how long the pinned holder of the pin lease may sit
// idle — running no statement, waiting for its client — before the next
// writer may pin. LeaseMax bounds how long it holds the lease in all while
// it keeps running statements without claiming a key.
//
// Why idle time, not time since the pin: an expired holder that then
// writes is certain to fail on DuckLake's snapshot key and to retry after
// a back-off, with a conflict query that scans whole catalog tables. The
// reads a DuckLake commit makes before its first write grow with the
// catalog (the column statistics of every table; on a retry every
// snapshot and every snapshot's changes), and counted from the pin they
// outgrew LeaseHold: 16 writers past 30 000 snapshots lost the lease on
// one commit in forty, and each loss made a retry whose conflict query
// lost it again. A holder that
// keeps its client's requests coming is about to write; one that stops
// (a read-only transaction of a writing session, holding its DuckDB query
// open) loses the lease after LeaseHold as before.
const (
	LeaseHold = 10 * time.Millisecond
	LeaseMax  = 100 * time.Millisecond
)

// SetWaits sets how long this database's writers wait for a claimed
// commit (SettleWait) and may hold the pin lease idle (LeaseHold; LeaseMax
// scales with it). Tests of the layers above widen them to tell who waits
// from scheduling noise; nothing else should change them.
func (db *DB) SetWaits(settle, lease time.Duration) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.settleWait, db.leaseHold, db.leaseMax = settle, lease, lease*(LeaseMax/LeaseHold)
}

// acquireLease makes t the holder of the pin lease, waiting while another
// transaction holds it (at most until that holder has sat idle for
// LeaseHold, or held it for LeaseMax).
//
// Why: DuckLake's commits all take snapshot base+1, so of the writers that
// pin the same head only one can commit; the others fail on the primary
// key and back off 50 ms or more. settle already keeps a pin from racing a
// commit under way, but when that commit lands every waiting writer pins
// the new head at once and all but one are doomed, and they burn the CPU
// the winner needs. The lease hands the new head to one writing session at
// a time: the next pins only once the holder claimed its snapshot (and so
// is waited for by settle), ended, or let the lease lapse
// (leaseExpiryLocked). Sessions that have not written never take it, so
// readers are not serialized.
func (db *DB) acquireLease(ctx context.Context, t *Txn) error {
	var me *leaseWaiter
	db.mu.Lock()
	defer db.mu.Unlock()
	for {
		l := &db.lease
		if l.holder == t {
			return nil // a holder pinning again (READ COMMITTED, Pin)
		}
		now := time.Now()
		recheck, free := db.leaseExpiryLocked(now)
		if free && (len(l.queue) == 0 || l.queue[0] == me) {
			if me != nil {
				l.queue = l.queue[1:]
			}
			// The holder first waits in settle for the writes under way;
			// its LeaseHold starts when it pins (admit).
			l.holder, l.settling = t, true
			return nil
		}
		if me == nil {
			me = &leaseWaiter{wake: make(chan struct{}, 1)}
			l.queue = append(l.queue, me)
		}
		// The first waiter times the holder's lapse once the holder
		// pinned; everyone else waits to be woken.
		var expiry <-chan time.Time
		var tm *time.Timer
		if l.queue[0] == me && recheck > 0 {
			tm = time.NewTimer(recheck)
			expiry = tm.C
		}
		db.mu.Unlock()
		var err error
		select {
		case <-me.wake:
		case <-expiry:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if tm != nil {
			tm.Stop()
		}
		db.mu.Lock()
		if err != nil {
			db.dropWaiterLocked(me)
			return err
		}
	}
}

// leaseExpiryLocked reports whether the pin lease is free at now: no
// holder, or a pinned holder that has sat idle (Txn.Idle) for leaseHold or
// held it for leaseMax. If it is not free, recheck is how long until it
// may be (0: only a wake-up frees it — the holder is settling). A holder's
// idleness is read, not signalled: the first waiter polls it, so a
// statement costs the holder two atomic stores and no lock.
// REQUIRES: db.mu.
func (db *DB) leaseExpiryLocked(now time.Time) (recheck time.Duration, free bool) {
	l := &db.lease
	if l.holder == nil {
		return 0, true
	}
	if l.settling {
		return 0, false
	}
	end := l.pinned.Add(db.leaseMax)
	if idle := l.holder.idleSince.Load(); idle != 0 {
		if e := time.Unix(0, idle).Add(db.leaseHold); e.Before(end) {
			end = e
		}
	} else if e := now.Add(db.leaseHold); e.Before(end) {
		end = e // running a statement: look again when it may have gone idle
	}
	if !now.Before(end) {
		return 0, true
	}
	return end.Sub(now), false
}

// leaseWaiter is a transaction waiting for the pin lease.
type leaseWaiter struct{ wake chan struct{} }

// wakeLeaseHeadLocked wakes the first waiter for the lease, if any.
// REQUIRES: db.mu.
func (db *DB) wakeLeaseHeadLocked() {
	if q := db.lease.queue; len(q) > 0 {
		select {
		case q[0].wake <- struct{}{}:
		default: // already woken
		}
	}
}

// dropWaiterLocked removes w from the lease queue (it gave up), waking the
// next waiter if w was first. REQUIRES: db.mu.
func (db *DB) dropWaiterLocked(w *leaseWaiter) {
	q := db.lease.queue
	for i, x := range q {
		if x == w {
			db.lease.queue = append(q[:i:i], q[i+1:]...)
			if i == 0 {
				db.wakeLeaseHeadLocked()
			}
			return
		}
	}
}

// releaseLeaseLocked gives up the pin lease if t holds it. REQUIRES: db.mu.
func (db *DB) releaseLeaseLocked(t *Txn) {
	if l := &db.lease; l.holder == t {
		l.holder = nil
		db.wakeLeaseHeadLocked()
	}
}

// enlist records t in db.writers (committing: its COMMIT started). Callers
// hold db.mu.
func (t *Txn) enlist(committing bool) {
	db := t.db
	w := db.writers[t]
	if w == nil {
		if db.writers == nil {
			db.writers = map[*Txn]*writer{}
		}
		w = &writer{txn: t, since: time.Now(), done: make(chan struct{}), sealedCh: make(chan struct{})}
		db.writers[t] = w
	}
	w.committing = w.committing || committing
	// A claimer is waited for by settle: the next writer may take the lease.
	db.releaseLeaseLocked(t)
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
	v := newVersion(cv, &db.defs)
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
		return fmt.Errorf("%w: a table definition changed between the transaction's Describe and its first statement", ErrSerialization)
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

// pinBaseLocked is the version a writing session pins: the newest sealed
// version while it extends the current one and was sealed less than
// settleWait ago (a sealer that has not committed by then may be a session
// holding its transaction open, whose followers would wait for it at their
// COMMIT), else the current one.
// REQUIRES: db.mu.
func (db *DB) pinBaseLocked() *catalog.Version {
	cur := db.cat.Current()
	if s := db.spec; s != nil {
		if s != cur && db.pinnableLocked(s, db.specAt) {
			return s
		}
		db.spec = nil // landed (cur is it or newer), failed, or stale
	}
	return cur
}

// pinnableLocked reports whether sealed version v, sealed at at, may be
// pinned by a new writer: it is fresh (younger than settleWait) and
// extends the current version. REQUIRES: db.mu.
func (db *DB) pinnableLocked(v *catalog.Version, at time.Time) bool {
	return v != nil && time.Since(at) < db.settleWait && v.Extends(db.cat.Current())
}

// Seal lets the writing sessions waiting to pin read t's writes before its
// COMMIT arrives (catalog.Txn.Seal): the SQL layer calls it when t's
// session is about to go idle inside its transaction, as DuckLake's is
// between its write batch and its COMMIT. It does nothing unless a writer
// is waiting, t claimed a key (settle waits for it), has not started
// committing, and built on the version writers pin now: a sealed version
// off that chain could never land as it is.
//
// Why: DuckLake's commits form a chain, and the next writer would
// otherwise wait for the COMMIT's round trip and its validation before it
// may pin. If t does not commit exactly what it sealed, a transaction
// pinned on it fails at COMMIT with a serialization error (40001), which
// DuckLake retries, just as a transaction that read a version whose store
// write then failed does.
func (t *Txn) Seal() {
	db := t.db
	if db.admitting.Load() == 0 || !t.tx.Dirty() {
		return
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	w := db.writers[t]
	if w == nil || w.committing || t.tx.Base() != db.pinBaseLocked() {
		return
	}
	v := t.tx.Seal()
	if v == nil || v == w.sealed {
		return
	}
	now := time.Now()
	db.spec, w.sealed, db.specAt, w.sealedAt = v, v, now, now
	close(w.sealedCh)
	w.sealedCh = make(chan struct{})
}

// admit waits until t may pin a snapshot. Only transactions of writing
// sessions wait (for the lease, then for the writes under way): a reader
// gains nothing from a fresher head and must not pay a store write (on an
// object store, tens of milliseconds) for one, exactly as PostgreSQL's
// readers never wait for writers.
func (t *Txn) admit(ctx context.Context) error {
	if !t.writer {
		return nil
	}
	t.db.admitting.Add(1)
	defer t.db.admitting.Add(-1)
	if err := t.db.acquireLease(ctx, t); err != nil {
		return err
	}
	err := t.db.settle(ctx, t)
	t.db.mu.Lock()
	if err != nil {
		t.db.releaseLeaseLocked(t)
	} else if l := &t.db.lease; l.holder == t {
		// LeaseMax counts from the pin, not from the wait in settle: a
		// holder waiting behind a slow store write is not idle.
		l.settling, l.pinned = false, time.Now()
		// Wake the first waiter: it waited without a deadline while the
		// holder settled and must now time its lapse.
		t.db.wakeLeaseHeadLocked()
	}
	t.db.mu.Unlock()
	return err
}

// Txn is one transaction: a pinned catalog version plus its own writes.
type Txn struct {
	writer bool // of a session that wrote before (Begin)
	// deferred: the snapshot is not taken yet (BeginDeferred, Pin);
	// readEarly: View was read while deferred.
	deferred, readEarly bool
	view                *Version // the last View built after a write
	viewOps             int      // len(tx.Ops()) when view was built
	claimed             []string
	db                  *DB
	tx                  *catalog.Txn
	wrote               bool
	// idleSince is when the transaction's last statement ended (Unix
	// nanoseconds), 0 while one runs: how long a lease holder or a
	// claimer has sat idle (leaseExpiryLocked, settleDeadlineLocked).
	idleSince atomic.Int64
}

// Busy marks the start of a statement and Idle its end: the SQL layer
// calls them around each statement of a transaction, so that the pin
// lease lapses, and new snapshots stop waiting for a claimer, only when
// the transaction stops sending requests, not while it runs them (see
// LeaseHold, SettleWait).
func (t *Txn) Busy() { t.idleSince.Store(0) }

// Idle marks the end of a statement (see Busy).
func (t *Txn) Idle() { t.idleSince.Store(time.Now().UnixNano()) }

// View is what the transaction reads: its base plus its own writes.
func (t *Txn) View() *Version {
	if t.deferred {
		t.readEarly = true
	}
	if !t.wrote {
		return t.db.versionOf(t.tx.Base())
	}
	// The builder's version changes in place as the transaction writes, so
	// a Version over it is only good until the next write. Every write
	// appends an op (a failed write changes nothing), so the op count says
	// whether the last view is still current.
	if n := len(t.tx.Ops()); t.view != nil && t.viewOps == n {
		return t.view
	}
	t.view, t.viewOps = newVersion(t.tx.View(), &t.db.defs), len(t.tx.Ops())
	return t.view
}

// Target returns schema.table for a statement about to write it: its
// definition, and rows that the statement must finish reading before its
// first write (catalog.Txn.Peek). Reads of other tables, and any read that
// outlives the statement's writes, go through View.
func (t *Txn) Target(schema, table string) (*Table, bool) {
	ct, err := t.tx.Peek(schema, table)
	if err != nil {
		return nil, false
	}
	return lakeTable(ct, &t.db.defs), true
}

// Base is the published version the transaction started from.
func (t *Txn) Base() *Version { return t.db.versionOf(t.tx.Base()) }

// DB returns the transaction's database.
func (t *Txn) DB() *DB { return t.db }

// HasWrites reports whether anything was staged.
func (t *Txn) HasWrites() bool { return t.tx.Dirty() }

// Rebase moves a transaction without writes to the newest version (READ
// COMMITTED statements, and the snapshot a REPEATABLE READ transaction takes
// at its first statement).
func (t *Txn) Rebase(ctx context.Context) error {
	if t.tx.Dirty() {
		return nil
	}
	if err := t.admit(ctx); err != nil {
		return err
	}
	t.tx.Rollback()
	t.tx = t.begin()
	t.view = nil
	return nil
}

// Insert stages a new row and returns its ctid.
func (t *Txn) Insert(schema, table string, vals []datum.Value) (int64, error) {
	if err := t.claim(schema, table, vals, nil); err != nil {
		return 0, err
	}
	c, err := t.tx.InsertRow(schema, table, vals)
	if err != nil {
		return 0, convert(err)
	}
	t.wrote = true
	return int64(c), nil
}

// Delete stages the removal of the row version at ctid.
func (t *Txn) Delete(schema, table string, ctid int64) error {
	if err := t.tx.DeleteRow(schema, table, catalog.CTID(ctid)); err != nil {
		return convert(err)
	}
	t.wrote = true
	return nil
}

// Update replaces the row version at ctid by a new version and returns the
// new ctid.
func (t *Txn) Update(schema, table string, ctid int64, vals []datum.Value) (int64, error) {
	tb, err := t.tx.Peek(schema, table) // read before the write; see claim
	if err != nil {
		return 0, convert(err)
	}
	if old, ok := tb.Lookup(catalog.CTID(ctid)); ok {
		if err := t.claim(schema, table, vals, old); err != nil {
			return 0, err
		}
	}
	nc, err := t.tx.UpdateRow(schema, table, catalog.CTID(ctid), vals)
	if err != nil {
		return 0, convert(err)
	}
	t.wrote = true
	return int64(nc), nil
}

// CreateSchema stages a new schema.
func (t *Txn) CreateSchema(name string) error {
	if err := t.tx.CreateSchema(name); err != nil {
		return convert(err)
	}
	t.wrote = true
	return nil
}

// CreateTable stages a new empty table.
func (t *Txn) CreateTable(schema, name string, def TableDef) (*Table, error) {
	kd := keyspace.TableDef{Schema: schema, Name: name, PrimaryKey: slices.Clone(def.PK)}
	for _, c := range def.Columns {
		kd.Columns = append(kd.Columns, keyspace.ColumnDef{Name: c.Name, Type: c.Type, NotNull: c.NotNull})
	}
	if err := t.tx.CreateTable(kd); err != nil {
		return nil, convert(err)
	}
	t.wrote = true
	tb, err := t.tx.Table(schema, name)
	if err != nil {
		return nil, convert(err)
	}
	return lakeTable(tb, nil), nil
}

// DropTable stages the removal of a table.
func (t *Txn) DropTable(schema, name string) error {
	if err := t.tx.DropTable(schema, name); err != nil {
		return convert(err)
	}
	t.wrote = true
	return nil
}

// AddColumn appends a column (NULL in every existing row).
func (t *Txn) AddColumn(schema, table string, c Column) error {
	if err := t.tx.AddColumn(schema, table, keyspace.ColumnDef{Name: c.Name, Type: c.Type, NotNull: c.NotNull}, datum.Null); err != nil {
		return convert(err)
	}
	t.wrote = true
	return nil
}

// RenameColumn renames a column.
func (t *Txn) RenameColumn(schema, table, from, to string) error {
	if err := t.tx.RenameColumn(schema, table, from, to); err != nil {
		return convert(err)
	}
	t.wrote = true
	return nil
}

// claim records the primary key of a row being written as this
// transaction's, failing if another live transaction claimed it first. old
// is the row being updated (nil for an insert): an update that keeps its key
// claims nothing.
func (t *Txn) claim(schema, table string, vals []datum.Value, old datum.Row) error {
	// Peek, not Table: only the definition is read, and freezing the
	// table would make the write that follows copy its pages and nodes.
	tb, err := t.tx.Peek(schema, table)
	if err != nil {
		return convert(err)
	}
	def := tb.Def()
	if len(def.PrimaryKey) == 0 {
		return nil
	}
	if old != nil {
		ov, err := old.Decode(tb.Types(), nil)
		if err == nil {
			same := true
			for _, i := range def.PrimaryKey {
				if !datum.Equal(ov[i], vals[i]) {
					same = false
				}
			}
			if same {
				return nil
			}
		}
	}
	var kb strings.Builder
	kb.WriteString(schema + "\x00" + table)
	for _, i := range def.PrimaryKey {
		if i >= len(vals) || vals[i].IsNull() {
			return nil // the catalog reports the NOT NULL violation
		}
		kb.WriteString("\x00" + datum.FormatText(def.Columns[i].Type, vals[i]))
	}
	key := kb.String()
	// PostgreSQL checks a new key against committed rows its snapshot does
	// not see too: a key another transaction committed meanwhile is a
	// unique violation now, not at COMMIT.
	if head, err := t.db.cat.Current().Table(schema, table); err == nil {
		pk := make([]datum.Value, len(def.PrimaryKey))
		for j, i := range def.PrimaryKey {
			pk[j] = vals[i]
		}
		if _, _, found := head.LookupKey(pk); found && !t.tx.Base().Extends(t.db.cat.Current()) {
			e := uniqueError(lakeTable(tb, nil), vals)
			e.Schema = schema
			return e
		}
	}
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if other, ok := db.claims[key]; ok && other != t {
		e := uniqueError(lakeTable(tb, nil), vals)
		e.Schema = schema
		return e
	}
	if db.claims == nil {
		db.claims = map[string]*Txn{}
	}
	db.claims[key] = t
	t.claimed = append(t.claimed, key)
	t.enlist(false)
	return nil
}

// Rollback releases what the transaction claimed; its writes vanish with it.
func (t *Txn) Rollback() {
	t.release()
	t.tx.Rollback()
}

func (t *Txn) release() {
	db := t.db
	db.mu.Lock()
	for _, k := range t.claimed {
		if db.claims[k] == t {
			delete(db.claims, k)
		}
	}
	t.claimed = nil
	w := db.writers[t]
	delete(db.writers, t)
	db.releaseLeaseLocked(t)
	db.mu.Unlock()
	if w != nil {
		close(w.done)
	}
}

// Commit hands the transaction to the catalog, which replays it onto the
// newest version if others committed meanwhile, persists it through the
// commit pipeline and publishes it. A transaction without writes commits
// once what it read is durable.
//
// The transaction stops counting as a write under way (settle) as soon as
// its commit is visible to later writers, before it is durable: they pin
// it and pipeline their commits behind it.
func (t *Txn) Commit(ctx context.Context) error {
	defer t.release()
	if t.tx.Dirty() {
		t.db.mu.Lock()
		t.enlist(true)
		t.db.mu.Unlock()
		// A writer waiting to pin will commit right after this one: the
		// store may hold this commit to write both in one object.
		t.tx.SetFollowed(t.db.admitting.Load() > 0)
	}
	if err := t.tx.CommitThen(ctx, t.release); err != nil {
		return convert(err)
	}
	return nil
}

// convert maps catalog and commit errors to the forms the SQL layer
// renders: memcat's sentinels and UniqueError, or a *pgwire.Error carrying
// the lower layer's SQLSTATE.
func convert(err error) error {
	if err == nil {
		return nil
	}
	var ce *catalog.Error
	if errors.As(err, &ce) {
		switch {
		case errors.Is(ce, catalog.ErrDuplicateKey):
			return &UniqueError{Schema: ce.Schema, Table: ce.Table, Constraint: ce.Constraint, detail: ce.Detail}
		case errors.Is(ce, catalog.ErrSerialization):
			return fmt.Errorf("%w: %s", ErrSerialization, ce.Message)
		case errors.Is(ce, catalog.ErrNoTable):
			return fmt.Errorf("%w: %s", ErrNoSuchTable, ce.Message)
		case errors.Is(ce, catalog.ErrNoSchema):
			return fmt.Errorf("%w: %s", ErrNoSuchSchema, ce.Message)
		case errors.Is(ce, catalog.ErrTableExists):
			return fmt.Errorf("%w: %s", ErrTableExists, ce.Message)
		case errors.Is(ce, catalog.ErrSchemaExists):
			return fmt.Errorf("%w: %s", ErrSchemaExists, ce.Message)
		case errors.Is(ce, catalog.ErrNoColumn):
			return fmt.Errorf("%w: %s", ErrNoSuchColumn, ce.Message)
		case errors.Is(ce, catalog.ErrColumnExists):
			return fmt.Errorf("%w: %s", ErrColumnExists, ce.Message)
		case errors.Is(ce, catalog.ErrNoRow):
			return fmt.Errorf("%w: %s", ErrNoSuchRow, ce.Message)
		}
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() != "" {
		pe := &pgwire.Error{Code: st.SQLState(), Message: err.Error(), Cause: err}
		var d interface{ Error() string }
		if errors.As(err, &d) {
			pe.Message = d.Error()
		}
		if ce != nil && ce.Detail != "" {
			pe.Detail = ce.Detail
		}
		return pe
	}
	if errors.Is(err, catalog.ErrBadDef) || errors.Is(err, keyspace.ErrUnknownTable) || errors.Is(err, keyspace.ErrBadDef) {
		return &pgwire.Error{Code: pgcode.FeatureNotSupported, Message: err.Error(), Cause: err}
	}
	return err
}
