package sql

import (
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// relName is how PostgreSQL prints a relation name in "does not exist".
func relName(rv *pg.RangeVar) string {
	if rv.Schemaname != "" {
		return rv.Schemaname + "." + rv.Relname
	}
	return rv.Relname
}

// lookupTable finds a lake table or a temp table for reading.
// It returns the table, its schema ("" for a temp table).
func (x *exec) lookupTable(rv *pg.RangeVar) (*memcat.Table, string, error) {
	return x.findTable(rv, false)
}

// findTable is lookupTable; forWrite looks a lake table up as the target
// of a write (memcat.Txn.Target), whose rows the statement reads only
// before its first write.
func (x *exec) findTable(rv *pg.RangeVar, forWrite bool) (*memcat.Table, string, error) {
	if rv.Catalogname != "" && rv.Catalogname != x.s.dbName {
		return nil, "", unsupported("cross-database references (%s)", rv.Catalogname)
	}
	schema := rv.Schemaname
	if schema == "" || schema == "pg_temp" {
		if t, ok := x.s.temps[rv.Relname]; ok {
			return t, "", nil
		}
		if schema == "pg_temp" {
			return nil, "", errf(pgcode.UndefinedTable, "relation %q does not exist", relName(rv))
		}
		schema = x.s.searchSchema()
	}
	if forWrite && x.s.tx.txn != nil {
		if t, ok := x.s.tx.txn.Target(schema, rv.Relname); ok {
			return t, schema, nil
		}
	} else if t, ok := x.s.view().Lookup(schema, rv.Relname); ok {
		return t, schema, nil
	}
	return nil, "", errf(pgcode.UndefinedTable, "relation %q does not exist", relName(rv))
}

// storedTable resolves a FROM-clause relation that is a stored table — a
// lake table or a session temp table — and the name its columns are
// qualified by. ok is false for anything else (a CTE, a pg_catalog or
// information_schema relation); err is set when rv names no relation at all.
func (x *exec) storedTable(rv *pg.RangeVar) (t *memcat.Table, qual string, ok bool, err error) {
	if rv.Schemaname == "pg_catalog" || rv.Schemaname == "information_schema" {
		return nil, "", false, nil
	}
	if rv.Schemaname == "" {
		if _, cte := x.ctes[rv.Relname]; cte {
			return nil, "", false, nil
		}
		if _, temp := x.s.temps[rv.Relname]; !temp {
			if pgcatalog.Exists("pg_catalog", rv.Relname) {
				return nil, "", false, nil
			}
		}
	}
	t, _, err = x.lookupTable(rv)
	if err != nil {
		return nil, "", true, err
	}
	qual = rv.Relname
	if rv.Alias != nil && rv.Alias.Aliasname != "" {
		qual = rv.Alias.Aliasname
	}
	return t, qual, true, nil
}

// scan materializes a relation named in FROM.
func (x *exec) scan(rv *pg.RangeVar) (*rel, error) {
	qual := rv.Relname
	if rv.Alias != nil && rv.Alias.Aliasname != "" {
		qual = rv.Alias.Aliasname
	}
	if rv.Schemaname == "" {
		if r, ok := x.ctes[rv.Relname]; ok {
			return requalify(r, qual), nil
		}
	}
	switch rv.Schemaname {
	case "pg_catalog", "information_schema":
		if r, ok := x.virtual(rv.Schemaname, rv.Relname); ok {
			return requalify(r, qual), nil
		}
		return nil, errf(pgcode.UndefinedTable, "relation %q does not exist", relName(rv))
	case "":
		if _, temp := x.s.temps[rv.Relname]; !temp {
			if r, ok := x.virtual("pg_catalog", rv.Relname); ok {
				return requalify(r, qual), nil
			}
		}
	}
	t, _, err := x.lookupTable(rv)
	if err != nil {
		return nil, err
	}
	return tableRel(t, qual), nil
}

func requalify(r *rel, qual string) *rel {
	cols := make([]colInfo, len(r.cols))
	copy(cols, r.cols)
	for i := range cols {
		cols[i].qual = qual
	}
	return &rel{cols: cols, rows: r.rows, ix: r.ix}
}

// tableRel exposes a table's rows with the hidden ctid column last.
func tableRel(t *memcat.Table, qual string) *rel {
	r, _ := tableRelFiltered(t, qual, nil, nil)
	return r
}

// tableCols are a table's columns with the hidden ctid column last. The
// slice is shared (a lake table's is kept in its definition's memo): callers
// clone it before changing it.
func tableCols(t *memcat.Table, qual string) []colInfo {
	memo := t.Memo()
	if memo == nil {
		return makeTableCols(t, qual)
	}
	key := tableColsKey{qual}
	if c, ok := memo.Load(key); ok {
		return c.([]colInfo)
	}
	cols := makeTableCols(t, qual)
	memo.Store(key, cols)
	return cols
}

// tableColsKey keys tableCols in a definition's memo.
type tableColsKey struct{ qual string }

func makeTableCols(t *memcat.Table, qual string) []colInfo {
	n := len(t.Def.Columns)
	cols := make([]colInfo, n+1)
	for i, c := range t.Def.Columns {
		cols[i] = colInfo{qual: qual, name: c.Name, typ: c.Type, tableOID: t.OID, attnum: int16(i + 1)}
	}
	cols[n] = colInfo{qual: qual, name: "ctid", typ: datum.TID, tableOID: t.OID, attnum: -1, hidden: true}
	return cols
}

// tableRelFiltered is tableRel keeping only the rows keep accepts (nil
// keeps all); rejected rows are never copied out of the scan. filters,
// from intFilters, must hold for any row keep accepts: a lake table's
// stored rows that fail them are skipped before they are decoded.
func tableRelFiltered(t *memcat.Table, qual string, filters []intFilter, keep func(row []datum.Value) bool) (*rel, error) {
	cols := tableCols(t, qual)
	n := len(cols) - 1
	if len(filters) > 0 {
		if types, scan, ok := t.EncodedRows(); ok && len(types) == n {
			if w, ok := datum.NewRowWalker(types); ok {
				return prefilteredRel(t.Name, cols, types, scan, &w, filters, keep)
			}
		}
	}
	var rows [][]datum.Value
	if keep == nil {
		rows = make([][]datum.Value, 0, t.Len())
	}
	buf := make([]datum.Value, n+1)
	err := t.Scan(func(ctid int64, vals []datum.Value) bool {
		copy(buf, vals)
		buf[n] = datum.Value{K: datum.KindTID, I: ctid}
		if keep != nil && !keep(buf) {
			return true
		}
		rows = append(rows, append([]datum.Value(nil), buf...))
		return true
	})
	return &rel{cols: cols, rows: rows}, err
}

// prefilteredRel is tableRelFiltered's scan of stored rows: each row is
// walked (not decoded) and dropped if an integer column fails a filter;
// the rest are decoded, as memcat.Table.Scan decodes them, and given to
// keep. A row the walk cannot parse is decoded too, so that its error is
// reported exactly as the plain scan reports it.
func prefilteredRel(name string, cols []colInfo, types []datum.Type, scan func(func(int64, datum.Row) bool), w *datum.RowWalker, filters []intFilter, keep func(row []datum.Value) bool) (*rel, error) {
	n := len(cols) - 1
	var rows [][]datum.Value
	var vals []datum.Value
	var derr error
	last := 0
	for _, f := range filters {
		last = max(last, f.col)
	}
	scan(func(ctid int64, r datum.Row) bool {
		if w.WalkTo(r, last) == nil {
			for _, f := range filters {
				if c := w.Cells[f.col]; c.Null || !f.pass(c.V) {
					return true
				}
			}
		}
		var err error
		if vals, err = r.Decode(types, vals[:0]); err != nil {
			derr = fmt.Errorf("memcat: %s row (%d,%d): %w", name, ctid>>16, ctid&0xffff, err)
			return false
		}
		row := append(append(make([]datum.Value, 0, n+1), vals...), datum.Value{K: datum.KindTID, I: ctid})
		if keep == nil || keep(row) {
			rows = append(rows, row)
		}
		return true
	})
	return &rel{cols: cols, rows: rows}, derr
}

// regclass resolves a relation name as to_regclass does.
func (x *exec) regclass(name string) (uint32, bool) {
	schema, rel := "", name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		schema, rel = name[:i], name[i+1:]
	}
	rel = unquoteIdent(rel)
	schema = unquoteIdent(schema)
	if schema == "" {
		if t, ok := x.s.temps[rel]; ok {
			return t.OID, true
		}
		schema = x.s.searchSchema()
	}
	if t, ok := x.s.view().Lookup(schema, rel); ok {
		return t.OID, true
	}
	return 0, false
}

func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return strings.ToLower(s)
}
