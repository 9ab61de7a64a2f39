package sql

import (
	"slices"

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
			if in, err = x.join(in, r, nil, nil, pg.JoinType_JOIN_INNER); err != nil {
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
	probe := &env{cols: in.cols, row: make([]datum.Value, len(in.cols)), outer: outer, probe: true}
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
