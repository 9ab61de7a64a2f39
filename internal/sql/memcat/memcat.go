// Package memcat is the resident catalog the SQL layer runs over until
// internal/catalog lands: databases → schemas → tables of rows kept in ctid
// order, copy-on-write versions so that a REPEATABLE READ transaction holds
// an O(1) snapshot, and transactions that stage their writes as an ordered
// list of row operations which COMMIT replays onto the newest version.
//
// Invariants:
//   - A published *Version and every *Schema / *Table reachable from it are
//     never mutated again; a transaction copies a table before its first
//     write to it.
//   - ctids are allocated from a per-table counter shared by every version
//     of that table, so a ctid is never reused (PostgreSQL also never hands
//     out a line pointer again before VACUUM) and stays stable for the life
//     of a row version. An UPDATE makes a new row version with a new ctid.
//   - COMMIT replays the transaction's operations in order onto the head
//     under the database lock; a delete of a row that a concurrent commit
//     already removed is a serialization failure, a primary key that a
//     concurrent commit already inserted is a unique violation. Nothing of a
//     failed commit is published.
package memcat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/datum"
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
	Table      string // table name
	Constraint string // "<table>_pkey"
	Columns    []string
	Values     []string // text forms of the duplicate key
}

func (e *UniqueError) Error() string {
	return fmt.Sprintf("duplicate key value violates unique constraint %q", e.Constraint)
}

// Detail is PostgreSQL's DETAIL line for the violation.
func (e *UniqueError) Detail() string {
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
}

// ColumnIndex returns the position of the named column, or -1.
func (d *TableDef) ColumnIndex(name string) int {
	for i, c := range d.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Row is one row version.
type Row struct {
	CTID int64 // block<<16 | offset, as datum.TIDValue encodes it
	Vals []datum.Value
}

// Table is one table at one version.
type Table struct {
	Name   string
	OID    uint32
	TypOID uint32 // the table's row type
	PKOID  uint32 // the primary key constraint (and its index), 0 without one
	Def    TableDef
	Rows   []Row // ascending CTID
	alloc  *atomic.Int64
}

// NewTable returns an empty table (also used for session-local temp tables).
func NewTable(name string, oid, typOID, pkOID uint32, def TableDef) *Table {
	return &Table{Name: name, OID: oid, TypOID: typOID, PKOID: pkOID, Def: def, alloc: new(atomic.Int64)}
}

// NextCTID allocates a fresh ctid: (0,1), (0,2), … ; a block holds at most
// 65535 offsets before the next block begins.
func (t *Table) NextCTID() int64 {
	n := t.alloc.Add(1) - 1
	block, off := n/65535, n%65535+1
	return block<<16 | off
}

func (t *Table) clone() *Table {
	c := *t
	c.Rows = slices.Clone(t.Rows)
	c.Def.Columns = slices.Clone(t.Def.Columns)
	c.Def.PK = slices.Clone(t.Def.PK)
	return &c
}

// find returns the index of the row with ctid, or -1.
func (t *Table) find(ctid int64) int {
	i, ok := slices.BinarySearchFunc(t.Rows, ctid, func(r Row, c int64) int {
		switch {
		case r.CTID < c:
			return -1
		case r.CTID > c:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// CheckPK reports a UniqueError if vals duplicates the primary key of a row
// other than the one at skip (a ctid, or -1).
func (t *Table) CheckPK(vals []datum.Value, skip int64) error {
	if len(t.Def.PK) == 0 {
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

// Insert appends a row with a fresh ctid (the table must be owned by the
// caller, see Txn.Table). It checks the primary key.
func (t *Table) insert(ctid int64, vals []datum.Value) error {
	if err := t.CheckPK(vals, -1); err != nil {
		return err
	}
	if n := len(t.Rows); n > 0 && t.Rows[n-1].CTID > ctid {
		i, _ := slices.BinarySearchFunc(t.Rows, ctid, func(r Row, c int64) int { return int(r.CTID - c) })
		t.Rows = slices.Insert(t.Rows, i, Row{CTID: ctid, Vals: vals})
		return nil
	}
	t.Rows = append(t.Rows, Row{CTID: ctid, Vals: vals})
	return nil
}

func (t *Table) delete(ctid int64) error {
	i := t.find(ctid)
	if i < 0 {
		return ErrNoSuchRow
	}
	t.Rows = slices.Delete(t.Rows, i, i+1)
	return nil
}

// Schema is one schema at one version.
type Schema struct {
	Name   string
	OID    uint32
	Tables map[string]*Table
}

// Version is one published state of a database's catalog.
type Version struct {
	Seq     uint64
	Schemas map[string]*Schema
}

// SchemaNames returns the schema names in OID order.
func (v *Version) SchemaList() []*Schema {
	out := slices.Collect(maps.Values(v.Schemas))
	slices.SortFunc(out, func(a, b *Schema) int { return int(a.OID) - int(b.OID) })
	return out
}

// Lookup returns a table.
func (v *Version) Lookup(schema, table string) (*Table, bool) {
	s, ok := v.Schemas[schema]
	if !ok {
		return nil, false
	}
	t, ok := s.Tables[table]
	return t, ok
}

// OpKind is the kind of a staged operation.
type OpKind uint8

const (
	OpInsert OpKind = iota + 1
	OpDelete
	OpCreateSchema
	OpCreateTable
	OpDropTable
	OpAddColumn
	OpRenameColumn
)

// Op is one staged operation, in the order the transaction made it. Updates
// are a delete of the old version followed by an insert of the new one.
type Op struct {
	Kind   OpKind
	Schema string
	Table  string
	CTID   int64
	Vals   []datum.Value // OpInsert
	New    *Table        // OpCreateTable: the (empty) table
	Column Column        // OpAddColumn
	From   string        // OpRenameColumn
	To     string        // OpRenameColumn
	OID    uint32        // OpCreateSchema
}

// Commit is what a transaction hands to the Committer.
type Commit struct {
	Database string
	BaseSeq  uint64 // the version the transaction read
	Seq      uint64 // the version it creates
	Ops      []Op
	Result   *Version // the version that will be published
}

// Committer makes a commit durable before it is published. The commit
// pipeline implements it; InMemory is the stand-in.
type Committer interface {
	Commit(ctx context.Context, c *Commit) error
}

// InMemory is a Committer that keeps nothing beyond the resident catalog.
type InMemory struct{}

func (InMemory) Commit(context.Context, *Commit) error { return nil }

// Server holds every database, created on first use.
type Server struct {
	mu        sync.Mutex
	dbs       map[string]*DB
	committer Committer
}

// NewServer returns an empty catalog server committing through c (nil means
// InMemory).
func NewServer(c Committer) *Server {
	if c == nil {
		c = InMemory{}
	}
	return &Server{dbs: map[string]*DB{}, committer: c}
}

// Database returns the named database, creating it (with schema "public",
// as PostgreSQL's template does) on first use.
func (s *Server) Database(name string) *DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.dbs[name]; ok {
		return db
	}
	db := &DB{Name: name, committer: s.committer}
	db.oids.Store(16383)
	db.head = &Version{Schemas: map[string]*Schema{
		"public": {Name: "public", OID: 2200, Tables: map[string]*Table{}},
	}}
	s.dbs[name] = db
	return db
}

// DB is one database's catalog.
type DB struct {
	Name string
	mu   sync.Mutex
	head *Version
	// claims maps the primary keys that live transactions inserted but
	// have not committed yet to their transaction. A second inserter of
	// the same key fails at once with a unique violation (PostgreSQL makes
	// it wait for the first and then fail; DuckLake's retry loop accepts
	// either).
	claims    map[string]*Txn
	oids      atomic.Uint32
	committer Committer
}

// NewOID allocates an object id (PostgreSQL's user OIDs start at 16384).
func (db *DB) NewOID() uint32 { return db.oids.Add(1) }

// Head returns the newest published version (an O(1) snapshot).
func (db *DB) Head() *Version {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.head
}

// Begin starts a transaction reading base (nil = head).
func (db *DB) Begin(base *Version) *Txn {
	if base == nil {
		base = db.Head()
	}
	return &Txn{db: db, base: base, view: base}
}

// Txn is one transaction: a base version plus its own writes.
type Txn struct {
	claimed []string
	db      *DB
	base    *Version
	view    *Version // base, or a private copy once the transaction wrote
	owned   map[*Table]bool
	ops     []Op
}

// View is what the transaction reads: its base plus its own writes.
func (t *Txn) View() *Version { return t.view }

// Base is the published version the transaction started from.
func (t *Txn) Base() *Version { return t.base }

// DB returns the transaction's database.
func (t *Txn) DB() *DB { return t.db }

// HasWrites reports whether anything was staged.
func (t *Txn) HasWrites() bool { return len(t.ops) > 0 }

// Rebase moves a transaction without writes to a newer base (READ
// COMMITTED statements).
func (t *Txn) Rebase(v *Version) {
	if len(t.ops) == 0 {
		t.base, t.view = v, v
	}
}

func (t *Txn) privateView() {
	if t.view != t.base {
		return
	}
	v := &Version{Seq: t.base.Seq, Schemas: make(map[string]*Schema, len(t.base.Schemas))}
	for n, s := range t.base.Schemas {
		v.Schemas[n] = &Schema{Name: s.Name, OID: s.OID, Tables: maps.Clone(s.Tables)}
	}
	t.view = v
	t.owned = map[*Table]bool{}
}

// own returns the transaction's private copy of a table.
func (t *Txn) own(schema, name string) (*Table, error) {
	t.privateView()
	s, ok := t.view.Schemas[schema]
	if !ok {
		return nil, ErrNoSuchSchema
	}
	tb, ok := s.Tables[name]
	if !ok {
		return nil, ErrNoSuchTable
	}
	if !t.owned[tb] {
		tb = tb.clone()
		s.Tables[name] = tb
		t.owned[tb] = true
	}
	return tb, nil
}

// Insert stages a new row and returns its ctid.
func (t *Txn) Insert(schema, table string, vals []datum.Value) (int64, error) {
	tb, err := t.own(schema, table)
	if err != nil {
		return 0, err
	}
	if err := t.claim(schema, tb, vals, -1); err != nil {
		return 0, err
	}
	ctid := tb.NextCTID()
	if err := tb.insert(ctid, vals); err != nil {
		return 0, err
	}
	t.ops = append(t.ops, Op{Kind: OpInsert, Schema: schema, Table: table, CTID: ctid, Vals: vals})
	return ctid, nil
}

// Delete stages the removal of the row version at ctid.
func (t *Txn) Delete(schema, table string, ctid int64) error {
	tb, err := t.own(schema, table)
	if err != nil {
		return err
	}
	if err := tb.delete(ctid); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpDelete, Schema: schema, Table: table, CTID: ctid})
	return nil
}

// Update replaces the row version at ctid by a new version and returns the
// new ctid. The primary key is checked against every other row.
func (t *Txn) Update(schema, table string, ctid int64, vals []datum.Value) (int64, error) {
	tb, err := t.own(schema, table)
	if err != nil {
		return 0, err
	}
	if err := tb.CheckPK(vals, ctid); err != nil {
		return 0, err
	}
	old := tb.find(ctid)
	if old >= 0 && !samePK(tb, tb.Rows[old].Vals, vals) {
		if err := t.claim(schema, tb, vals, ctid); err != nil {
			return 0, err
		}
	}
	if err := tb.delete(ctid); err != nil {
		return 0, err
	}
	nc := tb.NextCTID()
	if err := tb.insert(nc, vals); err != nil {
		return 0, err
	}
	t.ops = append(t.ops,
		Op{Kind: OpDelete, Schema: schema, Table: table, CTID: ctid},
		Op{Kind: OpInsert, Schema: schema, Table: table, CTID: nc, Vals: vals})
	return nc, nil
}

// CreateSchema stages a new schema.
func (t *Txn) CreateSchema(name string) error {
	t.privateView()
	if _, ok := t.view.Schemas[name]; ok {
		return ErrSchemaExists
	}
	oid := t.db.NewOID()
	t.view.Schemas[name] = &Schema{Name: name, OID: oid, Tables: map[string]*Table{}}
	t.ops = append(t.ops, Op{Kind: OpCreateSchema, Schema: name, OID: oid})
	return nil
}

// CreateTable stages a new empty table.
func (t *Txn) CreateTable(schema, name string, def TableDef) (*Table, error) {
	t.privateView()
	s, ok := t.view.Schemas[schema]
	if !ok {
		return nil, ErrNoSuchSchema
	}
	if _, ok := s.Tables[name]; ok {
		return nil, ErrTableExists
	}
	oid, typ := t.db.NewOID(), t.db.NewOID()
	var pk uint32
	if len(def.PK) > 0 {
		pk = t.db.NewOID()
	}
	tb := NewTable(name, oid, typ, pk, def)
	s.Tables[name] = tb
	t.owned[tb] = true
	t.ops = append(t.ops, Op{Kind: OpCreateTable, Schema: schema, Table: name, New: tb})
	return tb, nil
}

// DropTable stages the removal of a table.
func (t *Txn) DropTable(schema, name string) error {
	t.privateView()
	s, ok := t.view.Schemas[schema]
	if !ok {
		return ErrNoSuchTable
	}
	if _, ok := s.Tables[name]; !ok {
		return ErrNoSuchTable
	}
	delete(s.Tables, name)
	t.ops = append(t.ops, Op{Kind: OpDropTable, Schema: schema, Table: name})
	return nil
}

// AddColumn appends a column (NULL in every existing row).
func (t *Txn) AddColumn(schema, table string, c Column) error {
	tb, err := t.own(schema, table)
	if err != nil {
		return err
	}
	if err := addColumn(tb, c); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpAddColumn, Schema: schema, Table: table, Column: c})
	return nil
}

func addColumn(tb *Table, c Column) error {
	if tb.Def.ColumnIndex(c.Name) >= 0 {
		return ErrColumnExists
	}
	tb.Def.Columns = append(tb.Def.Columns, c)
	for i := range tb.Rows {
		tb.Rows[i].Vals = append(slices.Clip(tb.Rows[i].Vals), datum.Null)
	}
	return nil
}

// RenameColumn renames a column.
func (t *Txn) RenameColumn(schema, table, from, to string) error {
	tb, err := t.own(schema, table)
	if err != nil {
		return err
	}
	if err := renameColumn(tb, from, to); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpRenameColumn, Schema: schema, Table: table, From: from, To: to})
	return nil
}

func renameColumn(tb *Table, from, to string) error {
	i := tb.Def.ColumnIndex(from)
	if i < 0 {
		return ErrNoSuchColumn
	}
	if tb.Def.ColumnIndex(to) >= 0 {
		return ErrColumnExists
	}
	tb.Def.Columns[i].Name = to
	return nil
}

func samePK(tb *Table, a, b []datum.Value) bool {
	for _, i := range tb.Def.PK {
		if datum.Compare(a[i], b[i]) != 0 {
			return false
		}
	}
	return true
}

// claim checks a new primary key against rows committed since the
// transaction's snapshot and against keys other live transactions
// inserted, and records it as this transaction's.
func (t *Txn) claim(schema string, tb *Table, vals []datum.Value, skip int64) error {
	if len(tb.Def.PK) == 0 {
		return nil
	}
	var kb strings.Builder
	kb.WriteString(schema + "\x00" + tb.Name)
	for _, i := range tb.Def.PK {
		kb.WriteString("\x00" + datum.FormatText(tb.Def.Columns[i].Type, vals[i]))
	}
	key := kb.String()
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if ht, ok := db.head.Lookup(schema, tb.Name); ok && db.head != t.base {
		if err := ht.CheckPK(vals, skip); err != nil {
			return err
		}
	}
	if other, ok := db.claims[key]; ok && other != t {
		return uniqueError(tb, vals)
	}
	if db.claims == nil {
		db.claims = map[string]*Txn{}
	}
	db.claims[key] = t
	t.claimed = append(t.claimed, key)
	return nil
}

// Rollback releases what the transaction claimed; its writes vanish with it.
func (t *Txn) Rollback() {
	t.release()
	t.ops = nil
}

func (t *Txn) release() {
	if len(t.claimed) == 0 {
		return
	}
	t.db.mu.Lock()
	for _, k := range t.claimed {
		if t.db.claims[k] == t {
			delete(t.db.claims, k)
		}
	}
	t.db.mu.Unlock()
	t.claimed = nil
}

// Commit replays the staged operations onto the newest version, hands the
// result to the Committer and publishes it. A transaction without writes
// commits trivially.
func (t *Txn) Commit(ctx context.Context) error {
	defer t.release()
	if len(t.ops) == 0 {
		return nil
	}
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	head := db.head
	next := t.view
	if head != t.base {
		// Someone committed since we began: replay onto the head.
		r := &Txn{db: db, base: head, view: head}
		if err := r.replay(t.ops); err != nil {
			return err
		}
		next = r.view
	}
	next.Seq = head.Seq + 1
	c := &Commit{Database: db.Name, BaseSeq: t.base.Seq, Seq: next.Seq, Ops: t.ops, Result: next}
	if err := db.committer.Commit(ctx, c); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	db.head = next
	t.ops = nil
	return nil
}

func (t *Txn) replay(ops []Op) error {
	for _, op := range ops {
		switch op.Kind {
		case OpInsert:
			tb, err := t.own(op.Schema, op.Table)
			if err != nil {
				return err
			}
			if err := tb.insert(op.CTID, op.Vals); err != nil {
				return err
			}
		case OpDelete:
			tb, err := t.own(op.Schema, op.Table)
			if err != nil {
				return err
			}
			if err := tb.delete(op.CTID); err != nil {
				return ErrSerialization
			}
		case OpCreateSchema:
			t.privateView()
			if _, ok := t.view.Schemas[op.Schema]; ok {
				return ErrSchemaExists
			}
			t.view.Schemas[op.Schema] = &Schema{Name: op.Schema, OID: op.OID, Tables: map[string]*Table{}}
		case OpCreateTable:
			t.privateView()
			s, ok := t.view.Schemas[op.Schema]
			if !ok {
				return ErrNoSuchSchema
			}
			if _, ok := s.Tables[op.Table]; ok {
				return ErrTableExists
			}
			nt := op.New.clone()
			nt.Rows = nil
			s.Tables[op.Table] = nt
			t.owned[nt] = true
		case OpDropTable:
			t.privateView()
			s, ok := t.view.Schemas[op.Schema]
			if !ok {
				return ErrSerialization
			}
			if _, ok := s.Tables[op.Table]; !ok {
				return ErrSerialization
			}
			delete(s.Tables, op.Table)
		case OpAddColumn:
			tb, err := t.own(op.Schema, op.Table)
			if err != nil {
				return err
			}
			if err := addColumn(tb, op.Column); err != nil {
				return ErrSerialization
			}
		case OpRenameColumn:
			tb, err := t.own(op.Schema, op.Table)
			if err != nil {
				return err
			}
			if err := renameColumn(tb, op.From, op.To); err != nil {
				return ErrSerialization
			}
		}
	}
	return nil
}
