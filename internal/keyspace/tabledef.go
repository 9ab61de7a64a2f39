// Package keyspace is the persistent form of a DuckLake catalog: the table
// definitions moraine accepts, the kinds every DuckLake table is stored under,
// the order-preserving key codec, and the versioned value codecs.
//
// It is pure encoding: no I/O, no locking, no state. The resident catalog
// (internal/catalog) and the commit pipeline (internal/commit) call it to turn
// rows into key/value pairs and back; slate stores the pairs.
//
// The contract, in one line per rule:
//
//   - A key is a pure function of (catalog id, table, row): EntityKey. An
//     UPDATE that changes a key field (end_snapshot moving a row to history,
//     a begin_snapshot rebase) is "delete the old key, put the new one".
//   - A value holds the row verbatim as datum.Row bytes, plus the rows of the
//     embedded child table for the three parent kinds; DecodeKV returns those
//     exact bytes.
//   - Every value starts with a format version byte; an unknown version or
//     shape is ErrUnknownShape, bytes that do not parse are ErrCorrupt.
//
// docs/storage-format.md ("## keyspace") draws every layout byte by byte.
package keyspace

import (
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
)

// TableDef is the definition of one table of a catalog, as DDL created it
// (and migrations extended it): the column set the table is served at.
// Columns are in physical order; DuckLake's positional INSERTs rely on it.
type TableDef struct {
	Schema  string // the catalog's metadata schema, e.g. "public"
	Name    string // e.g. "ducklake_data_file", "ducklake_inlined_data_3_7"
	Columns []ColumnDef
	// PrimaryKey lists column indexes; empty when the table has none.
	// DuckLake declares single-column primary keys only.
	PrimaryKey []int
}

// ColumnDef is one column of a TableDef.
type ColumnDef struct {
	Name string
	Type datum.Type
	// NotNull is the column's attnotnull. PostgreSQL sets it for primary key
	// columns, so the canonical definitions (Known, FixedDefs) set it there;
	// ValidateDef accepts a primary key column either way.
	NotNull bool
}

// Types returns the column types in order, as datum.Row encoding needs them.
func (d *TableDef) Types() []datum.Type {
	ts := make([]datum.Type, len(d.Columns))
	for i, c := range d.Columns {
		ts[i] = c.Type
	}
	return ts
}

// ColumnIndex returns the index of the column named name, or -1. Names are
// matched exactly: DuckLake's identifiers are lower case and quoted.
func (d *TableDef) ColumnIndex(name string) int {
	for i, c := range d.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy of d.
func (d *TableDef) Clone() TableDef {
	c := *d
	c.Columns = append([]ColumnDef(nil), d.Columns...)
	c.PrimaryKey = append([]int(nil), d.PrimaryKey...)
	return c
}

// String renders d as the DDL it stands for, for error messages and tests.
func (d *TableDef) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.%s(", d.Schema, d.Name)
	for i, c := range d.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", c.Name, c.Type)
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		for _, p := range d.PrimaryKey {
			if p == i {
				b.WriteString(" PRIMARY KEY")
			}
		}
	}
	b.WriteString(")")
	return b.String()
}
