package sql

import (
	"slices"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// fromItem evaluates one FROM clause item.
func (x *exec) fromItem(n *pg.Node) (*rel, error) { return x.fromItemFiltered(n, nil) }

// fromItemFiltered evaluates a FROM item, applying to each scanned table
// the WHERE conjuncts (filters) that only name its columns: the WHERE
// clause still runs afterwards, so this only makes joins smaller. Filters
// never reach the nullable side of a LEFT JOIN.
func (x *exec) fromItemFiltered(n *pg.Node, filters []*pg.Node) (*rel, error) {
	switch {
	case n.GetRangeVar() != nil:
		return x.fromRangeVar(n.GetRangeVar(), filters, true)
	case n.GetJoinExpr() != nil:
		j := n.GetJoinExpr()
		if j.IsNatural || len(j.UsingClause) > 0 {
			return nil, unsupported("NATURAL and USING joins")
		}
		l, err := x.fromItemFiltered(j.Larg, filters)
		if err != nil {
			return nil, err
		}
		rf := filters
		if j.Jointype != pg.JoinType_JOIN_INNER {
			rf = nil
		}
		var r *rel
		if rv := j.Rarg.GetRangeVar(); rv != nil && len(rf) > 0 && len(l.rows) <= lazyJoinRows {
			// The join with a few rows narrows the right side more cheaply
			// than filtering every row of it first; the WHERE clause,
			// evaluated on the joined rows, holds the filters anyway.
			r, err = x.fromRangeVar(rv, rf, false)
		} else {
			r, err = x.fromItemFiltered(j.Rarg, rf)
		}
		if err != nil {
			return nil, err
		}
		return x.join(l, r, j, j.Quals, j.Jointype)
	case n.GetRangeSubselect() != nil:
		rs := n.GetRangeSubselect()
		if rs.Lateral {
			return nil, unsupported("LATERAL")
		}
		sel := rs.Subquery.GetSelectStmt()
		r, err := x.runSelect(sel, nil)
		if err != nil {
			return nil, err
		}
		cols := slices.Clone(r.cols)
		qual := ""
		if rs.Alias != nil {
			qual = rs.Alias.Aliasname
			for i, cn := range names(rs.Alias.Colnames) {
				if i < len(cols) {
					cols[i].name = cn
				}
			}
		}
		for i := range cols {
			cols[i].qual = qual
		}
		return &rel{cols: cols, rows: r.rows}, nil
	}
	if rf := n.GetRangeFunction(); rf != nil {
		return x.rangeFunction(rf)
	}
	return nil, unsupported("FROM item %s", nodeKind(n))
}

// rangeFunction is unnest(array) in FROM (psql's \d+ reads reloptions so).
func (x *exec) rangeFunction(rf *pg.RangeFunction) (*rel, error) {
	if rf.Lateral || rf.Ordinality || rf.IsRowsfrom || len(rf.Functions) != 1 {
		return nil, unsupported("FROM function with LATERAL, ORDINALITY or ROWS FROM")
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 || items[0].GetFuncCall() == nil {
		return nil, unsupported("FROM function")
	}
	fc := items[0].GetFuncCall()
	if name := opName(fc.Funcname); name != "unnest" || len(fc.Args) != 1 {
		return nil, unsupported("FROM function %s", name)
	}
	arg, err := x.eval(fc.Args[0], &env{outer: x.outer})
	if err != nil {
		return nil, err
	}
	if arg.t.Kind() != datum.KindArray {
		return nil, errf(pgcode.UndefinedFunction, "function unnest(%s) does not exist", outType(arg.t))
	}
	qual, col := "unnest", "unnest"
	if rf.Alias != nil {
		qual, col = rf.Alias.Aliasname, rf.Alias.Aliasname
		if cn := names(rf.Alias.Colnames); len(cn) > 0 {
			col = cn[0]
		}
	}
	out := &rel{cols: []colInfo{{qual: qual, name: col, typ: arg.t.Elem()}}}
	if arg.v.IsNull() {
		return out, nil
	}
	elems, err := datum.ArrayElems(arg.t, arg.v)
	if err != nil {
		return nil, err
	}
	for _, v := range elems {
		out.rows = append(out.rows, []datum.Value{v})
	}
	return out, nil
}

// join combines two relations. An equality between a column of each side
// in the join condition is answered through a hash table; the full
// condition is then checked on each candidate pair.
// joinChunkRows is the most output rows of a join that share one
// allocation.
const joinChunkRows = 256

// lazyJoinRows is the most rows a join's left side may have for its right
// side to enter the join unfiltered.
const lazyJoinRows = 16

// fromRangeVar reads a table or catalog named in FROM: through an index when
// filters allow it, else whole, with the filters applied to its rows when
// prefilter is set (otherwise the WHERE clause alone applies them).
func (x *exec) fromRangeVar(rv *pg.RangeVar, filters []*pg.Node, prefilter bool) (*rel, error) {
	if len(filters) > 0 {
		if r, ok, err := x.scanLakeFiltered(rv, filters); ok || err != nil {
			return r, err
		}
	}
	r, err := x.scan(rv)
	if err != nil || len(filters) == 0 || !prefilter {
		return r, err
	}
	return x.prefilter(r, filters)
}

// join joins l and r on quals; j is the join expression (nil for a FROM
// list's implicit join), which decides the columns kept (prune.go).
func (x *exec) join(l, r *rel, j *pg.JoinExpr, quals *pg.Node, jt pg.JoinType) (*rel, error) {
	switch jt {
	case pg.JoinType_JOIN_INNER, pg.JoinType_JOIN_LEFT:
	default:
		return nil, unsupported("join type %s", jt)
	}
	cols := append(slices.Clone(l.cols), r.cols...)
	keep := x.keep(cols, j)
	out := &rel{cols: cols}
	if keep != nil {
		out.cols = make([]colInfo, len(keep))
		for j, i := range keep {
			out.cols[j] = cols[i]
		}
	}
	li, ri := -1, -1
	if quals != nil {
		li, ri = equiJoinCols(quals, l.cols, r.cols)
	}
	// An ON that is nothing but the hashed equality holds for every pair
	// the hash table offers: equal, non-NULL integers or strings.
	onlyHashed := li >= 0 && quals.GetAExpr() != nil
	e := &env{cols: cols, row: make([]datum.Value, len(cols))}
	// add appends the joined row in e.row, narrowed to the kept columns.
	// Rows are carved from chunks of joinChunkRows: one allocation for
	// many rows, which a catalog join produces thousands of.
	width := len(out.cols)
	var chunk []datum.Value
	add := func() error {
		if len(chunk) < width {
			// Chunks grow with the output, so a join of a row or two
			// allocates little.
			chunk = make([]datum.Value, width*min(joinChunkRows, max(4, len(out.rows))))
		}
		row := chunk[:width:width]
		chunk = chunk[width:]
		if keep == nil {
			copy(row, e.row)
		} else {
			for j, i := range keep {
				row[j] = e.row[i]
			}
		}
		if err := x.hold(row); err != nil {
			return err
		}
		out.rows = append(out.rows, row)
		return nil
	}
	// emit evaluates the ON condition on a pair of rows and adds the joined
	// row when it holds.
	emit := func(lrow, rrow []datum.Value) (bool, error) {
		if err := x.step(); err != nil {
			return false, err
		}
		copy(e.row, lrow)
		copy(e.row[len(lrow):], rrow)
		if quals != nil && !onlyHashed {
			if ok, err := x.condition("JOIN/ON", quals, e); err != nil || !ok {
				return false, err
			}
		}
		return true, add()
	}
	nulls := make([]datum.Value, len(r.cols))
	var pairs []joinPair // with an equality to hash: the candidate pairs
	if li >= 0 {
		pairs = hashPairs(l, r, li, ri)
	}
	p := 0
	for i, lrow := range l.rows {
		matched := false
		if li >= 0 {
			for ; p < len(pairs) && pairs[p].l == i; p++ {
				ok, err := emit(lrow, r.rows[pairs[p].r])
				if err != nil {
					return nil, err
				}
				matched = matched || ok
			}
		} else {
			for _, rrow := range r.rows {
				ok, err := emit(lrow, rrow)
				if err != nil {
					return nil, err
				}
				matched = matched || ok
			}
		}
		if !matched && jt == pg.JoinType_JOIN_LEFT {
			copy(e.row, lrow)
			copy(e.row[len(lrow):], nulls)
			if err := add(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// joinPair is a left and a right row index whose join columns are equal.
type joinPair struct{ l, r int }

// hashPairs returns the pairs of rows of l and r whose columns li and ri
// are equal and not NULL, ordered by left row and then right row — the
// order a nested loop visits them in. The hash table is built over the
// smaller side: a catalog join's filtered side is often a row or two
// against hundreds.
func hashPairs(lr, rr *rel, li, ri int) []joinPair {
	l, r := lr.rows, rr.rows
	build, probe, bi, pi := r, l, ri, li
	if len(l) < len(r) {
		build, probe, bi, pi = l, r, li, ri
	}
	var out []joinPair
	pair := func(i, j int) {
		if len(l) < len(r) {
			out = append(out, joinPair{l: i, r: j})
		} else {
			out = append(out, joinPair{l: j, r: i})
		}
	}
	// The larger side a shared relation with an index of its column: look
	// the smaller side's keys up in it instead of probing every row.
	big, bc := rr, ri
	if len(l) >= len(r) {
		big, bc = lr, li
	}
	if big.ix != nil && allInts(build, bi) {
		if ix, ok := big.ix.intIndex(big.rows, bc); ok {
			for i, row := range build {
				if !row[bi].IsNull() {
					for _, j := range ix.get(row[bi].I) {
						pair(i, j)
					}
				}
			}
			sortPairs(out)
			return out
		}
	}
	if allInts(build, bi) && allInts(probe, pi) {
		// Integer keys (oids, ids) hash without the string of joinKey.
		probeHash(build, probe, bi, pi, func(v datum.Value) int64 { return v.I }, pair)
	} else {
		probeHash(build, probe, bi, pi, keyOf, pair)
	}
	if len(l) < len(r) {
		sortPairs(out)
	}
	return out
}

// probeHash hashes column bi of build under key and calls pair(i, j) for
// each row j of probe whose column pi has the key of build's row i, NULLs
// matching nothing.
func probeHash[K comparable](build, probe [][]datum.Value, bi, pi int, key func(datum.Value) K, pair func(i, j int)) {
	hash := make(map[K][]int, len(build))
	for i, row := range build {
		if !row[bi].IsNull() {
			k := key(row[bi])
			hash[k] = append(hash[k], i)
		}
	}
	for j, row := range probe {
		if !row[pi].IsNull() {
			for _, i := range hash[key(row[pi])] {
				pair(i, j)
			}
		}
	}
}

// sortPairs puts pairs in left-major order, as a nested loop visits them.
func sortPairs(pairs []joinPair) {
	slices.SortFunc(pairs, func(a, b joinPair) int {
		if a.l != b.l {
			return a.l - b.l
		}
		return a.r - b.r
	})
}

// allInts reports whether column c of rows holds integers or NULLs only.
func allInts(rows [][]datum.Value, c int) bool {
	for _, row := range rows {
		if k := row[c].K; k != datum.KindInt && !row[c].IsNull() {
			return false
		}
	}
	return true
}

// joinKey is a hash key under which equal values of joinable kinds meet.
type joinKey struct {
	k datum.Kind
	i int64
	s string
}

func keyOf(v datum.Value) joinKey {
	switch v.K {
	case datum.KindInt:
		return joinKey{k: datum.KindInt, i: v.I}
	case datum.KindText:
		return joinKey{k: datum.KindText, s: v.S}
	}
	return joinKey{k: v.K, i: v.I, s: v.S}
}

// equiJoinCols finds a conjunct "a = b" with a a column of l and b of r
// (or the reverse) whose kinds hash alike.
func equiJoinCols(q *pg.Node, l, r []colInfo) (int, int) {
	var conj []*pg.Node
	if b := q.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		conj = b.Args
	} else {
		conj = []*pg.Node{q}
	}
	for _, c := range conj {
		a := c.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || opName(a.Name) != "=" {
			continue
		}
		lc, rc := a.Lexpr.GetColumnRef(), a.Rexpr.GetColumnRef()
		if lc == nil || rc == nil {
			continue
		}
		le, re := &env{cols: l}, &env{cols: r}
		if i, err := le.resolve(names(lc.Fields)); err == nil {
			if j, err := re.resolve(names(rc.Fields)); err == nil && hashable(l[i].typ, r[j].typ) {
				return i, j
			}
		}
		if i, err := le.resolve(names(rc.Fields)); err == nil {
			if j, err := re.resolve(names(lc.Fields)); err == nil && hashable(l[i].typ, r[j].typ) {
				return i, j
			}
		}
	}
	return -1, -1
}

func hashable(a, b datum.Type) bool {
	ka, kb := a.Kind(), b.Kind()
	return ka == kb && (ka == datum.KindInt || ka == datum.KindText)
}

// pushable splits a WHERE clause into the conjuncts that are simple enough
// to evaluate early (column references, constants, operators; no
// subqueries or functions with side conditions).
func pushable(where *pg.Node) []*pg.Node {
	if where == nil {
		return nil
	}
	conj := []*pg.Node{where}
	if b := where.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		conj = b.Args
	}
	var out []*pg.Node
	for _, c := range conj {
		if simpleExpr(c) {
			out = append(out, c)
		}
	}
	return out
}

func simpleExpr(n *pg.Node) bool {
	if n == nil {
		return true
	}
	switch {
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		return len(f) > 0 && f[len(f)-1].GetAStar() == nil
	case n.GetAConst() != nil:
		return true
	case n.GetAExpr() != nil:
		return simpleExpr(n.GetAExpr().Lexpr) && simpleExpr(n.GetAExpr().Rexpr)
	case n.GetList() != nil:
		for _, it := range n.GetList().Items {
			if !simpleExpr(it) {
				return false
			}
		}
		return true
	case n.GetBoolExpr() != nil:
		for _, a := range n.GetBoolExpr().Args {
			if !simpleExpr(a) {
				return false
			}
		}
		return true
	case n.GetNullTest() != nil:
		return simpleExpr(n.GetNullTest().Arg)
	case n.GetTypeCast() != nil:
		return simpleExpr(n.GetTypeCast().Arg)
	case n.GetCollateClause() != nil:
		return simpleExpr(n.GetCollateClause().Arg)
	}
	return false
}

// refsResolve reports whether every column reference of n names a column
// of cols.
func refsResolve(n *pg.Node, e *env) bool {
	if n == nil {
		return true
	}
	switch {
	case n.GetColumnRef() != nil:
		_, err := e.resolve(names(n.GetColumnRef().Fields))
		return err == nil
	case n.GetAExpr() != nil:
		return refsResolve(n.GetAExpr().Lexpr, e) && refsResolve(n.GetAExpr().Rexpr, e)
	case n.GetList() != nil:
		for _, it := range n.GetList().Items {
			if !refsResolve(it, e) {
				return false
			}
		}
	case n.GetBoolExpr() != nil:
		for _, a := range n.GetBoolExpr().Args {
			if !refsResolve(a, e) {
				return false
			}
		}
	case n.GetNullTest() != nil:
		return refsResolve(n.GetNullTest().Arg, e)
	case n.GetTypeCast() != nil:
		return refsResolve(n.GetTypeCast().Arg, e)
	case n.GetCollateClause() != nil:
		return refsResolve(n.GetCollateClause().Arg, e)
	}
	return true
}

// scanLakeFiltered scans a lake or temp table applying the filters that
// name only its columns while rows stream out of the catalog. ok is false
// when rv is not such a table (a CTE, a system relation).
func (x *exec) scanLakeFiltered(rv *pg.RangeVar, filters []*pg.Node) (*rel, bool, error) {
	t, qual, ok, err := x.storedTable(rv)
	if !ok || err != nil {
		return nil, ok, err
	}
	e := &env{cols: tableCols(t, qual)}
	var mine []*pg.Node
	for _, f := range filters {
		if refsResolve(f, e) && hasColumnRef(f) {
			mine = append(mine, f)
		}
	}
	if len(mine) == 0 {
		r, err := tableRelFiltered(t, qual, nil, nil)
		return r, true, err
	}
	r, err := tableRelFiltered(t, qual, x.intFilters(e.cols, mine...), func(row []datum.Value) bool {
		e.row = row
		for _, f := range mine {
			ok, err := x.condition("WHERE", f, e)
			if err != nil {
				return true // the WHERE clause decides, and reports
			}
			if !ok {
				return false
			}
		}
		return true
	})
	return r, true, err
}

func (x *exec) prefilter(r *rel, filters []*pg.Node) (*rel, error) {
	e := &env{cols: r.cols}
	var mine []*pg.Node
	for _, f := range filters {
		if refsResolve(f, e) && hasColumnRef(f) {
			mine = append(mine, f)
		}
	}
	if len(mine) == 0 {
		return r, nil
	}
	// An equality with a constant usually keeps the fewest rows: test it
	// first, and the rest only on the rows it keeps.
	slices.SortStableFunc(mine, func(a, b *pg.Node) int {
		return boolInt(!isConstEquality(a)) - boolInt(!isConstEquality(b))
	})
	out := &rel{cols: r.cols}
	rows := r.rows
	if r.ix != nil && isConstEquality(mine[0]) {
		// A shared catalog relation: the rows the equality can keep come
		// from an index of its column (the filters still run on them).
		if cand, ok := x.indexedRows(r, mine[0], e); ok {
			rows = cand
		}
	}
	for _, row := range rows {
		e.row = row
		keep := true
		for _, f := range mine {
			ok, err := x.condition("WHERE", f, e)
			if err != nil {
				// Leave the decision (and the error) to the WHERE clause.
				break
			}
			if !ok {
				keep = false
				break
			}
		}
		if keep {
			out.rows = append(out.rows, row)
		}
	}
	return out, nil
}

// indexedRows returns the rows of the shared relation r whose column equals
// the constant of the equality f, through the relation's index of that
// column; ok false when the column has no index or the constant does not
// convert to its type.
func (x *exec) indexedRows(r *rel, f *pg.Node, e *env) ([][]datum.Value, bool) {
	a := f.GetAExpr()
	col, cst := a.Lexpr, a.Rexpr
	if col.GetColumnRef() == nil {
		col, cst = cst, col
	}
	i, err := e.resolve(names(col.GetColumnRef().Fields))
	if err != nil {
		return nil, false
	}
	v, err := x.constValue(cst.GetAConst())
	if err != nil || v.v.IsNull() {
		return nil, false
	}
	t := r.cols[i].typ
	if v.t == unknownType {
		cv, err := coerce(v, t)
		if err != nil {
			return nil, false
		}
		v = tv{cv, t}
	} else if v.t.Kind() != t.Kind() {
		return nil, false
	}
	var hits []int
	switch t.Kind() {
	case datum.KindText:
		if t.OID == datum.OIDBPChar {
			return nil, false // blank-padded: equal values differ in bytes
		}
		ix, ok := r.ix.textIndex(r.rows, i)
		if !ok {
			return nil, false
		}
		hits = ix.get(v.v.S)
	case datum.KindInt:
		ix, ok := r.ix.intIndex(r.rows, i)
		if !ok {
			return nil, false
		}
		hits = ix.get(v.v.I)
	default:
		return nil, false
	}
	out := make([][]datum.Value, len(hits))
	for k, h := range hits {
		out[k] = r.rows[h]
	}
	return out, true
}

// isConstEquality reports whether n is column = constant (either way
// round).
func isConstEquality(n *pg.Node) bool {
	a := n.GetAExpr()
	if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || opName(a.Name) != "=" || a.Lexpr == nil || a.Rexpr == nil {
		return false
	}
	return a.Lexpr.GetColumnRef() != nil && a.Rexpr.GetAConst() != nil ||
		a.Rexpr.GetColumnRef() != nil && a.Lexpr.GetAConst() != nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hasColumnRef(n *pg.Node) bool {
	if n == nil {
		return false
	}
	switch {
	case n.GetColumnRef() != nil:
		return true
	case n.GetAExpr() != nil:
		return hasColumnRef(n.GetAExpr().Lexpr) || hasColumnRef(n.GetAExpr().Rexpr)
	case n.GetBoolExpr() != nil:
		for _, a := range n.GetBoolExpr().Args {
			if hasColumnRef(a) {
				return true
			}
		}
	case n.GetNullTest() != nil:
		return hasColumnRef(n.GetNullTest().Arg)
	case n.GetTypeCast() != nil:
		return hasColumnRef(n.GetTypeCast().Arg)
	case n.GetCollateClause() != nil:
		return hasColumnRef(n.GetCollateClause().Arg)
	}
	return false
}
