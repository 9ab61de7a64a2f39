package sql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// statement runs one non-transaction-control statement.
func (x *exec) statement(n *pg.Node, out sink) error {
	switch {
	case n.GetSelectStmt() != nil:
		sel := n.GetSelectStmt()
		key, cacheable := x.catalogReadKey(sel)
		if cacheable {
			if a, ok := x.s.ex.catalogReads.get(key); ok {
				tag := "SELECT " + strconv.Itoa(len(a.r.rows))
				if as, ok := out.(answerSender); ok {
					return as.cached(a, tag)
				}
				return out.rows(a.r.cols, a.r.rows, tag)
			}
		}
		x.pruning = statementPruning(sel)
		r, err := x.runSelect(sel, nil)
		x.pruning = nil
		if err != nil {
			return err
		}
		if cacheable && !hasRegclass(r) { // a regclass prints by the session's search_path
			defer x.s.ex.catalogReads.put(key, r)
		}
		x.regclassNames(r)
		return out.rows(r.cols, r.rows, "SELECT "+strconv.Itoa(len(r.rows)))
	case n.GetCopyStmt() != nil:
		return x.copy(n.GetCopyStmt(), out)
	case n.GetInsertStmt() != nil:
		return x.insert(n.GetInsertStmt(), out)
	case n.GetUpdateStmt() != nil:
		return x.update(n.GetUpdateStmt(), out)
	case n.GetDeleteStmt() != nil:
		return x.delete(n.GetDeleteStmt(), out)
	case n.GetCreateStmt() != nil:
		return x.createTable(n.GetCreateStmt(), out)
	case n.GetCreateSchemaStmt() != nil:
		return x.createSchema(n.GetCreateSchemaStmt(), out)
	case n.GetDropStmt() != nil:
		return x.drop(n.GetDropStmt(), out)
	case n.GetAlterTableStmt() != nil:
		return x.alterTable(n.GetAlterTableStmt(), out)
	case n.GetRenameStmt() != nil:
		return x.rename(n.GetRenameStmt(), out)
	case n.GetVariableSetStmt() != nil:
		return x.set(n.GetVariableSetStmt(), out)
	case n.GetVariableShowStmt() != nil:
		return x.show(n.GetVariableShowStmt(), out)
	case n.GetDiscardStmt() != nil:
		if n.GetDiscardStmt().Target != pg.DiscardMode_DISCARD_ALL {
			return unsupported("DISCARD %s", strings.TrimPrefix(n.GetDiscardStmt().Target.String(), "DISCARD_"))
		}
		if x.s.tx.inBlock() || x.s.multi {
			// Also in the implicit block of a multi-statement query, as
			// PostgreSQL's PreventInTransactionBlock.
			return errf(pgcode.ActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
		}
		x.s.resetSettings()
		for name := range x.s.temps {
			delete(x.s.temps, name)
		}
		return out.complete("DISCARD ALL")
	}
	return unsupported("statement %s", nodeKind(n))
}

func (x *exec) checkWritable(verb string) error {
	if x.s.tx.readOnly || x.s.ex.InStandby() {
		return errf(pgcode.ReadOnlySQLTransaction, "cannot execute %s in a read-only transaction", verb)
	}
	if r := x.s.ex.WriteRefusal; r != nil {
		if err := r(); err != nil {
			return err
		}
	}
	return nil
}

// target is a table a write names: a lake table (schema != "") or a
// session temp table.
//
// t's definition and name are all a write reads from it (a lake table's
// rows are written through the transaction), so it is looked up once per
// statement.
type writeTarget struct {
	t      *memcat.Table
	schema string
}

func (x *exec) writeTarget(rv *pg.RangeVar, verb string) (writeTarget, error) {
	if rv.Schemaname == "pg_catalog" || rv.Schemaname == "information_schema" {
		return writeTarget{}, unsupported("%s into system catalogs", verb)
	}
	t, schema, err := x.findTable(rv, true)
	if err != nil {
		return writeTarget{}, err
	}
	if schema != "" {
		if err := x.checkWritable(verb); err != nil {
			return writeTarget{}, err
		}
	}
	return writeTarget{t: t, schema: schema}, nil
}

func (x *exec) insertRow(wt writeTarget, vals []datum.Value) error {
	t := wt.t
	for i, c := range t.Def.Columns {
		if c.NotNull && vals[i].IsNull() {
			return notNullError(t, i, vals)
		}
	}
	if wt.schema == "" {
		if err := t.CheckPK(vals, -1); err != nil {
			return err
		}
		t.Rows = append(t.Rows, memcat.Row{CTID: t.NextCTID(), Vals: vals})
		return nil
	}
	_, err := x.s.tx.txn.Insert(wt.schema, t.Name, vals)
	return err
}

func (x *exec) updateRow(wt writeTarget, ctid int64, vals []datum.Value) error {
	t := wt.t
	for i, c := range t.Def.Columns {
		if c.NotNull && vals[i].IsNull() {
			return notNullError(t, i, vals)
		}
	}
	if wt.schema == "" {
		if err := t.CheckPK(vals, ctid); err != nil {
			return err
		}
		for i := range t.Rows {
			if t.Rows[i].CTID == ctid {
				t.Rows = append(t.Rows[:i], t.Rows[i+1:]...)
				break
			}
		}
		t.Rows = append(t.Rows, memcat.Row{CTID: t.NextCTID(), Vals: vals})
		return nil
	}
	_, err := x.s.tx.txn.Update(wt.schema, t.Name, ctid, vals)
	return err
}

func (x *exec) deleteRow(wt writeTarget, ctid int64) error {
	t := wt.t
	if wt.schema == "" {
		for i := range t.Rows {
			if t.Rows[i].CTID == ctid {
				t.Rows = append(t.Rows[:i], t.Rows[i+1:]...)
				return nil
			}
		}
		return nil
	}
	return x.s.tx.txn.Delete(wt.schema, t.Name, ctid)
}

func notNullError(t *memcat.Table, col int, vals []datum.Value) error {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if v.IsNull() {
			parts[i] = "null"
		} else {
			parts[i] = datum.FormatText(t.Def.Columns[i].Type, v)
		}
	}
	return &pgwire.Error{Code: pgcode.NotNullViolation,
		Message: fmt.Sprintf("null value in column %q of relation %q violates not-null constraint", t.Def.Columns[col].Name, t.Name),
		Detail:  "Failing row contains (" + strings.Join(parts, ", ") + ")."}
}

// columnList maps an INSERT/COPY column list to table positions.
func columnList(t *memcat.Table, list []*pg.Node) ([]int, error) {
	if len(list) == 0 {
		idx := make([]int, len(t.Def.Columns))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	idx := make([]int, len(list))
	for i, n := range list {
		name := ""
		if rt := n.GetResTarget(); rt != nil {
			if len(rt.Indirection) > 0 {
				return nil, unsupported("subscripts or fields in an INSERT column list")
			}
			name = rt.Name
		} else {
			name = nodeName(n)
		}
		j := t.Def.ColumnIndex(name)
		if j < 0 {
			return nil, errf(pgcode.UndefinedColumn, "column %q of relation %q does not exist", name, t.Name)
		}
		if slices.Contains(idx[:i], j) {
			return nil, errf(pgcode.DuplicateColumn, "column %q specified more than once", name)
		}
		idx[i] = j
	}
	return idx, nil
}

// insertArity checks an INSERT row of n values against its target
// columns: never more values than columns, and with a column list named
// in the statement no fewer (without one, the table's trailing columns
// take their defaults).
func insertArity(n, cols int, named bool) error {
	switch {
	case n > cols:
		return errf(pgcode.SyntaxError, "INSERT has more expressions than target columns")
	case n < cols && named:
		return errf(pgcode.SyntaxError, "INSERT has more target columns than expressions")
	}
	return nil
}

func (x *exec) insert(s *pg.InsertStmt, out sink) error {
	if s.OnConflictClause != nil || len(s.ReturningList) > 0 || s.WithClause != nil {
		return unsupported("INSERT with ON CONFLICT, RETURNING or WITH")
	}
	wt, err := x.writeTarget(s.Relation, "INSERT")
	if err != nil {
		return err
	}
	t := wt.t
	idx, err := columnList(t, s.Cols)
	if err != nil {
		return err
	}
	sel := s.SelectStmt.GetSelectStmt()
	if sel == nil {
		return unsupported("INSERT ... DEFAULT VALUES")
	}
	var rows [][]tv
	if len(sel.ValuesLists) > 0 && sel.Op == pg.SetOperation_SETOP_NONE {
		// Every row's values in one slab and the rows in one list, both
		// the session's, reused (a DuckLake commit inserts a few dozen
		// values in most statements of its batch), and one empty
		// environment (eval does not write to it).
		n := 0
		for _, l := range sel.ValuesLists {
			n += len(l.GetList().GetItems())
		}
		if cap(x.s.valuesSlab) < n {
			x.s.valuesSlab = make([]tv, n)
		}
		slab := x.s.valuesSlab[:n]
		defer clear(slab) // keep no statement's values alive
		rows = x.s.valuesRows[:0]
		defer func() { x.s.valuesRows = rows[:0]; clear(rows) }()
		none := &env{}
		for _, l := range sel.ValuesLists {
			items := l.GetList().GetItems()
			if err := insertArity(len(items), len(idx), len(s.Cols) > 0); err != nil {
				return err
			}
			row := slab[:len(items):len(items)]
			slab = slab[len(items):]
			for i, it := range items {
				if it.GetSetToDefault() != nil {
					row[i] = tv{datum.Null, unknownType}
					continue
				}
				v, err := x.eval(it, none)
				if err != nil {
					return err
				}
				row[i] = v
			}
			rows = append(rows, row)
		}
	} else {
		r, err := x.runSelect(sel, nil)
		if err != nil {
			return err
		}
		if err := insertArity(len(r.cols), len(idx), len(s.Cols) > 0); err != nil {
			return err
		}
		for _, vr := range r.rows {
			row := make([]tv, len(vr))
			for i, v := range vr {
				row[i] = tv{v, r.cols[i].typ}
			}
			rows = append(rows, row)
		}
	}
	// The catalog encodes a row and keeps none of its values, so one
	// buffer serves every row of a lake table; a temp table keeps them.
	var buf []datum.Value
	if wt.schema != "" {
		buf = make([]datum.Value, len(t.Def.Columns))
	}
	for _, row := range rows {
		vals := buf
		if vals == nil {
			vals = make([]datum.Value, len(t.Def.Columns))
		} else {
			clear(vals) // columns not listed are NULL
		}
		for i, v := range row {
			c := t.Def.Columns[idx[i]]
			cv, err := assign(v, c)
			if err != nil {
				return err
			}
			vals[idx[i]] = cv
		}
		if err := x.insertRow(wt, vals); err != nil {
			return err
		}
	}
	return out.complete("INSERT 0 " + strconv.Itoa(len(rows)))
}

// assign converts a value for storing into column c (PostgreSQL's
// assignment cast).
func assign(v tv, c memcat.Column) (datum.Value, error) {
	cv, err := coerce(v, c.Type)
	if err != nil {
		var se *datum.SyntaxError
		if errors.As(err, &se) {
			return datum.Null, err
		}
		return datum.Null, errf(pgcode.DatatypeMismatch, "column %q is of type %s but expression is of type %s", c.Name, c.Type, outType(v.t))
	}
	return cv, nil
}

func (x *exec) withCTEs(w *pg.WithClause) (func(), error) {
	if w == nil {
		return func() {}, nil
	}
	saved := x.ctes
	x.ctes = make(map[string]*rel, len(saved)+len(w.Ctes))
	for k, v := range saved {
		x.ctes[k] = v
	}
	restore := func() { x.ctes = saved }
	if err := x.addCTEs(w); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// matchRows evaluates a WHERE clause (and FROM items) for UPDATE/DELETE
// over the target table and returns, for each target row that matches,
// its ctid and the scope of the first matching combination.
func (x *exec) matchRows(t *memcat.Table, alias string, from []*pg.Node, where *pg.Node, fn func(ctid int64, e *env) error) error {
	var target *rel
	var err error
	indexed := false
	if len(from) == 0 && where != nil {
		// The key index narrows the candidate rows (index.go).
		target, indexed, err = x.indexedTarget(t, alias, where)
	}
	switch {
	case err != nil || indexed:
	case len(from) == 0 && where != nil && simpleExpr(where):
		// Rows that fail a simple WHERE are dropped while scanning; the
		// WHERE below runs again on the rest (and reports any error).
		e := &env{cols: tableCols(t, alias)}
		target, err = tableRelFiltered(t, alias, x.intFilters(e.cols, where), func(row []datum.Value) bool {
			e.row = row
			ok, err := x.condition("WHERE", where, e)
			return err != nil || ok // on an error the WHERE below reports
		})
	default:
		target, err = tableRelFiltered(t, alias, nil, nil)
	}
	if err != nil {
		return err
	}
	var other *rel
	for _, f := range from {
		r, err := x.fromItem(f)
		if err != nil {
			return err
		}
		if other == nil {
			other = r
			continue
		}
		if other, err = x.join(other, r, nil, nil, pg.JoinType_JOIN_INNER); err != nil {
			return err
		}
	}
	cols := target.cols
	if other != nil {
		cols = append(append([]colInfo{}, target.cols...), other.cols...)
	}
	ctidCol := len(t.Def.Columns)
	e := &env{cols: cols, row: x.matchBuf(len(cols))}
	for _, row := range target.rows {
		copy(e.row, row)
		if other == nil {
			if where != nil {
				if ok, err := x.condition("WHERE", where, e); err != nil {
					return err
				} else if !ok {
					continue
				}
			}
			if err := fn(row[ctidCol].I, e); err != nil {
				return err
			}
			continue
		}
		for _, orow := range other.rows {
			copy(e.row[len(row):], orow)
			if where != nil {
				if ok, err := x.condition("WHERE", where, e); err != nil {
					return err
				} else if !ok {
					continue
				}
			}
			if err := fn(row[ctidCol].I, e); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

func (x *exec) update(s *pg.UpdateStmt, out sink) error {
	if len(s.ReturningList) > 0 {
		return unsupported("UPDATE ... RETURNING")
	}
	restore, err := x.withCTEs(s.WithClause)
	if err != nil {
		return err
	}
	defer restore()
	wt, err := x.writeTarget(s.Relation, "UPDATE")
	if err != nil {
		return err
	}
	t := wt.t
	alias := t.Name
	if s.Relation.Alias != nil {
		alias = s.Relation.Alias.Aliasname
	}
	type set struct {
		col  int
		expr *pg.Node
	}
	sets := make([]set, 0, len(s.TargetList))
	for _, n := range s.TargetList {
		rt := n.GetResTarget()
		if len(rt.Indirection) > 0 {
			return unsupported("UPDATE of subscripts or fields")
		}
		if rt.Val.GetMultiAssignRef() != nil {
			return unsupported("UPDATE SET (a, b) = ...")
		}
		j := t.Def.ColumnIndex(rt.Name)
		if j < 0 {
			return errf(pgcode.UndefinedColumn, "column %q of relation %q does not exist", rt.Name, t.Name)
		}
		for _, prev := range sets {
			if prev.col == j {
				return errf(pgcode.SyntaxError, "multiple assignments to same column %q", rt.Name)
			}
		}
		sets = append(sets, set{j, rt.Val})
	}
	type change struct {
		ctid int64
		vals []datum.Value
	}
	var changes []change
	x.matched = &x.s.matched
	defer x.endMatch()
	err = x.matchRows(t, alias, s.FromClause, s.WhereClause, func(ctid int64, e *env) error {
		var vals []datum.Value
		if wt.schema == "" {
			vals = make([]datum.Value, len(t.Def.Columns)) // a temp table keeps it
		} else {
			vals = x.matchBuf(len(t.Def.Columns)) // the catalog encodes it
		}
		copy(vals, e.row[:len(t.Def.Columns)])
		for _, st := range sets {
			v, err := x.eval(st.expr, e)
			if err != nil {
				return err
			}
			cv, err := assign(v, t.Def.Columns[st.col])
			if err != nil {
				return err
			}
			vals[st.col] = cv
		}
		changes = append(changes, change{ctid, vals})
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range changes {
		if err := x.updateRow(wt, c.ctid, c.vals); err != nil {
			return err
		}
	}
	return out.complete("UPDATE " + strconv.Itoa(len(changes)))
}

func (x *exec) delete(s *pg.DeleteStmt, out sink) error {
	if len(s.ReturningList) > 0 {
		return unsupported("DELETE ... RETURNING")
	}
	restore, err := x.withCTEs(s.WithClause)
	if err != nil {
		return err
	}
	defer restore()
	wt, err := x.writeTarget(s.Relation, "DELETE")
	if err != nil {
		return err
	}
	alias := wt.t.Name
	if s.Relation.Alias != nil {
		alias = s.Relation.Alias.Aliasname
	}
	var ctids []int64
	x.matched = &x.s.matched
	defer x.endMatch()
	err = x.matchRows(wt.t, alias, s.UsingClause, s.WhereClause, func(ctid int64, _ *env) error {
		ctids = append(ctids, ctid)
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range ctids {
		if err := x.deleteRow(wt, c); err != nil {
			return err
		}
	}
	return out.complete("DELETE " + strconv.Itoa(len(ctids)))
}

// copyOptions reads FORMAT, NULL and DELIMITER.
func copyOptions(opts []*pg.Node) (format int16, null string, err error) {
	null = `\N`
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil {
			continue
		}
		val := ""
		if d.Arg != nil {
			if s := d.Arg.GetString_(); s != nil {
				val = s.Sval
			} else if c := d.Arg.GetAConst(); c != nil && c.GetSval() != nil {
				val = c.GetSval().Sval
			}
		}
		switch strings.ToLower(d.Defname) {
		case "format":
			switch strings.ToLower(val) {
			case "binary":
				format = 1
			case "text":
				format = 0
			default:
				return 0, "", unsupported("COPY format %s", val)
			}
		case "null":
			null = val
		case "delimiter":
			if val != "\t" {
				return 0, "", unsupported("COPY DELIMITER other than tab")
			}
		default:
			return 0, "", unsupported("COPY option %s", d.Defname)
		}
	}
	return format, null, nil
}

func (x *exec) copy(s *pg.CopyStmt, out sink) error {
	if s.Filename != "" || s.IsProgram {
		return unsupported("COPY to or from a file or program (only STDIN/STDOUT)")
	}
	if s.WhereClause != nil {
		return unsupported("COPY ... WHERE")
	}
	format, null, err := copyOptions(s.Options)
	if err != nil {
		return err
	}
	if !s.IsFrom {
		var r *rel
		if s.Query != nil {
			sel := s.Query.GetSelectStmt()
			if sel == nil {
				return unsupported("COPY (%s) TO", nodeKind(s.Query))
			}
			if sr, ok := x.streamable(sel); ok {
				if ec, ok := out.(encodedCopier); ok && format == 1 {
					if p, src, ok := sr.encodedPlan(); ok {
						src.cache = x.s.ex.copies
						return ec.copyOutEncoded(sr.cols, p, src)
					}
				}
				return out.copyOut(format, sr.cols, sr.source())
			}
			if r, err = x.runSelect(sel, nil); err != nil {
				return err
			}
		} else {
			sel := &pg.SelectStmt{FromClause: []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: s.Relation}}}}
			star := &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: []*pg.Node{{Node: &pg.Node_AStar{AStar: &pg.A_Star{}}}}}}}
			sel.TargetList = []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Val: star}}}}
			if r, err = x.runSelect(sel, nil); err != nil {
				return err
			}
		}
		return out.copyOut(format, r.cols, sliceSource(r.rows))
	}
	wt, err := x.writeTarget(s.Relation, "COPY FROM")
	if err != nil {
		return err
	}
	idx, err := columnList(wt.t, s.Attlist)
	if err != nil {
		return err
	}
	src, err := out.copyIn(format, len(idx), null)
	if err != nil {
		return err
	}
	cols := wt.t.Def.Columns
	var rows [][]datum.Value
	for {
		cells, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(cells) != len(idx) {
			return copyFieldCount(format, cells, idx, cols)
		}
		vals := make([]datum.Value, len(cols))
		for i, c := range cells {
			if c == nil {
				continue
			}
			col := cols[idx[i]]
			var v datum.Value
			if format == 1 {
				v, err = datum.DecodeBinary(col.Type, c)
				if err != nil {
					return errf(pgcode.InvalidBinaryRepresentation, "incorrect binary data format in column %s: %v", col.Name, err)
				}
			} else {
				v, err = datum.ParseText(col.Type, string(c))
				if err != nil {
					return err
				}
			}
			vals[idx[i]] = v
		}
		rows = append(rows, vals)
	}
	for _, vals := range rows {
		if err := x.insertRow(wt, vals); err != nil {
			return err
		}
	}
	return out.complete("COPY " + strconv.Itoa(len(rows)))
}

// copyFieldCount is PostgreSQL's error for a COPY FROM row whose field
// count is not the column list's (idx, into cols).
func copyFieldCount(format int16, cells [][]byte, idx []int, cols []memcat.Column) error {
	switch {
	case format == 1:
		return errf(pgcode.BadCopyFileFormat, "row field count is %d, expected %d", len(cells), len(idx))
	case len(cells) < len(idx):
		return errf(pgcode.BadCopyFileFormat, "missing data for column %q", cols[idx[len(cells)]].Name)
	}
	return errf(pgcode.BadCopyFileFormat, "extra data after last expected column")
}

func hasRegclass(r *rel) bool {
	for _, c := range r.cols {
		if c.typ.OID == datum.OIDRegclass {
			return true
		}
	}
	return false
}

// regclassNames replaces regclass oids by relation names, which is how a
// regclass prints (moraine's results reach clients as text; a regclass in
// binary would be its oid, which no client of this vocabulary asks for).
func (x *exec) regclassNames(r *rel) {
	var idx []int
	for i, c := range r.cols {
		if c.typ.OID == datum.OIDRegclass {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	names := map[int64]string{}
	for _, ti := range pgcatalog.Tables(x.s.view()) {
		n := ti.Table.Name
		if ti.Schema.Name != x.s.searchSchema() {
			n = ti.Schema.Name + "." + n
		}
		names[int64(ti.Table.OID)] = n
	}
	for _, t := range x.s.temps {
		names[int64(t.OID)] = t.Name
	}
	for i := range idx {
		r.cols[idx[i]].typ = regclassText
	}
	for _, row := range r.rows {
		for _, i := range idx {
			if row[i].K == datum.KindInt {
				if n, ok := names[row[i].I]; ok {
					row[i] = datum.TextValue(n)
				} else {
					row[i] = datum.TextValue(strconv.FormatInt(row[i].I, 10))
				}
			}
		}
	}
}

// regclassText is regclass carried as its printed name: it reports OID
// 2205 in the RowDescription and encodes as text.
var regclassText = datum.Type{OID: datum.OIDRegclass, Mod: -2}

// streamRead is a whole-table read streamable recognized: output columns
// cols read table columns idx (len(t.Def.Columns) for ctid).
type streamRead struct {
	t    *memcat.Table
	cols []colInfo
	idx  []int
}

// answerSender is a sink that can send a cached catalog answer's rows as
// encoded once for all sessions (resultSink; test sinks take the values).
type answerSender interface {
	cached(a *catalogAnswer, tag string) error
}

// encodedCopier is a sink that can send a binary COPY straight from stored
// rows (resultSink; test sinks take the general path).
type encodedCopier interface {
	copyOutEncoded(cols []colInfo, p *copyPlan, src encodedSource) error
}

// encodedSource is what a binary COPY plan reads: the table's stored rows,
// and, for a published lake table, the same rows a chunk at a time, which
// the COPY cache can answer (copycache.go).
type encodedSource struct {
	scan   encodedScan
	chunks func(fn func(memcat.Chunk) bool) // nil: rows only
	rows   int                              // the table's row count
	cache  *copyCache                       // nil: no cache
}

// encodedPlan returns a binary COPY plan over the table's stored rows and
// the scan to run it on; ok is false when the table does not hold encoded
// rows or the plan would not reproduce the general path exactly.
func (sr *streamRead) encodedPlan() (*copyPlan, encodedSource, bool) {
	var src encodedSource
	et, ok := any(sr.t).(encodedTable)
	if !ok {
		return nil, src, false
	}
	stored, scan, ok := et.EncodedRows()
	if !ok {
		return nil, src, false
	}
	src.scan = scan
	if _, chunks, ok := et.EncodedChunks(); ok {
		src.chunks, src.rows = chunks, sr.t.Len()
	}
	// A plan depends on the table's definition and the columns read, so a
	// lake table's definition memo keeps one per column list: DuckLake reads
	// the same few tables the same way in every commit. A plan's cells are
	// its scratch, so each COPY gets its own.
	memo := sr.t.Memo()
	var key copyPlanKey
	if memo != nil {
		key = copyPlanKey{planColumns(sr.idx)}
		if tmpl, ok := memo.Load(key); ok {
			if tmpl == nil {
				return nil, src, false
			}
			return tmpl.(*copyPlan).forUse(), src, true
		}
	}
	def := make([]datum.Type, len(sr.t.Def.Columns))
	for i, c := range sr.t.Def.Columns {
		def[i] = c.Type
	}
	p, ok := newCopyPlan(sr.t.Name, def, stored, sr.cols, sr.idx)
	if memo != nil {
		if ok {
			memo.Store(key, p)
			return p.forUse(), src, true
		}
		memo.Store(key, nil)
	}
	if !ok {
		return nil, src, false
	}
	return p, src, true
}

// copyPlanKey keys a binary COPY plan in a definition's memo: the positions
// of the columns read, as planColumns encodes them.
type copyPlanKey struct{ cols string }

func planColumns(idx []int) string {
	b := make([]byte, 0, 2*len(idx))
	for _, i := range idx {
		b = binary.AppendUvarint(b, uint64(i))
	}
	return string(b)
}

// source streams the rows decoded, one []datum.Value per row.
func (sr *streamRead) source() rowSource {
	t, idx, n := sr.t, sr.idx, len(sr.t.Def.Columns)
	return func(emit func([]datum.Value) error) error {
		row := make([]datum.Value, len(idx))
		var emitErr error
		err := t.Scan(func(ctid int64, vals []datum.Value) bool {
			for j, i := range idx {
				if i == n {
					row[j] = datum.Value{K: datum.KindTID, I: ctid}
				} else {
					row[j] = vals[i]
				}
			}
			emitErr = emit(row)
			return emitErr == nil
		})
		if emitErr != nil {
			return emitErr
		}
		return err
	}
}

// streamable recognizes DuckLake's whole-table read — a projection of
// columns (and ctid) of one table, without WHERE, ORDER BY, LIMIT or
// aggregates — and returns a source that streams the rows from the
// catalog straight into the COPY, without materializing the table.
func (x *exec) streamable(s *pg.SelectStmt) (*streamRead, bool) {
	if s.WithClause != nil || s.Op != pg.SetOperation_SETOP_NONE || len(s.ValuesLists) > 0 ||
		len(s.FromClause) != 1 || s.WhereClause != nil || len(s.SortClause) > 0 || s.LimitCount != nil ||
		s.LimitOffset != nil || len(s.DistinctClause) > 0 || len(s.GroupClause) > 0 || s.HavingClause != nil ||
		s.IntoClause != nil || len(s.LockingClause) > 0 || len(s.WindowClause) > 0 {
		return nil, false
	}
	rv := s.FromClause[0].GetRangeVar()
	if rv == nil {
		return nil, false
	}
	t, qual, ok, err := x.storedTable(rv)
	if !ok || err != nil {
		return nil, false
	}
	tcols := tableCols(t, qual)
	e := &env{cols: tcols}
	var idx []int
	var cols []colInfo
	for _, tn := range s.TargetList {
		rt := tn.GetResTarget()
		if rt == nil {
			return nil, false
		}
		cr := rt.Val.GetColumnRef()
		if cr == nil || len(cr.Fields) == 0 || cr.Fields[len(cr.Fields)-1].GetAStar() != nil || len(rt.Indirection) > 0 {
			return nil, false
		}
		i, err := e.resolve(names(cr.Fields))
		if err != nil {
			return nil, false
		}
		c := tcols[i]
		c.qual, c.hidden = "", false
		if rt.Name != "" {
			c.name = rt.Name
		}
		idx = append(idx, i)
		cols = append(cols, c)
	}
	return &streamRead{t: t, cols: cols, idx: idx}, true
}
