package sql

import (
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
)

// runSelect evaluates a SELECT over the session's view. outer is the scope
// of an enclosing query (nil at top level); moraine does not correlate
// subqueries, so outer is only consulted when a name is not found inside.
func (x *exec) runSelect(s *pg.SelectStmt, outer *env) (*rel, error) {
	savedOuter := x.outer
	x.outer = outer
	defer func() { x.outer = savedOuter }()
	if s.WithClause != nil {
		saved := x.ctes
		x.ctes = make(map[string]*rel, len(saved)+len(s.WithClause.Ctes))
		for k, v := range saved {
			x.ctes[k] = v
		}
		defer func() { x.ctes = saved }()
		if err := x.addCTEs(s.WithClause); err != nil {
			return nil, err
		}
	}
	if s.IntoClause != nil || len(s.LockingClause) > 0 || len(s.WindowClause) > 0 {
		return nil, unsupported("SELECT INTO, FOR UPDATE and WINDOW clauses")
	}
	if s.Op != pg.SetOperation_SETOP_NONE {
		return x.runSetOp(s, outer)
	}
	if len(s.ValuesLists) > 0 {
		return x.runValues(s.ValuesLists)
	}
	if len(s.GroupClause) > 0 || s.HavingClause != nil {
		return nil, unsupported("GROUP BY and HAVING")
	}
	if len(s.DistinctClause) > 0 {
		return nil, unsupported("SELECT DISTINCT")
	}
	// FROM
	if err := checkFromNames(s.FromClause); err != nil {
		return nil, err
	}
	var in *rel
	if r, ok, err := x.indexedFrom(s, outer); err != nil {
		return nil, err
	} else if ok {
		in = r
	} else if len(s.FromClause) == 0 {
		in = &rel{rows: [][]datum.Value{{}}}
	} else {
		pushed := pushable(s.WhereClause)
		for _, f := range s.FromClause {
			r, err := x.fromItemFiltered(f, pushed)
			if err != nil {
				return nil, err
			}
			if in == nil {
				in = r
				continue
			}
			if in, err = x.join(in, r, nil, pg.JoinType_JOIN_INNER); err != nil {
				return nil, err
			}
		}
	}
	// WHERE
	if s.WhereClause != nil {
		kept := in.rows[:0:0]
		e := &env{cols: in.cols, outer: outer}
		for _, row := range in.rows {
			if err := x.step(); err != nil {
				return nil, err
			}
			e.row = row
			ok, err := x.condition("WHERE", s.WhereClause, e)
			if err != nil {
				return nil, err
			}
			if ok {
				kept = append(kept, row)
			}
		}
		in = &rel{cols: in.cols, rows: kept}
	}
	// Target list.
	targets, err := x.expandTargets(s.TargetList, in.cols)
	if err != nil {
		return nil, err
	}
	var aggs []*pg.FuncCall
	for _, t := range targets {
		if t.expr != nil {
			collectAggs(t.expr, &aggs)
		}
	}
	out := &rel{cols: make([]colInfo, len(targets))}
	// Probe the result types on a row of NULLs, so that an empty result
	// still describes its columns.
	probe := &env{cols: in.cols, row: make([]datum.Value, len(in.cols)), outer: outer}
	if len(aggs) > 0 {
		probe.aggs = map[*pg.FuncCall]tv{}
		for _, fc := range aggs {
			r, err := x.aggregate(fc, &rel{cols: in.cols})
			if err != nil {
				return nil, err
			}
			probe.aggs[fc] = tv{datum.Null, r.t}
		}
	}
	for i, t := range targets {
		out.cols[i] = colInfo{name: t.name}
		if t.expr == nil {
			c := in.cols[t.col]
			out.cols[i] = colInfo{name: t.name, typ: c.typ, tableOID: c.tableOID, attnum: c.attnum}
			continue
		}
		v, err := x.eval(t.expr, probe)
		if err != nil {
			// A probe may fail where real rows do not (a NULL into a
			// strict path); the first real row decides then.
			out.cols[i].typ = unknownType
			continue
		}
		out.cols[i].typ = v.t
		if cr := t.expr.GetColumnRef(); cr != nil {
			if j, err := probe.resolve(names(cr.Fields)); err == nil {
				out.cols[i].tableOID, out.cols[i].attnum = in.cols[j].tableOID, in.cols[j].attnum
			}
		}
	}
	if len(aggs) > 0 {
		e := &env{cols: in.cols, row: make([]datum.Value, len(in.cols)), aggs: map[*pg.FuncCall]tv{}, outer: outer}
		for _, fc := range aggs {
			r, err := x.aggregate(fc, in)
			if err != nil {
				return nil, err
			}
			e.aggs[fc] = r
		}
		row := make([]datum.Value, len(targets))
		for i, t := range targets {
			if t.expr == nil {
				return nil, errf(pgcode.GroupingError, "column %q must appear in the GROUP BY clause or be used in an aggregate function", in.cols[t.col].name)
			}
			v, err := x.eval(t.expr, e)
			if err != nil {
				return nil, err
			}
			row[i] = v.v
		}
		out.rows = [][]datum.Value{row}
		return x.finish(s, out, nil, nil)
	}
	// Sort keys are evaluated on the input rows, before projection.
	keys, err := x.sortKeys(s.SortClause, targets, out)
	if err != nil {
		return nil, err
	}
	var sortVals [][]datum.Value
	e := &env{cols: in.cols, outer: outer}
	for _, row := range in.rows {
		e.row = row
		orow := make([]datum.Value, len(targets))
		for i, t := range targets {
			if t.expr == nil {
				orow[i] = row[t.col]
				continue
			}
			v, err := x.eval(t.expr, e)
			if err != nil {
				return nil, err
			}
			if out.cols[i].typ == unknownType && v.t != unknownType {
				out.cols[i].typ = v.t
			}
			orow[i] = v.v
		}
		if err := x.hold(orow); err != nil {
			return nil, err
		}
		out.rows = append(out.rows, orow)
		if len(keys) > 0 {
			sv := make([]datum.Value, len(keys))
			for k, key := range keys {
				if key.out >= 0 {
					sv[k] = orow[key.out]
					continue
				}
				v, err := x.eval(key.expr, e)
				if err != nil {
					return nil, err
				}
				sv[k] = v.v
			}
			sortVals = append(sortVals, sv)
		}
	}
	return x.finish(s, out, keys, sortVals)
}

// target is one output column: a column of the input (col, expr nil) or an
// expression.
type target struct {
	name string
	col  int
	expr *pg.Node
}

func (x *exec) expandTargets(list []*pg.Node, cols []colInfo) ([]target, error) {
	var out []target
	for _, n := range list {
		rt := n.GetResTarget()
		if rt == nil {
			return nil, unsupported("target %s", nodeKind(n))
		}
		if cr := rt.Val.GetColumnRef(); cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			qual := ""
			if len(cr.Fields) > 1 {
				qual = nodeName(cr.Fields[len(cr.Fields)-2])
			}
			for i, c := range cols {
				if c.hidden || (qual != "" && c.qual != qual) {
					continue
				}
				out = append(out, target{name: c.name, col: i})
			}
			continue
		}
		name := rt.Name
		if name == "" {
			name = figureColname(rt.Val)
		}
		out = append(out, target{name: name, expr: rt.Val})
	}
	return out, nil
}

// figureColname is PostgreSQL's FigureColname for the shapes moraine sees.
func figureColname(n *pg.Node) string {
	name, _ := figureColnameStrength(n)
	return name
}

// figureColnameStrength returns the name and how strongly the expression
// suggests it (2: a column, function or similar; 1: a type name or "case";
// 0: nothing), as PostgreSQL's FigureColnameInternal does.
func figureColnameStrength(n *pg.Node) (string, int) {
	switch {
	case n == nil:
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		if last := f[len(f)-1]; last.GetAStar() == nil {
			return nodeName(last), 2
		}
	case n.GetFuncCall() != nil:
		return opName(n.GetFuncCall().Funcname), 2
	case n.GetTypeCast() != nil:
		if s, st := figureColnameStrength(n.GetTypeCast().Arg); st > 1 {
			return s, st
		}
		ns := names(n.GetTypeCast().TypeName.Names)
		return ns[len(ns)-1], 1
	case n.GetCollateClause() != nil:
		return figureColnameStrength(n.GetCollateClause().Arg)
	case n.GetSubLink() != nil:
		sl := n.GetSubLink()
		switch sl.SubLinkType {
		case pg.SubLinkType_EXISTS_SUBLINK:
			return "exists", 2
		case pg.SubLinkType_ARRAY_SUBLINK:
			return "array", 2
		case pg.SubLinkType_EXPR_SUBLINK:
			if sel := sl.Subselect.GetSelectStmt(); sel != nil && len(sel.TargetList) > 0 {
				rt := sel.TargetList[0].GetResTarget()
				if rt.Name != "" {
					return rt.Name, 2
				}
				return figureColnameStrength(rt.Val)
			}
		}
	case n.GetCoalesceExpr() != nil:
		return "coalesce", 2
	case n.GetCaseExpr() != nil:
		if s, st := figureColnameStrength(n.GetCaseExpr().Defresult); st > 1 {
			return s, st
		}
		return "case", 1
	case n.GetAArrayExpr() != nil:
		return "array", 2
	case n.GetSqlvalueFunction() != nil:
		switch n.GetSqlvalueFunction().Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N:
			return "current_timestamp", 2
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER:
			return "current_user", 2
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return "current_schema", 2
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return "current_catalog", 2
		}
	}
	return "?column?", 0
}

func collectAggs(n *pg.Node, out *[]*pg.FuncCall) {
	if n == nil {
		return
	}
	if fc := n.GetFuncCall(); fc != nil {
		if isAggregate(fc) {
			*out = append(*out, fc)
			return
		}
		for _, a := range fc.Args {
			collectAggs(a, out)
		}
		return
	}
	switch {
	case n.GetTypeCast() != nil:
		collectAggs(n.GetTypeCast().Arg, out)
	case n.GetAExpr() != nil:
		collectAggs(n.GetAExpr().Lexpr, out)
		collectAggs(n.GetAExpr().Rexpr, out)
	case n.GetCoalesceExpr() != nil:
		for _, a := range n.GetCoalesceExpr().Args {
			collectAggs(a, out)
		}
	}
}

// aggregate computes one aggregate over all rows of in.
func (x *exec) aggregate(fc *pg.FuncCall, in *rel) (tv, error) {
	name := strings.ToLower(opName(fc.Funcname))
	if fc.AggDistinct || fc.AggFilter != nil || len(fc.AggOrder) > 0 {
		return tv{}, unsupported("DISTINCT, FILTER or ORDER BY in aggregate %s", name)
	}
	e := &env{cols: in.cols}
	if name == "count" {
		switch {
		case fc.AggStar:
			return tv{datum.IntValue(int64(len(in.rows))), datum.Int8}, nil
		case len(fc.Args) == 0:
			return tv{}, errf(pgcode.WrongObjectType, "count(*) must be used to call a parameterless aggregate function")
		case len(fc.Args) > 1:
			return tv{}, errf(pgcode.UndefinedFunction, "function %s does not exist", name)
		}
		n := int64(0)
		for _, row := range in.rows {
			e.row = row
			v, err := x.eval(fc.Args[0], e)
			if err != nil {
				return tv{}, err
			}
			if !v.v.IsNull() {
				n++
			}
		}
		return tv{datum.IntValue(n), datum.Int8}, nil
	}
	if len(fc.Args) != 1 {
		return tv{}, errf(pgcode.UndefinedFunction, "function %s does not exist", name)
	}
	// Type of the argument, even with no rows.
	e.row = make([]datum.Value, len(in.cols))
	pv, err := x.eval(fc.Args[0], e)
	if err != nil {
		return tv{}, err
	}
	resT := pv.t
	switch name {
	case "sum":
		if resT.Kind() == datum.KindInt {
			if resT == datum.Int8 {
				resT = datum.Numeric
			} else {
				resT = datum.Int8
			}
		}
	case "bool_and", "bool_or":
		resT = datum.Bool
	case "max", "min":
		// PostgreSQL has no max(varchar): it resolves to max(text).
		if resT.OID == datum.Varchar.OID {
			resT = datum.Text
		}
	}
	acc := tv{datum.Null, resT}
	var sum int64
	var wide *big.Int // the sum, once it no longer fits sum
	var any bool
	for _, row := range in.rows {
		e.row = row
		v, err := x.eval(fc.Args[0], e)
		if err != nil {
			return tv{}, err
		}
		if v.v.IsNull() {
			continue
		}
		switch name {
		case "max":
			if acc.v.IsNull() || datum.Compare(v.v, acc.v) > 0 {
				acc.v = v.v
			}
		case "min":
			if acc.v.IsNull() || datum.Compare(v.v, acc.v) < 0 {
				acc.v = v.v
			}
		case "sum":
			if v.v.K != datum.KindInt {
				return tv{}, unsupported("sum over %s", v.t)
			}
			if wide != nil {
				wide.Add(wide, big.NewInt(v.v.I))
			} else if s, ok := addInt64(sum, v.v.I); ok {
				sum = s
			} else {
				wide = new(big.Int).Add(big.NewInt(sum), big.NewInt(v.v.I))
			}
			any = true
		case "bool_and":
			if acc.v.IsNull() {
				acc.v = v.v
			} else if v.v.I == 0 {
				acc.v = v.v
			}
		case "bool_or":
			if acc.v.IsNull() || v.v.I != 0 {
				acc.v = v.v
			}
		}
	}
	if name == "sum" && any {
		// sum(int8) is numeric and cannot overflow; sum(int2/int4) is
		// int8, and past it PostgreSQL fails with 22003.
		switch {
		case resT == datum.Numeric && wide != nil:
			acc.v = datum.NumericValue(wide.String())
		case resT == datum.Numeric:
			acc.v = datum.NumericValue(strconv.FormatInt(sum, 10))
		case wide != nil:
			return tv{}, asPg(datum.IntRangeError(resT))
		default:
			acc.v = datum.IntValue(sum)
		}
	}
	return acc, nil
}

// sortKey is one ORDER BY item: an output column (out ≥ 0) or an
// expression over the input row.
type sortKey struct {
	out        int
	expr       *pg.Node
	desc       bool
	nullsFirst bool
}

func (x *exec) sortKeys(clause []*pg.Node, targets []target, out *rel) ([]sortKey, error) {
	var keys []sortKey
	for _, n := range clause {
		sb := n.GetSortBy()
		if sb == nil {
			return nil, unsupported("ORDER BY item %s", nodeKind(n))
		}
		if len(sb.UseOp) > 0 {
			return nil, unsupported("ORDER BY ... USING")
		}
		k := sortKey{out: -1, expr: sb.Node, desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
		k.nullsFirst = k.desc
		switch sb.SortbyNulls {
		case pg.SortByNulls_SORTBY_NULLS_FIRST:
			k.nullsFirst = true
		case pg.SortByNulls_SORTBY_NULLS_LAST:
			k.nullsFirst = false
		}
		if c := sb.Node.GetAConst(); c != nil && c.GetIval() != nil {
			p := int(c.GetIval().Ival)
			if p < 1 || p > len(out.cols) {
				return nil, errf(pgcode.InvalidColumnReference, "ORDER BY position %d is not in select list", p)
			}
			k.out = p - 1
		} else if cr := sb.Node.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
			name := nodeName(cr.Fields[0])
			for i, c := range out.cols {
				if c.name != name {
					continue
				}
				if k.out < 0 {
					k.out = i
					continue
				}
				if len(targets) == len(out.cols) && !sameTarget(targets[k.out], targets[i]) {
					return nil, errf(pgcode.AmbiguousColumn, "ORDER BY %q is ambiguous", name)
				}
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// checkFromNames refuses a FROM list in which two items have one name
// (42712), as PostgreSQL does: a column qualified by it could mean either.
// Two tables without aliases clash unless both name different schemas.
func checkFromNames(from []*pg.Node) error {
	if len(from) < 2 && (len(from) == 0 || from[0].GetJoinExpr() == nil) {
		return nil // one name cannot clash (DuckLake's reads name one table)
	}
	type ref struct {
		name, schema string
		aliased      bool
	}
	var refs []ref
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		switch {
		case n.GetRangeVar() != nil:
			rv := n.GetRangeVar()
			if rv.Alias != nil {
				refs = append(refs, ref{name: rv.Alias.Aliasname, aliased: true})
			} else {
				refs = append(refs, ref{name: rv.Relname, schema: rv.Schemaname})
			}
		case n.GetRangeSubselect() != nil:
			if a := n.GetRangeSubselect().Alias; a != nil {
				refs = append(refs, ref{name: a.Aliasname, aliased: true})
			}
		case n.GetRangeFunction() != nil:
			if a := n.GetRangeFunction().Alias; a != nil {
				refs = append(refs, ref{name: a.Aliasname, aliased: true})
			}
		case n.GetJoinExpr() != nil:
			j := n.GetJoinExpr()
			if j.Alias != nil {
				refs = append(refs, ref{name: j.Alias.Aliasname, aliased: true})
				return
			}
			walk(j.Larg)
			walk(j.Rarg)
		}
	}
	for _, f := range from {
		walk(f)
	}
	for i, a := range refs {
		for _, b := range refs[:i] {
			if a.name == b.name && (a.aliased || b.aliased || a.schema == b.schema || a.schema == "" || b.schema == "") {
				return errf(pgcode.DuplicateAlias, "table name %q specified more than once", a.name)
			}
		}
	}
	return nil
}

// sameTarget reports whether two output columns of one name are one
// expression, so that ORDER BY the name is not ambiguous: the same column
// twice from *, or the same column reference written twice. A column
// from * beside a reference of its name counts as the same (moraine does
// not tell a join's two like-named columns apart there, PostgreSQL does).
func sameTarget(a, b target) bool {
	switch {
	case a.expr == nil && b.expr == nil:
		return a.col == b.col
	case a.expr == nil || b.expr == nil:
		return true
	}
	ca, cb := a.expr.GetColumnRef(), b.expr.GetColumnRef()
	return ca != nil && cb != nil && slices.Equal(names(ca.Fields), names(cb.Fields))
}

func compareKeys(keys []sortKey, a, b []datum.Value) int {
	for i, k := range keys {
		x, y := a[i], b[i]
		var c int
		switch {
		case x.IsNull() && y.IsNull():
			c = 0
		case x.IsNull():
			c = 1
			if k.nullsFirst {
				c = -1
			}
			return c
		case y.IsNull():
			c = -1
			if k.nullsFirst {
				c = 1
			}
			return c
		default:
			c = datum.Compare(x, y)
			if k.desc {
				c = -c
			}
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// finish applies ORDER BY, OFFSET and LIMIT.
func (x *exec) finish(s *pg.SelectStmt, out *rel, keys []sortKey, sortVals [][]datum.Value) (*rel, error) {
	if len(keys) > 0 {
		idx := make([]int, len(out.rows))
		for i := range idx {
			idx[i] = i
		}
		// The sort looks at the statement's context as it compares; once
		// it has ended, every comparison answers "equal", so the sort runs
		// out at once and the statement ends with the context's error.
		var serr error
		slices.SortStableFunc(idx, func(a, b int) int {
			if serr != nil {
				return 0
			}
			if serr = x.step(); serr != nil {
				return 0
			}
			return compareKeys(keys, sortVals[a], sortVals[b])
		})
		if serr != nil {
			return nil, serr
		}
		rows := make([][]datum.Value, len(idx))
		for i, j := range idx {
			rows[i] = out.rows[j]
		}
		out.rows = rows
	}
	if s.LimitOffset != nil {
		n, err := x.limitValue(s.LimitOffset, "OFFSET", pgcode.InvalidRowCountInResultOffsetClause)
		if err != nil {
			return nil, err
		}
		if n >= 0 {
			out.rows = out.rows[min(int(n), len(out.rows)):]
		}
	}
	if s.LimitCount != nil {
		n, err := x.limitValue(s.LimitCount, "LIMIT", pgcode.InvalidRowCountInLimitClause)
		if err != nil {
			return nil, err
		}
		if n >= 0 && int(n) < len(out.rows) {
			out.rows = out.rows[:n]
		}
	}
	return out, nil
}

// limitValue is the count of a LIMIT or OFFSET clause (what, refused
// with code when negative); -1 for NULL, which is no limit.
func (x *exec) limitValue(n *pg.Node, what, code string) (int64, error) {
	v, err := x.eval(n, &env{})
	if err != nil {
		return 0, err
	}
	if v.v.IsNull() {
		return -1, nil
	}
	iv, err := coerce(v, datum.Int8)
	if err != nil {
		return 0, err
	}
	if iv.I < 0 {
		return 0, errf(code, "%s must not be negative", what)
	}
	return iv.I, nil
}

// runSetOp evaluates UNION [ALL].
func (x *exec) runSetOp(s *pg.SelectStmt, outer *env) (*rel, error) {
	if s.Op != pg.SetOperation_SETOP_UNION {
		return nil, unsupported("set operation %s (only UNION)", strings.TrimPrefix(s.Op.String(), "SETOP_"))
	}
	l, err := x.runSelect(s.Larg, outer)
	if err != nil {
		return nil, err
	}
	r, err := x.runSelect(s.Rarg, outer)
	if err != nil {
		return nil, err
	}
	if len(l.cols) != len(r.cols) {
		return nil, errf(pgcode.SyntaxError, "each UNION query must have the same number of columns")
	}
	out := &rel{cols: make([]colInfo, len(l.cols))}
	for i := range l.cols {
		t := l.cols[i].typ
		if t == unknownType {
			t = r.cols[i].typ
		}
		out.cols[i] = colInfo{name: l.cols[i].name, typ: outType(t)}
	}
	for _, side := range []*rel{l, r} {
		for _, row := range side.rows {
			nr := make([]datum.Value, len(row))
			for i, v := range row {
				if side.cols[i].typ != out.cols[i].typ {
					cv, err := coerce(tv{v, side.cols[i].typ}, out.cols[i].typ)
					if err != nil {
						return nil, err
					}
					v = cv
				}
				nr[i] = v
			}
			if err := x.hold(nr); err != nil {
				return nil, err
			}
			out.rows = append(out.rows, nr)
		}
	}
	if !s.All {
		// UNION without ALL: drop duplicate rows, keeping the first.
		seen := map[string]bool{}
		kept := out.rows[:0]
		for _, row := range out.rows {
			if err := x.step(); err != nil {
				return nil, err
			}
			var kb strings.Builder
			for i, v := range row {
				kb.WriteString(strconv.Itoa(int(v.K)))
				kb.WriteByte(':')
				kb.WriteString(datum.FormatText(out.cols[i].typ, v))
				kb.WriteByte(0)
			}
			k := kb.String()
			if !seen[k] {
				seen[k] = true
				kept = append(kept, row)
			}
		}
		out.rows = kept
	}
	var targets []target
	keys, err := x.sortKeys(s.SortClause, targets, out)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.out < 0 {
			return nil, unsupported("ORDER BY on an expression over UNION")
		}
	}
	var sv [][]datum.Value
	if len(keys) > 0 {
		sv = make([][]datum.Value, len(out.rows))
		for i, row := range out.rows {
			v := make([]datum.Value, len(keys))
			for j, k := range keys {
				v[j] = row[k.out]
			}
			sv[i] = v
		}
	}
	return x.finish(s, out, keys, sv)
}

// runValues evaluates a VALUES list (column1, column2, …).
func (x *exec) runValues(lists []*pg.Node) (*rel, error) {
	out := &rel{}
	for ri, l := range lists {
		items := l.GetList().GetItems()
		if ri == 0 {
			for i := range items {
				out.cols = append(out.cols, colInfo{name: "column" + strconv.Itoa(i+1), typ: unknownType})
			}
		} else if len(items) != len(out.cols) {
			return nil, errf(pgcode.SyntaxError, "VALUES lists must all be the same length")
		}
		row := make([]datum.Value, len(items))
		for i, it := range items {
			v, err := x.eval(it, &env{})
			if err != nil {
				return nil, err
			}
			if out.cols[i].typ == unknownType && !(v.t == unknownType) {
				out.cols[i].typ = v.t
			}
			row[i] = v.v
			if v.t != out.cols[i].typ && out.cols[i].typ != unknownType && !v.v.IsNull() && v.t != unknownType {
				// int4 then int8 in one column: widen.
				if cv, err := coerce(v, out.cols[i].typ); err == nil {
					row[i] = cv
				} else if v.t.Kind() == datum.KindInt && out.cols[i].typ.Kind() == datum.KindInt {
					out.cols[i].typ = datum.Int8
				}
			}
		}
		if err := x.hold(row); err != nil {
			return nil, err
		}
		out.rows = append(out.rows, row)
	}
	// Unknown literals in a VALUES column resolve to text.
	for i, c := range out.cols {
		if c.typ == unknownType {
			out.cols[i].typ = datum.Text
		}
	}
	return out, nil
}

func (x *exec) addCTEs(w *pg.WithClause) error {
	if w.Recursive {
		return unsupported("WITH RECURSIVE")
	}
	for _, n := range w.Ctes {
		cte := n.GetCommonTableExpr()
		sel := cte.Ctequery.GetSelectStmt()
		if sel == nil {
			return unsupported("a WITH query that is not a SELECT")
		}
		r, err := x.runSelect(sel, nil)
		if err != nil {
			return err
		}
		cols := slices.Clone(r.cols)
		alias := names(cte.Aliascolnames)
		if len(alias) > len(cols) {
			return errf(pgcode.InvalidColumnReference, "WITH query %q has %d columns available but %d columns specified", cte.Ctename, len(cols), len(alias))
		}
		for i := range cols {
			if i < len(alias) {
				cols[i].name = alias[i]
			}
			cols[i].qual = cte.Ctename
			cols[i].tableOID, cols[i].attnum = 0, 0
		}
		x.ctes[cte.Ctename] = &rel{cols: cols, rows: r.rows}
	}
	return nil
}

// fromItem evaluates one FROM clause item.
func (x *exec) fromItem(n *pg.Node) (*rel, error) { return x.fromItemFiltered(n, nil) }

// fromItemFiltered evaluates a FROM item, applying to each scanned table
// the WHERE conjuncts (filters) that only name its columns: the WHERE
// clause still runs afterwards, so this only makes joins smaller. Filters
// never reach the nullable side of a LEFT JOIN.
func (x *exec) fromItemFiltered(n *pg.Node, filters []*pg.Node) (*rel, error) {
	switch {
	case n.GetRangeVar() != nil:
		if len(filters) > 0 {
			if r, ok, err := x.scanLakeFiltered(n.GetRangeVar(), filters); ok || err != nil {
				return r, err
			}
		}
		r, err := x.scan(n.GetRangeVar())
		if err != nil || len(filters) == 0 {
			return r, err
		}
		return x.prefilter(r, filters)
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
		r, err := x.fromItemFiltered(j.Rarg, rf)
		if err != nil {
			return nil, err
		}
		return x.join(l, r, j.Quals, j.Jointype)
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
func (x *exec) join(l, r *rel, quals *pg.Node, jt pg.JoinType) (*rel, error) {
	switch jt {
	case pg.JoinType_JOIN_INNER, pg.JoinType_JOIN_LEFT:
	default:
		return nil, unsupported("join type %s", jt)
	}
	cols := append(slices.Clone(l.cols), r.cols...)
	out := &rel{cols: cols}
	li, ri := -1, -1
	if quals != nil {
		li, ri = equiJoinCols(quals, l.cols, r.cols)
	}
	var hash map[string][]int
	if li >= 0 {
		hash = make(map[string][]int, len(r.rows))
		for i, row := range r.rows {
			if row[ri].IsNull() {
				continue
			}
			k := joinKey(row[ri])
			hash[k] = append(hash[k], i)
		}
	}
	e := &env{cols: cols, row: make([]datum.Value, len(cols))}
	nulls := make([]datum.Value, len(r.cols))
	for _, lrow := range l.rows {
		matched := false
		try := func(rrow []datum.Value) error {
			if err := x.step(); err != nil {
				return err
			}
			copy(e.row, lrow)
			copy(e.row[len(lrow):], rrow)
			if quals != nil {
				if ok, err := x.condition("JOIN/ON", quals, e); err != nil || !ok {
					return err
				}
			}
			matched = true
			if err := x.hold(e.row); err != nil {
				return err
			}
			out.rows = append(out.rows, slices.Clone(e.row))
			return nil
		}
		if hash != nil {
			if !lrow[li].IsNull() {
				for _, i := range hash[joinKey(lrow[li])] {
					if err := try(r.rows[i]); err != nil {
						return nil, err
					}
				}
			}
		} else {
			for _, rrow := range r.rows {
				if err := try(rrow); err != nil {
					return nil, err
				}
			}
		}
		if !matched && jt == pg.JoinType_JOIN_LEFT {
			row := append(slices.Clone(lrow), nulls...)
			if err := x.hold(row); err != nil {
				return nil, err
			}
			out.rows = append(out.rows, row)
		}
	}
	return out, nil
}

// joinKey is a hash key under which equal values of joinable kinds meet.
func joinKey(v datum.Value) string {
	switch v.K {
	case datum.KindInt:
		return "i" + strconv.FormatInt(v.I, 10)
	case datum.KindText:
		return "t" + v.S
	}
	return strconv.Itoa(int(v.K)) + ":" + strconv.FormatInt(v.I, 10) + ":" + v.S
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
	out := &rel{cols: r.cols}
	for _, row := range r.rows {
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
