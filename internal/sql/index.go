package sql

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Index access paths: a single-table SELECT whose WHERE pins every primary
// key column to a value known before the scan (a constant, a parameter, an
// uncorrelated scalar subquery) reads one row from the table's key index
// instead of scanning; a SELECT of only MIN/MAX of the first key column
// reads the index's edges. DuckLake asks both in every transaction
// ("the latest snapshot": WHERE snapshot_id = (SELECT MAX(snapshot_id) …)),
// and on a catalog with many snapshots a scan per question is what made
// attach slow.
//
// UPDATE and DELETE use the first path too, and also a one-column key
// pinned by `key IN (v, …)`: DuckLake ends, rebases and deletes data and
// delete files by id (`WHERE data_file_id IN (…)`), which on a catalog of
// a million files would otherwise scan a million rows per statement.
//
// DuckLake's tables without a primary key that it updates by id in every
// commit (ducklake_table_stats by table_id, ducklake_table_column_stats by
// table_id and column_id; ducklake_table and ducklake_column on DDL) carry
// a lookup index instead (keyspace.TableSpec.Lookup): UPDATE and DELETE
// read their candidates from it when the WHERE pins its leading columns
// with `=`, or its first column with `IN (…)`. Without it each of those
// statements scans a table that grows with every table and column of the
// lake.
//
// Every path only narrows the input rows: WHERE and the target list still
// run over them unchanged, and UPDATE/DELETE visit them in ctid order as
// the scan does, so the result is the scan's by construction.

// errRowDependent: an expression evaluated before the scan referred to a
// column of the row being scanned (so it cannot be known before the scan).
var errRowDependent = errors.New("sql: expression depends on the scanned row")

// lakeRangeVar returns the lake table a FROM item names, or ok false when it
// is not one (a CTE, a temp table, a system relation, a join).
func (x *exec) lakeRangeVar(n *pg.Node) (t *memcat.Table, qual string, ok bool) {
	rv := n.GetRangeVar()
	if rv == nil || !rv.Inh {
		return nil, "", false
	}
	t, qual, ok, err := x.storedTable(rv)
	if !ok || err != nil || !t.Indexed() { // temp tables have no index
		return nil, "", false
	}
	return t, qual, true
}

// indexedFrom answers the FROM clause of s from an index when one of the
// access paths applies; ok false means scan as usual.
func (x *exec) indexedFrom(s *pg.SelectStmt, outer *env) (r *rel, ok bool, err error) {
	if len(s.FromClause) != 1 {
		return nil, false, nil
	}
	t, qual, ok := x.lakeRangeVar(s.FromClause[0])
	if !ok {
		return nil, false, nil
	}
	cols := tableCols(t, qual)
	if s.WhereClause != nil {
		key, ok, err := x.keyFromWhere(t, cols, s.WhereClause, outer)
		if err != nil || !ok {
			return nil, false, err
		}
		out := &rel{cols: cols}
		ctid, vals, found, err := t.LookupKey(key, x.matchBuf(len(cols))[:0])
		if err != nil {
			return nil, true, err
		}
		if found {
			out.rows = append(out.rows, append(vals, datum.Value{K: datum.KindTID, I: ctid}))
		}
		return out, true, nil
	}
	if !x.onlyMinMaxOfFirstKey(t, cols, s.TargetList) {
		return nil, false, nil
	}
	out := &rel{cols: cols}
	var first int64 = -1
	for _, last := range []bool{false, true} {
		ctid, vals, found, err := t.EdgeKey(last, make([]datum.Value, 0, len(cols)))
		if err != nil {
			return nil, true, err
		}
		if !found {
			if last {
				return nil, false, nil // the index does not order this key
			}
			continue
		}
		if ctid != first {
			out.rows = append(out.rows, append(vals, datum.Value{K: datum.KindTID, I: ctid}))
			first = ctid
		}
	}
	return out, true, nil
}

// keyFromWhere returns the primary key the AND-ed conjuncts of where pin,
// one value per key column, when every key column is compared with = to a
// value computable before the scan and of the column's kind.
func (x *exec) keyFromWhere(t *memcat.Table, cols []colInfo, where *pg.Node, outer *env) ([]datum.Value, bool, error) {
	eqs, ok := x.equalities(cols, where, outer)
	if !ok {
		return nil, false, nil // leave the error to the WHERE clause
	}
	pk := t.Def.PK
	key := make([]datum.Value, len(pk))
	have := make([]bool, len(pk))
	for _, eq := range eqs {
		for j, p := range pk {
			if p == eq.col {
				key[j], have[j] = eq.v, true
			}
		}
	}
	for j, h := range have {
		if !h || key[j].IsNull() {
			// = NULL is never true: no row, without a lookup.
			return nil, false, nil
		}
	}
	return key, true, nil
}

// colValue is a conjunct `column = value` of a WHERE clause.
type colValue struct {
	col int // position in cols
	v   datum.Value
}

// equalities returns the AND-ed conjuncts of where of the form `column =
// value` (either way round) whose value is computable before the scan and
// NULL or of the column's kind, the first one per column. ok is false when
// computing a value failed: that error is the WHERE clause's to report, so
// no access path may be taken.
func (x *exec) equalities(cols []colInfo, where *pg.Node, outer *env) (eqs []colValue, ok bool) {
	scope := &env{cols: cols} // row nil: a reference to it fails
	pre := &env{cols: cols, outer: outer}
	var buf [8]*pg.Node // DuckLake's WHERE clauses have one or two conjuncts
	conj := flattenAnd(where, buf[:0])
	for _, c := range conj {
		a := c.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || opName(a.Name) != "=" {
			continue
		}
		for _, side := range [2][2]*pg.Node{{a.Lexpr, a.Rexpr}, {a.Rexpr, a.Lexpr}} {
			cr := side[0].GetColumnRef()
			if cr == nil || !knownBeforeScan(side[1]) {
				continue
			}
			ci, err := scope.resolve(names(cr.Fields))
			if err != nil || slices.ContainsFunc(eqs, func(e colValue) bool { return e.col == ci }) {
				continue
			}
			v, err := x.eval(side[1], pre)
			if err != nil {
				if errors.Is(err, errRowDependent) {
					continue
				}
				return nil, false
			}
			if !v.v.IsNull() && v.v.K != cols[ci].typ.Kind() {
				continue // a cross-kind comparison: let the scan decide
			}
			eqs = append(eqs, colValue{col: ci, v: v.v})
			break
		}
	}
	return eqs, true
}

// intFilter is a conjunct a stored row's integer column must pass: equal
// to one of vals (sorted; empty: no row passes). A row whose column is
// NULL or another value cannot satisfy the WHERE it came from.
type intFilter struct {
	col  int
	vals []int64
}

// pass reports whether v is one of f's values.
func (f intFilter) pass(v int64) bool {
	if len(f.vals) == 1 {
		return f.vals[0] == v
	}
	_, ok := slices.BinarySearch(f.vals, v)
	return ok
}

// intFilters returns the conjuncts among filters (each AND-ed, all AND-ed
// together) that pin an integer column to values known before the scan —
// `= v` (v not NULL) or `IN (v, …)` (its NULLs dropped) — as intFilters: a
// stored row whose column fails one cannot pass the WHERE and is skipped by
// the scan without being decoded (tableRelFiltered). DuckLake's per-commit
// `UPDATE ducklake_table_stats … WHERE table_id = …` and `…
// table_column_stats … WHERE table_id = … AND column_id = …` are scans of
// tables without a key, and so is a compaction's `DELETE FROM
// ducklake_file_column_stats WHERE data_file_id IN (…)`.
func (x *exec) intFilters(cols []colInfo, filters ...*pg.Node) []intFilter {
	var out []intFilter
	for _, f := range filters {
		eqs, ok := x.equalities(cols, f, nil)
		if !ok {
			return nil
		}
		for _, eq := range eqs {
			if cols[eq.col].typ.Kind() == datum.KindInt && !eq.v.IsNull() {
				out = append(out, intFilter{col: eq.col, vals: []int64{eq.v.I}})
			}
		}
		scope := env{cols: cols}
		var buf [8]*pg.Node
		for _, c := range flattenAnd(f, buf[:0]) {
			a := c.GetAExpr()
			if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_IN || a.Lexpr.GetColumnRef() == nil {
				continue
			}
			ci, err := scope.resolve(names(a.Lexpr.GetColumnRef().Fields))
			if err != nil || cols[ci].typ.Kind() != datum.KindInt || cols[ci].hidden {
				continue
			}
			vals, ok := x.inValues(cols, f, ci)
			if !ok {
				continue
			}
			in := intFilter{col: ci, vals: make([]int64, len(vals))}
			for i, v := range vals {
				in.vals[i] = v.I
			}
			slices.Sort(in.vals)
			out = append(out, in)
		}
	}
	return out
}

// indexedTarget returns the rows of t that an UPDATE's or DELETE's where
// can match, read by ctid or from the key index (with the ctid column, in
// ctid order, as tableRelFiltered returns them); ok false means scan.
func (x *exec) indexedTarget(t *memcat.Table, alias string, where *pg.Node) (r *rel, ok bool, err error) {
	if r, ok, err := x.tidTarget(t, alias, where); ok || err != nil {
		return r, ok, err
	}
	if !t.Indexed() {
		return x.lookupTarget(t, alias, where)
	}
	cols := tableCols(t, alias)
	keys, ok, err := x.keysFromWhere(t, cols, where)
	if err != nil || !ok {
		return nil, false, err
	}
	out := &rel{cols: cols}
	seen := make(map[int64]bool, len(keys))
	for _, key := range keys {
		ctid, vals, found, err := t.LookupKey(key, x.matchBuf(len(cols))[:0])
		if err != nil {
			return nil, true, err
		}
		if found && !seen[ctid] {
			seen[ctid] = true
			out.rows = append(out.rows, append(vals, datum.Value{K: datum.KindTID, I: ctid}))
		}
	}
	n := len(cols) - 1
	slices.SortFunc(out.rows, func(a, b []datum.Value) int { return cmp.Compare(a[n].I, b[n].I) })
	return out, true, nil
}

// keysFromWhere returns the primary keys the conjuncts of where restrict
// the rows to: the one keyFromWhere finds, or for a one-column key the
// values of a conjunct `key IN (v, …)` whose values are known before the
// scan. ok false means the conjuncts do not restrict the key that way.
func (x *exec) keysFromWhere(t *memcat.Table, cols []colInfo, where *pg.Node) ([][]datum.Value, bool, error) {
	key, ok, err := x.keyFromWhere(t, cols, where, nil)
	if err != nil || ok {
		return [][]datum.Value{key}, ok, err
	}
	if len(t.Def.PK) != 1 {
		return nil, false, nil
	}
	vals, ok := x.inValues(cols, where, t.Def.PK[0])
	if !ok {
		return nil, false, nil
	}
	keys := make([][]datum.Value, len(vals))
	for i, v := range vals {
		keys[i] = []datum.Value{v}
	}
	return keys, true, nil
}

// inValues returns the non-NULL values of the first AND-ed conjunct of where
// of the form `column IN (v, …)` on column col whose values are all known
// before the scan and of the column's kind (NULLs match no row). ok false
// means there is no such conjunct.
func (x *exec) inValues(cols []colInfo, where *pg.Node, col int) (vals []datum.Value, ok bool) {
	scope := &env{cols: cols} // row nil: a reference to it fails
	var buf [8]*pg.Node
	conj := flattenAnd(where, buf[:0])
	for _, c := range conj {
		a := c.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_IN || opName(a.Name) != "=" {
			continue
		}
		cr := a.Lexpr.GetColumnRef()
		list := a.Rexpr.GetList()
		if cr == nil || list == nil {
			continue
		}
		if ci, err := scope.resolve(names(cr.Fields)); err != nil || ci != col {
			continue
		}
		vals = make([]datum.Value, 0, len(list.Items))
		usable := true
		for _, item := range list.Items {
			if !knownBeforeScan(item) {
				usable = false
				break
			}
			v, err := x.eval(item, scope)
			if err != nil || (!v.v.IsNull() && v.v.K != cols[col].typ.Kind()) {
				// An error is the WHERE clause's to report; a cross-kind
				// comparison is the scan's to decide.
				usable = false
				break
			}
			if !v.v.IsNull() { // = NULL matches no row
				vals = append(vals, v.v)
			}
		}
		if usable {
			return vals, true
		}
	}
	return nil, false
}

// lookupTarget is indexedTarget for a table with a lookup index instead of
// a primary key (DuckLake's statistics, tables and columns, which it
// updates by id in every commit: `… ducklake_table_column_stats … WHERE
// table_id = … AND column_id = …`). The rows come from the longest run of
// leading lookup columns the conjuncts pin with `=`, or else from the
// first lookup column's `IN (…)` list; ok false means scan.
func (x *exec) lookupTarget(t *memcat.Table, alias string, where *pg.Node) (r *rel, ok bool, err error) {
	lc := t.LookupColumns()
	if lc == nil {
		return nil, false, nil
	}
	cols := tableCols(t, alias)
	eqs, ok := x.equalities(cols, where, nil)
	if !ok {
		return nil, false, nil
	}
	prefix := make([]datum.Value, 0, len(lc))
	for _, c := range lc {
		i := slices.IndexFunc(eqs, func(e colValue) bool { return e.col == c })
		if i < 0 || eqs[i].v.IsNull() {
			break // = NULL matches no row; the scan says so
		}
		prefix = append(prefix, eqs[i].v)
	}
	var prefixes [][]datum.Value
	if len(prefix) > 0 {
		prefixes = [][]datum.Value{prefix}
	} else {
		vals, ok := x.inValues(cols, where, lc[0])
		if !ok {
			return nil, false, nil
		}
		for _, v := range vals {
			prefixes = append(prefixes, []datum.Value{v})
		}
	}
	out := &rel{cols: cols}
	var seen map[int64]bool // an IN list may repeat a value
	if len(prefixes) > 1 {
		seen = map[int64]bool{}
	}
	decoded := x.matchBuf(len(cols))
	for _, p := range prefixes {
		ok, err := t.LookupPrefix(p, decoded, func(ctid int64, vals []datum.Value) error {
			if seen != nil {
				if seen[ctid] {
					return nil
				}
				seen[ctid] = true
			}
			row := x.matchBuf(len(vals) + 1)
			copy(row, vals)
			row[len(vals)] = datum.Value{K: datum.KindTID, I: ctid}
			out.rows = append(out.rows, row)
			return nil
		})
		if err != nil || !ok {
			return nil, ok, err
		}
	}
	if len(prefixes) > 1 {
		n := len(cols) - 1
		slices.SortFunc(out.rows, func(a, b []datum.Value) int { return cmp.Compare(a[n].I, b[n].I) })
	}
	return out, true, nil
}

// tidTarget answers a WHERE that pins the ctid — `ctid = '(b,o)'` or
// `ctid IN ('(b,o)', …)`, how DuckDB's postgres extension deletes rows it
// read, as DuckLake's snapshot expiry and file cleanup do — by looking the
// rows up at those ctids (PostgreSQL's TID scan) instead of scanning a
// table that may hold millions of statistics rows. ok false means no
// conjunct pins the ctid with values known before the scan.
func (x *exec) tidTarget(t *memcat.Table, alias string, where *pg.Node) (r *rel, ok bool, err error) {
	cols := tableCols(t, alias)
	n := len(cols) - 1 // the ctid column (tableCols)
	if t.Memo() == nil || cols[n].typ.Kind() != datum.KindTID {
		return nil, false, nil // a temp table keeps its rows itself: scan
	}
	// The search allocates nothing: it runs for every UPDATE and DELETE.
	res := env{cols: cols}
	var items []*pg.Node
	var buf [8]*pg.Node
	for _, c := range flattenAnd(where, buf[:0]) {
		a := c.GetAExpr()
		if a == nil || opName(a.Name) != "=" {
			continue
		}
		var cr *pg.ColumnRef
		var one *pg.Node
		var list []*pg.Node
		switch {
		case a.Kind == pg.A_Expr_Kind_AEXPR_OP && a.Lexpr.GetColumnRef() != nil:
			cr, one = a.Lexpr.GetColumnRef(), a.Rexpr
		case a.Kind == pg.A_Expr_Kind_AEXPR_OP && a.Rexpr.GetColumnRef() != nil:
			cr, one = a.Rexpr.GetColumnRef(), a.Lexpr
		case a.Kind == pg.A_Expr_Kind_AEXPR_IN && a.Lexpr.GetColumnRef() != nil && a.Rexpr.GetList() != nil:
			cr, list = a.Lexpr.GetColumnRef(), a.Rexpr.GetList().Items
		default:
			continue
		}
		if ci, err := res.resolve(names(cr.Fields)); err != nil || ci != n {
			continue
		}
		if one != nil {
			list = []*pg.Node{one}
		}
		if !slices.ContainsFunc(list, func(v *pg.Node) bool { return !knownBeforeScan(v) }) {
			items = list
			break
		}
	}
	if items == nil {
		return nil, false, nil
	}
	scope := &env{cols: cols} // row nil: a reference to it fails
	ctids := make([]int64, 0, len(items))
	ctidType := tv{datum.Value{K: datum.KindTID}, cols[n].typ}
	for _, item := range items {
		v, err := x.eval(item, scope)
		if err == nil {
			_, v, err = unify(ctidType, v)
		}
		if err != nil || (!v.v.IsNull() && v.v.K != datum.KindTID) {
			return nil, false, nil // the WHERE's to report, or the scan's to decide
		}
		if !v.v.IsNull() { // = NULL matches no row
			ctids = append(ctids, v.v.I)
		}
	}
	slices.Sort(ctids)
	ctids = slices.Compact(ctids)
	out := &rel{cols: cols}
	for _, c := range ctids {
		vals, found, err := t.LookupCTID(c, x.matchBuf(len(cols))[:0])
		if err != nil {
			return nil, true, err
		}
		if found {
			out.rows = append(out.rows, append(vals, datum.Value{K: datum.KindTID, I: c}))
		}
	}
	return out, true, nil
}

// knownBeforeScan reports whether n is a shape whose value cannot depend on
// the scanned row except through a column reference (which evaluation then
// reports): constants, parameters, casts of those, scalar subqueries.
func knownBeforeScan(n *pg.Node) bool {
	switch {
	case n == nil:
		return false
	case n.GetAConst() != nil, n.GetParamRef() != nil:
		return true
	case n.GetTypeCast() != nil:
		return knownBeforeScan(n.GetTypeCast().Arg)
	case n.GetSubLink() != nil:
		return n.GetSubLink().SubLinkType == pg.SubLinkType_EXPR_SUBLINK
	}
	return false
}

func flattenAnd(n *pg.Node, out []*pg.Node) []*pg.Node {
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		for _, a := range b.Args {
			out = flattenAnd(a, out)
		}
		return out
	}
	return append(out, n)
}

// onlyMinMaxOfFirstKey reports whether every target is min(c) or max(c) of
// the table's first primary key column c: then the rows holding the
// smallest and largest c give the same answer as the whole table.
func (x *exec) onlyMinMaxOfFirstKey(t *memcat.Table, cols []colInfo, targets []*pg.Node) bool {
	if len(targets) == 0 || len(t.Def.PK) == 0 {
		return false
	}
	scope := &env{cols: cols}
	for _, tn := range targets {
		rt := tn.GetResTarget()
		if rt == nil || rt.Val == nil {
			return false
		}
		fc := rt.Val.GetFuncCall()
		if fc == nil || len(fc.Args) != 1 || fc.AggStar || fc.AggDistinct || fc.AggFilter != nil ||
			len(fc.AggOrder) > 0 || fc.Over != nil || len(fc.Funcname) > 2 {
			return false
		}
		if len(fc.Funcname) == 2 && nodeName(fc.Funcname[0]) != "pg_catalog" {
			return false
		}
		if name := strings.ToLower(opName(fc.Funcname)); name != "min" && name != "max" {
			return false
		}
		cr := fc.Args[0].GetColumnRef()
		if cr == nil {
			return false
		}
		ci, err := scope.resolve(names(cr.Fields))
		if err != nil || ci != t.Def.PK[0] {
			return false
		}
	}
	return true
}
