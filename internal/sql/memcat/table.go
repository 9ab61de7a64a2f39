package memcat

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// Column is one column of a table definition.
type Column struct {
	Name    string
	Type    datum.Type
	NotNull bool
	// Default is the value ALTER TABLE … ADD COLUMN … DEFAULT gives every
	// existing row; NULL when none.
	Default datum.Value
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
	// view, when set, rewrites a lake table's decoded row as it is served
	// and says whether to serve it at all: a branch's view of its parent
	// (branchview.go). Such a table has no encoded form to serve
	// (EncodedRows); one that hides rows (filters) answers no index
	// lookups either, so that the executor scans.
	view    func(vals []datum.Value) bool
	filters bool
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
		if t.view != nil && !t.view(vals) {
			return true
		}
		return fn(int64(c), vals)
	})
	return derr
}

// EncodedRows returns, for a lake table, the types its rows are encoded
// with and a scan over the stored rows in ctid order (a row's bytes are
// valid during fn only); ok is false for a temp table and for a table
// served through a view. The binary COPY fast
// path (internal/sql/copyplan.go) encodes straight from these bytes.
func (t *Table) EncodedRows() (types []datum.Type, scan func(fn func(ctid int64, r datum.Row) bool), ok bool) {
	if t.src == nil || t.view != nil {
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
	if t.src == nil || t.view != nil {
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
func (t *Table) Indexed() bool { return t.src != nil && !t.filters && t.src.HasPrimaryKey() }

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
	if t.src == nil || t.filters {
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
	if t.src == nil || t.filters {
		return false, nil
	}
	ok = t.src.LookupPrefix(prefix, func(c catalog.CTID, r datum.Row) bool {
		var vals []datum.Value
		var keep bool
		if _, vals, keep, err = t.decodeAt(c, r, buf); err == nil && keep {
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
	if t.view != nil && !t.view(vals) {
		return 0, nil, false, nil
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

// CheckPK reports a unique violation (catalog.ErrDuplicateKey) if vals duplicates the primary key of a
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
			return uniqueError("", t, vals)
		}
	}
	return nil
}
