// Package pgcatalog answers PostgreSQL's system catalogs — the pg_catalog
// relations and information_schema views that DuckDB's postgres extension,
// psql and pgx read — for one session's view of a moraine database.
//
// Relations are generated per read from the transaction's catalog version
// (so a table created earlier in the same transaction, such as DuckLake's
// inlined-data tables, is already visible) and from PostgreSQL 15's own
// rows for its built-in namespaces (sysdata). Only what those clients read
// is present. Every column that PostgreSQL has carries PostgreSQL's
// relation OID and attribute number, as RowDescription reports them.
// Every relation has relpages 0, which keeps the extension's scans serial.
package pgcatalog

import (
	"github.com/moraine-db/moraine/internal/datum"
)

// Column is one column of a system relation: its name and type, and the
// relation OID and attribute number PostgreSQL reports for it (0 for a
// column PostgreSQL does not have).
type Column struct {
	Name     string
	Type     datum.Type
	TableOID uint32
	Attnum   int16
}

// Relation is a system relation's answer: its columns and rows. Rows may
// share their backing values with other answers and must not be modified.
type Relation struct {
	Cols []Column
	Rows [][]datum.Value
	// Sys is how many of Rows, from the first, are PostgreSQL's own
	// (sysdata): the same row slices in every build of the relation, so
	// that what is derived from them (an index) can be shared.
	Sys int
}

func (r *Relation) add(vals ...datum.Value) { r.Rows = append(r.Rows, vals) }

// col is a column's name and type, as the relations below declare them.
type col struct {
	name string
	typ  datum.Type
}

func newRel(cols []col) *Relation {
	r := &Relation{Cols: make([]Column, len(cols))}
	for i, c := range cols {
		r.Cols[i] = Column{Name: c.name, Type: c.typ}
	}
	return r
}

// colsOf is r's columns as declared.
func colsOf(r *Relation) []col {
	out := make([]col, len(r.Cols))
	for i, c := range r.Cols {
		out[i] = col{c.Name, c.Type}
	}
	return out
}

var (
	tOID  = datum.OID
	tName = datum.Name
	tChar = datum.Char
	tBool = datum.Bool
	tInt2 = datum.Int2
	tInt4 = datum.Int4
	tText = datum.Text
)

func oidV(o uint32) datum.Value  { return datum.IntValue(int64(o)) }
func nameV(s string) datum.Value { return datum.TextValue(s) }
func intV(i int) datum.Value     { return datum.IntValue(int64(i)) }
func boolV(b bool) datum.Value   { return datum.BoolValue(b) }
