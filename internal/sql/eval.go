package sql

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
)

// exec evaluates one statement for a session.
type exec struct {
	ctx    context.Context
	s      *Session
	params []tv
	ctes   map[string]*rel
	lits   *boundLits // literals bound onto a template tree (parse.go)
	text   string     // the statement's text (stmt.text)
	// subqueries memoizes uncorrelated subqueries for the statement: the
	// latest-snapshot template compares every row with (SELECT MAX(…)),
	// which must not be re-run per row.
	subqueries map[*pg.SubLink]*rel
	correlated map[*pg.SubLink]bool
	outer      *env // the enclosing row of the SELECT being evaluated (FROM functions read it)
	// matched is the session's scratch while an UPDATE or DELETE runs (nil
	// otherwise): the rows it reads to match and the new values it hands
	// the catalog live only until the statement ends.
	matched *valueScratch
	// work counts the statement's rows and steps (work.go).
	work work
	// pruning tells a SELECT's joins which columns to keep, nil when they
	// keep every column (prune.go).
	pruning *pruning
	// inLists memoizes the coerced string literals of IN lists
	// (stringList); a nil entry: the list does not qualify. consts
	// memoizes literals compared with typed values (coercedConst).
	inLists map[inListKey][]string
	consts  map[constKey]tv
	// catalog memoizes catalogID for the view it was computed for: a
	// catalog read names several catalogs, and each asks.
	catalog struct {
		v  *memcat.Version
		id catalogID
		ok bool
	}
}

// valueScratch hands out value buffers from chunks that an UPDATE or DELETE
// of the session reuses once the one before it ended: DuckLake's commits
// update nine statistics rows each, and the buffers a match needs (the row
// read through the index, the row being evaluated, the new values) were
// most of what those statements allocated.
//
// INVARIANT: a buffer is dead once the statement that took it ends. Only
// an UPDATE or DELETE takes buffers — for matchRows, for its index lookups,
// and for key lookups of the subqueries it evaluates (indexedFrom, whose
// results live in the statement's memo) — and nothing they produce
// outlives it: the catalog encodes the values it is given, a temp table's
// new values are allocated apart, values are copied out of buffers by
// value, and an UPDATE or DELETE returns only its command tag.
type valueScratch struct{ buf []datum.Value }

// take returns n zeroed values.
func (s *valueScratch) take(n int) []datum.Value {
	if len(s.buf)+n > cap(s.buf) {
		// The full chunk stays with the buffers already handed out; later
		// statements reuse the new one.
		s.buf = make([]datum.Value, 0, max(2*cap(s.buf), n, 64))
	}
	v := s.buf[len(s.buf) : len(s.buf)+n : len(s.buf)+n]
	s.buf = s.buf[:len(s.buf)+n]
	return v
}

// reset makes the chunk reusable, dropping what its values referenced.
func (s *valueScratch) reset() {
	clear(s.buf)
	s.buf = s.buf[:0]
}

// matchBuf returns n zeroed values for matching rows: from the scratch in an
// UPDATE or DELETE, else newly allocated.
func (x *exec) matchBuf(n int) []datum.Value {
	if x.matched == nil {
		return make([]datum.Value, n)
	}
	return x.matched.take(n)
}

// endMatch ends an UPDATE's or DELETE's use of the scratch.
func (x *exec) endMatch() {
	x.matched.reset()
	x.matched = nil
}

// constValue reads a literal, through the statement's bindings when its
// tree is a shared template.
func (x *exec) constValue(c *pg.A_Const) (tv, error) {
	if v, ok := x.lits.get(c); ok {
		return v, nil
	}
	return constValue(c)
}

// stringList returns the items of an IN list as strings of type t when t
// compares as plain bytes (text, varchar, name, "char") and every item is a
// string literal, which it coerces to t once per statement: catalog reads
// test relkind and contype against such lists on every row.
func (x *exec) stringList(list *pg.List, t datum.Type) ([]string, bool) {
	switch t.OID {
	case datum.OIDText, datum.OIDVarchar, datum.OIDName, datum.OIDChar:
	default:
		return nil, false
	}
	k := inListKey{list, t}
	if set, ok := x.inLists[k]; ok {
		return set, set != nil
	}
	var set []string
	for _, it := range list.Items {
		c := it.GetAConst()
		if c == nil || c.GetSval() == nil {
			set = nil
			break
		}
		v, err := x.constValue(c)
		if err != nil || v.t != unknownType || v.v.IsNull() {
			set = nil
			break
		}
		cv, err := coerce(v, t)
		if err != nil {
			set = nil
			break
		}
		set = append(set, cv.S)
	}
	if x.inLists == nil {
		x.inLists = map[inListKey][]string{}
	}
	x.inLists[k] = set
	return set, set != nil
}

type inListKey struct {
	list *pg.List
	t    datum.Type
}

// coercedConst returns the literal n (evaluated as v) as a value of type t,
// coerced once per statement; v itself when n is not a literal or does not
// convert (the comparison then reports the error as it would).
func (x *exec) coercedConst(n *pg.Node, v tv, t datum.Type) tv {
	c := n.GetAConst()
	if c == nil {
		return v
	}
	k := constKey{c, t}
	if cv, ok := x.consts[k]; ok {
		return cv
	}
	out := v
	if cv, err := coerce(v, t); err == nil {
		out = tv{cv, t}
	}
	if x.consts == nil {
		x.consts = map[constKey]tv{}
	}
	x.consts[k] = out
	return out
}

type constKey struct {
	c *pg.A_Const
	t datum.Type
}

func (x *exec) eval(n *pg.Node, e *env) (tv, error) {
	if n == nil {
		return tv{}, unsupported("an empty expression")
	}
	switch {
	case n.GetColumnRef() != nil:
		cr := n.GetColumnRef()
		if i, ok := e.slots[cr]; ok && e.row != nil {
			return tv{e.row[i], e.cols[i].typ}, nil
		}
		if len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return tv{}, unsupported("* in this position")
		}
		return e.lookupRef(cr)
	case n.GetAConst() != nil:
		return x.constValue(n.GetAConst())
	case n.GetTypeCast() != nil:
		return x.evalCast(n.GetTypeCast(), e)
	case n.GetAExpr() != nil:
		return x.evalAExpr(n.GetAExpr(), e)
	case n.GetBoolExpr() != nil:
		return x.evalBool(n.GetBoolExpr(), e)
	case n.GetNullTest() != nil:
		nt := n.GetNullTest()
		a, err := x.eval(nt.Arg, e)
		if err != nil {
			return tv{}, err
		}
		isNull := a.v.IsNull()
		if nt.Nulltesttype == pg.NullTestType_IS_NOT_NULL {
			return boolTV(!isNull), nil
		}
		return boolTV(isNull), nil
	case n.GetCollateClause() != nil:
		return x.eval(n.GetCollateClause().Arg, e)
	case n.GetFuncCall() != nil:
		return x.evalFunc(n.GetFuncCall(), e)
	case n.GetSubLink() != nil:
		return x.evalSubLink(n.GetSubLink(), e)
	case n.GetCoalesceExpr() != nil:
		var last tv
		for _, a := range n.GetCoalesceExpr().Args {
			v, err := x.eval(a, e)
			if err != nil {
				return tv{}, err
			}
			if !v.v.IsNull() {
				return v, nil
			}
			last = v
		}
		return last, nil
	case n.GetCaseExpr() != nil:
		return x.evalCase(n.GetCaseExpr(), e)
	case n.GetParamRef() != nil:
		i := int(n.GetParamRef().Number) - 1
		if i < 0 || i >= len(x.params) {
			return tv{}, errf(pgcode.UndefinedParameter, "there is no parameter $%d", i+1)
		}
		return x.params[i], nil
	case n.GetSqlvalueFunction() != nil:
		switch n.GetSqlvalueFunction().Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N:
			return tv{datum.TimestampTZValue(x.s.txStartMicros()), datum.TimestampTZ}, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER, pg.SQLValueFunctionOp_SVFOP_USER:
			return tv{datum.TextValue(x.s.user), datum.Name}, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return tv{datum.TextValue(x.s.dbName), datum.Name}, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return tv{datum.TextValue(x.s.searchSchema()), datum.Name}, nil
		}
		return tv{}, unsupported("SQL value function %s", n.GetSqlvalueFunction().Op)
	case n.GetAArrayExpr() != nil:
		return tv{}, unsupported("ARRAY[...] expressions")
	}
	return tv{}, unsupported("expression %s", nodeKind(n))
}

// nodeKind names a parse node's type for error messages.
func nodeKind(n *pg.Node) string {
	if n == nil || n.Node == nil {
		return "(empty)"
	}
	s := fmt.Sprintf("%T", n.Node)
	s = strings.TrimPrefix(s, "*pg_query.Node_")
	return s
}

func (x *exec) evalCast(c *pg.TypeCast, e *env) (tv, error) {
	t, err := typeFromName(c.TypeName)
	if err != nil {
		return tv{}, err
	}
	a, err := x.eval(c.Arg, e)
	if err != nil {
		return tv{}, err
	}
	if t.OID == datum.OIDRegclass {
		if a.v.IsNull() {
			return tv{datum.Null, t}, nil
		}
		if a.v.K == datum.KindInt {
			return tv{a.v, t}, nil
		}
		oid, ok := x.regclass(a.v.S)
		if !ok {
			return tv{}, errf(pgcode.UndefinedTable, "relation %q does not exist", a.v.S)
		}
		return tv{datum.IntValue(int64(oid)), t}, nil
	}
	v, err := coerce(a, t)
	if err != nil {
		return tv{}, err
	}
	return tv{v, t}, nil
}

func (x *exec) evalBool(b *pg.BoolExpr, e *env) (tv, error) {
	switch b.Boolop {
	case pg.BoolExprType_NOT_EXPR:
		a, err := x.eval(b.Args[0], e)
		if err != nil {
			return tv{}, err
		}
		if a.v.IsNull() {
			return nullBool, nil
		}
		return boolTV(a.v.I == 0), nil
	case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
		return fold3(len(b.Args), b.Boolop == pg.BoolExprType_OR_EXPR, func(i int) (tv, error) {
			return x.eval(b.Args[i], e)
		})
	}
	return tv{}, unsupported("boolean operator %s", b.Boolop)
}

// fold3 folds n three-valued booleans as SQL's OR (decisive true) or AND
// (decisive false) does — and so ANY, ALL and IN, which are an OR or an
// AND of comparisons: the first value equal to decisive is the result and
// ends the evaluation; otherwise NULL if any value was NULL, else
// !decisive. at(i) yields the values in order.
func fold3(n int, decisive bool, at func(i int) (tv, error)) (tv, error) {
	sawNull := false
	for i := range n {
		c, err := at(i)
		if err != nil {
			return tv{}, err
		}
		if c.v.IsNull() {
			sawNull = true
		} else if (c.v.I != 0) == decisive {
			return boolTV(decisive), nil
		}
	}
	if sawNull {
		return nullBool, nil
	}
	return boolTV(!decisive), nil
}

func opName(ns []*pg.Node) string {
	if len(ns) == 0 {
		return ""
	}
	return nodeName(ns[len(ns)-1])
}

func (x *exec) evalAExpr(a *pg.A_Expr, e *env) (tv, error) {
	op := opName(a.Name)
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			r, err := x.eval(a.Rexpr, e)
			if err != nil {
				return tv{}, err
			}
			if op == "-" && r.v.K == datum.KindInt {
				return intArith("-", tv{datum.IntValue(0), r.t}, r)
			}
			if op == "-" && r.v.K == datum.KindNumeric {
				s := r.v.S
				if strings.HasPrefix(s, "-") {
					s = s[1:]
				} else {
					s = "-" + s
				}
				return tv{datum.NumericValue(s), r.t}, nil
			}
			return tv{}, unsupported("prefix operator %s", op)
		}
		l, err := x.eval(a.Lexpr, e)
		if err != nil {
			return tv{}, err
		}
		r, err := x.eval(a.Rexpr, e)
		if err != nil {
			return tv{}, err
		}
		switch op {
		case "=", "<>", "!=", "<", "<=", ">", ">=":
			// A string literal compared with a typed value takes the value's
			// type; the conversion is the same on every row.
			if r.t == unknownType && l.t != unknownType && !r.v.IsNull() {
				r = x.coercedConst(a.Rexpr, r, l.t)
			} else if l.t == unknownType && r.t != unknownType && !l.v.IsNull() {
				l = x.coercedConst(a.Lexpr, l, r.t)
			}
			return compareOp(op, l, r)
		case "~", "!~":
			if l.v.IsNull() || r.v.IsNull() {
				return nullBool, nil
			}
			re, err := regexp.Compile(r.v.S)
			if err != nil {
				return tv{}, errf(pgcode.InvalidRegularExpression, "invalid regular expression: %v", err)
			}
			m := re.MatchString(l.v.S)
			return boolTV(m == (op == "~")), nil
		case "~~", "!~~":
			if l.v.IsNull() || r.v.IsNull() {
				return nullBool, nil
			}
			m, err := likeMatchInterruptible(l.v.S, r.v.S, x.interrupt)
			if err != nil {
				return tv{}, err
			}
			return boolTV(m == (op == "~~")), nil
		case "+", "-":
			if l.v.IsNull() || r.v.IsNull() {
				return tv{datum.Null, l.t}, nil
			}
			if l.v.K == datum.KindInt && r.v.K == datum.KindInt {
				return intArith(op, l, r)
			}
		case "||":
			if l.t.Kind() == datum.KindArray || r.t.Kind() == datum.KindArray {
				return arrayConcat(l, r)
			}
			if l.v.IsNull() || r.v.IsNull() {
				return tv{datum.Null, datum.Text}, nil
			}
			return tv{datum.TextValue(datum.FormatText(l.t, l.v) + datum.FormatText(r.t, r.v)), datum.Text}, nil
		}
		return tv{}, unsupported("operator %s", op)
	case pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
		l, err := x.eval(a.Lexpr, e)
		if err != nil {
			return tv{}, err
		}
		r, err := x.eval(a.Rexpr, e)
		if err != nil {
			return tv{}, err
		}
		if r.v.IsNull() {
			return nullBool, nil
		}
		if r.t.Kind() != datum.KindArray {
			return tv{}, unsupported("%s ANY/ALL over %s", op, outType(r.t))
		}
		elems, err := datum.ArrayElems(r.t, r.v)
		if err != nil {
			return tv{}, err
		}
		return fold3(len(elems), a.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY, func(i int) (tv, error) {
			return compareOp(op, l, tv{elems[i], r.t.Elem()})
		})
	case pg.A_Expr_Kind_AEXPR_IN:
		l, err := x.eval(a.Lexpr, e)
		if err != nil {
			return tv{}, err
		}
		list := a.Rexpr.GetList()
		if list == nil {
			return tv{}, unsupported("IN without a list")
		}
		if set, ok := x.stringList(list, l.t); ok && !l.v.IsNull() {
			in := slices.Contains(set, l.v.S)
			return boolTV(in == (op == "=")), nil
		}
		in, err := fold3(len(list.Items), true, func(i int) (tv, error) {
			r, err := x.eval(list.Items[i], e)
			if err != nil {
				return tv{}, err
			}
			return compareOp("=", l, r)
		})
		if err != nil || op == "=" || in.v.IsNull() {
			return in, err
		}
		return boolTV(in.v.I == 0), nil // NOT IN
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		l, err := x.eval(a.Lexpr, e)
		if err != nil {
			return tv{}, err
		}
		r, err := x.eval(a.Rexpr, e)
		if err != nil {
			return tv{}, err
		}
		if l.v.IsNull() || r.v.IsNull() {
			return nullBool, nil
		}
		s, p := l.v.S, r.v.S
		if a.Kind == pg.A_Expr_Kind_AEXPR_ILIKE {
			s, p = strings.ToLower(s), strings.ToLower(p)
		}
		m, err := likeMatchInterruptible(s, p, x.interrupt)
		if err != nil {
			return tv{}, err
		}
		return boolTV(m == (op == "~~" || op == "~~*")), nil
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		l, err := x.eval(a.Lexpr, e)
		if err != nil {
			return tv{}, err
		}
		list := a.Rexpr.GetList()
		lo, err := x.eval(list.Items[0], e)
		if err != nil {
			return tv{}, err
		}
		hi, err := x.eval(list.Items[1], e)
		if err != nil {
			return tv{}, err
		}
		c1, err := compareOp(">=", l, lo)
		if err != nil {
			return tv{}, err
		}
		c2, err := compareOp("<=", l, hi)
		if err != nil {
			return tv{}, err
		}
		if c1.v.IsNull() || c2.v.IsNull() {
			return nullBool, nil
		}
		in := c1.v.I != 0 && c2.v.I != 0
		return boolTV(in == (a.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN)), nil
	}
	return tv{}, unsupported("operator expression of kind %s", a.Kind)
}

func (x *exec) evalCase(c *pg.CaseExpr, e *env) (tv, error) {
	var arg tv
	var err error
	if c.Arg != nil {
		if arg, err = x.eval(c.Arg, e); err != nil {
			return tv{}, err
		}
	}
	var resT datum.Type
	for _, w := range c.Args {
		cw := w.GetCaseWhen()
		var ok bool
		if c.Arg != nil {
			v, err := x.eval(cw.Expr, e)
			if err != nil {
				return tv{}, err
			}
			r, err := compareOp("=", arg, v)
			if err != nil {
				return tv{}, err
			}
			ok = truth(r)
		} else {
			v, err := x.eval(cw.Expr, e)
			if err != nil {
				return tv{}, err
			}
			ok = truth(v)
		}
		if ok {
			r, err := x.eval(cw.Result, e)
			if err != nil {
				return tv{}, err
			}
			return r, nil
		}
		if resT.OID == 0 {
			if lit := cw.Result.GetAConst(); lit != nil && lit.GetSval() != nil {
				resT = datum.Text
			}
		}
	}
	if c.Defresult != nil {
		return x.eval(c.Defresult, e)
	}
	if resT.OID == 0 {
		resT = datum.Text
	}
	return tv{datum.Null, resT}, nil
}

func (x *exec) evalSubLink(sl *pg.SubLink, e *env) (tv, error) {
	sel := sl.Subselect.GetSelectStmt()
	if sel == nil {
		return tv{}, unsupported("subquery that is not a SELECT")
	}
	r, err := x.subquery(sl, sel, e)
	if err != nil {
		return tv{}, err
	}
	switch sl.SubLinkType {
	case pg.SubLinkType_EXPR_SUBLINK:
		if len(r.cols) != 1 {
			return tv{}, errf(pgcode.SyntaxError, "subquery must return only one column")
		}
		t := outType(r.cols[0].typ)
		switch len(r.rows) {
		case 0:
			return tv{datum.Null, t}, nil
		case 1:
			return tv{r.rows[0][0], t}, nil
		}
		return tv{}, errf(pgcode.CardinalityViolation, "more than one row returned by a subquery used as an expression")
	case pg.SubLinkType_EXISTS_SUBLINK:
		return boolTV(len(r.rows) > 0), nil
	case pg.SubLinkType_ARRAY_SUBLINK:
		if len(r.cols) != 1 {
			return tv{}, errf(pgcode.SyntaxError, "subquery must return only one column")
		}
		elem := outType(r.cols[0].typ)
		if elem == datum.Name {
			elem = datum.Text // name[] is answered as text[] (psql's \du reads it as text)
		}
		at, ok := datum.ArrayOf(elem)
		if !ok {
			return tv{}, unsupported("ARRAY() of %s", elem)
		}
		vals := make([]datum.Value, len(r.rows))
		for i, row := range r.rows {
			vals[i] = row[0]
		}
		return tv{datum.ArrayValue(elem, vals), at}, nil
	case pg.SubLinkType_ANY_SUBLINK, pg.SubLinkType_ALL_SUBLINK:
		// x IN (SELECT …) and x op ANY/ALL (SELECT …) compare x with the
		// subquery's one column; IN names no operator and means =.
		if sl.Testexpr.GetRowExpr() != nil {
			return tv{}, unsupported("row comparison with a subquery")
		}
		switch {
		case len(r.cols) == 0:
			return tv{}, errf(pgcode.SyntaxError, "subquery has too few columns")
		case len(r.cols) > 1:
			return tv{}, errf(pgcode.SyntaxError, "subquery has too many columns")
		}
		op := "="
		if len(sl.OperName) > 0 {
			op = opName(sl.OperName)
		}
		l, err := x.eval(sl.Testexpr, e)
		if err != nil {
			return tv{}, err
		}
		// ANY is true at the first true comparison, ALL false at the first
		// false; otherwise a NULL comparison makes the answer NULL.
		return fold3(len(r.rows), sl.SubLinkType == pg.SubLinkType_ANY_SUBLINK, func(i int) (tv, error) {
			return compareOp(op, l, tv{r.rows[i][0], r.cols[0].typ})
		})
	}
	return tv{}, unsupported("subquery of kind %s", sl.SubLinkType)
}

// arrayConcat is array || array (array_cat): a NULL operand counts as
// empty.
func arrayConcat(l, r tv) (tv, error) {
	t := l.t
	if t.Kind() != datum.KindArray {
		t = r.t
	}
	if l.t.Kind() != datum.KindArray && !l.v.IsNull() || r.t.Kind() != datum.KindArray && !r.v.IsNull() {
		return tv{}, unsupported("|| between an array and a scalar")
	}
	if l.v.IsNull() && r.v.IsNull() {
		return tv{datum.Null, t}, nil
	}
	var out []datum.Value
	for _, side := range []tv{l, r} {
		if side.v.IsNull() {
			continue
		}
		el, err := datum.ArrayElems(side.t, side.v)
		if err != nil {
			return tv{}, err
		}
		out = append(out, el...)
	}
	return tv{datum.ArrayValue(t.Elem(), out), t}, nil
}

// subquery runs a subquery. One that runs without the enclosing row (it
// names no outer column) is uncorrelated: its result is computed once per
// statement. A correlated one runs per row.
func (x *exec) subquery(sl *pg.SubLink, sel *pg.SelectStmt, e *env) (*rel, error) {
	if r, ok := x.subqueries[sl]; ok {
		return r, nil
	}
	if !x.correlated[sl] {
		if r, err := x.runSelect(sel, nil); err == nil {
			if x.subqueries == nil {
				x.subqueries = map[*pg.SubLink]*rel{}
			}
			x.subqueries[sl] = r
			return r, nil
		}
		if x.correlated == nil {
			x.correlated = map[*pg.SubLink]bool{}
		}
		x.correlated[sl] = true
	}
	return x.runSelect(sel, e)
}

// outType is the type a result column reports: unknown becomes text.
func outType(t datum.Type) datum.Type {
	if t == unknownType {
		return datum.Text
	}
	return t
}

// isAggregate reports whether a function call is an aggregate moraine
// evaluates.
func isAggregate(fc *pg.FuncCall) bool {
	switch strings.ToLower(opName(fc.Funcname)) {
	case "count", "max", "min", "sum", "bool_and", "bool_or":
		return fc.Over == nil
	}
	return false
}

func (x *exec) evalFunc(fc *pg.FuncCall, e *env) (tv, error) {
	name := strings.ToLower(opName(fc.Funcname))
	if isAggregate(fc) {
		if e.aggs != nil {
			if r, ok := e.aggs[fc]; ok {
				return r, nil
			}
		}
		return tv{}, errf(pgcode.GroupingError, "aggregate functions are not allowed here")
	}
	if fc.Over != nil {
		return tv{}, unsupported("window functions")
	}
	if e != nil && e.probe {
		if t, ok := effectful[name]; ok {
			return tv{datum.Null, t}, nil
		}
	}
	args := make([]tv, len(fc.Args))
	for i, a := range fc.Args {
		v, err := x.eval(a, e)
		if err != nil {
			return tv{}, err
		}
		args[i] = v
	}
	return x.callFunc(name, args)
}

// effectful are the functions that act beyond their result, with their
// result types: a type probe (env.probe) must not run them.
var effectful = map[string]datum.Type{"pg_promote": datum.Bool, "set_config": datum.Text}

func (x *exec) callFunc(name string, args []tv) (tv, error) {
	argText := func(i int) (string, bool) {
		if i >= len(args) || args[i].v.IsNull() {
			return "", false
		}
		return datum.FormatText(args[i].t, args[i].v), true
	}
	switch name {
	case "now", "transaction_timestamp", "statement_timestamp":
		return tv{datum.TimestampTZValue(x.s.txStartMicros()), datum.TimestampTZ}, nil
	case "version":
		return tv{datum.TextValue(ServerVersionString), datum.Text}, nil
	case "current_database":
		return tv{datum.TextValue(x.s.dbName), datum.Name}, nil
	case "current_schema":
		return tv{datum.TextValue(x.s.searchSchema()), datum.Name}, nil
	case "current_user", "session_user":
		return tv{datum.TextValue(x.s.user), datum.Name}, nil
	case "pg_backend_pid":
		return tv{datum.IntValue(int64(x.s.pid)), datum.Int4}, nil
	case "pg_is_in_recovery":
		return tv{datum.BoolValue(x.s.ex.InStandby()), datum.Bool}, nil
	case "pg_promote":
		return x.promote(args)
	case "pg_table_size", "pg_relation_size", "pg_total_relation_size":
		if len(args) < 1 || args[0].v.IsNull() {
			return tv{datum.Null, datum.Int8}, nil
		}
		n, ok := x.relationSize(args[0].v.I)
		if !ok {
			return tv{datum.Null, datum.Int8}, nil
		}
		return tv{datum.IntValue(n), datum.Int8}, nil
	case "pg_database_size":
		name, ok := argText(0)
		if !ok {
			return tv{datum.Null, datum.Int8}, nil
		}
		n, found := x.databaseSize(name)
		if !found {
			return tv{}, errf(pgcode.InvalidCatalogName, "database %q does not exist", name)
		}
		return tv{datum.IntValue(n), datum.Int8}, nil
	case "pg_size_pretty":
		if len(args) < 1 || args[0].v.IsNull() {
			return tv{datum.Null, datum.Text}, nil
		}
		return tv{datum.TextValue(sizePretty(args[0].v.I)), datum.Text}, nil
	case "has_database_privilege":
		return tv{datum.BoolValue(true), datum.Bool}, nil
	case "set_config":
		// set_config(name, value, is_local): SET, as a function.
		name, ok := argText(0)
		if !ok {
			return tv{}, errf(pgcode.NullValueNotAllowed, "SET requires parameter name")
		}
		val, _ := argText(1)
		if err := x.s.assign(name, val); err != nil {
			return tv{}, err
		}
		return tv{datum.TextValue(val), datum.Text}, nil
	case "current_setting":
		s, ok := argText(0)
		if !ok {
			return tv{datum.Null, datum.Text}, nil
		}
		v, found := x.s.setting(s)
		if !found {
			if len(args) > 1 && truth(args[1]) {
				return tv{datum.Null, datum.Text}, nil
			}
			return tv{}, errf(pgcode.UndefinedObject, "unrecognized configuration parameter %q", s)
		}
		return tv{datum.TextValue(v), datum.Text}, nil
	case "to_regclass":
		s, ok := argText(0)
		if !ok {
			return tv{datum.Null, datum.Type{OID: datum.OIDRegclass, Mod: -1}}, nil
		}
		oid, found := x.regclass(s)
		if !found {
			return tv{datum.Null, datum.Type{OID: datum.OIDRegclass, Mod: -1}}, nil
		}
		return tv{datum.IntValue(int64(oid)), datum.Type{OID: datum.OIDRegclass, Mod: -1}}, nil
	case "pg_table_is_visible", "has_table_privilege", "has_schema_privilege":
		return boolTV(true), nil
	case "format_type":
		if len(args) < 1 || args[0].v.IsNull() {
			return tv{datum.Null, datum.Text}, nil
		}
		mod := int32(-1)
		if len(args) > 1 && !args[1].v.IsNull() {
			mod = int32(args[1].v.I)
		}
		t := datum.Type{OID: uint32(args[0].v.I), Mod: mod}
		if !t.Known() {
			return tv{datum.TextValue("???"), datum.Text}, nil
		}
		return tv{datum.TextValue(t.String()), datum.Text}, nil
	case "pg_get_userbyid":
		if len(args) > 0 && args[0].v.K == datum.KindInt && args[0].v.I == pgcatalog.DatabaseOwnerOID {
			return tv{datum.TextValue("pg_database_owner"), datum.Name}, nil
		}
		// Every object belongs to the bootstrap superuser, as in a fresh
		// cluster initialised with -U postgres.
		return tv{datum.TextValue("postgres"), datum.Name}, nil
	case "array_to_string":
		if len(args) < 2 || args[0].v.IsNull() || args[1].v.IsNull() {
			return tv{datum.Null, datum.Text}, nil
		}
		if args[0].t.Kind() != datum.KindArray {
			return tv{}, errf(pgcode.UndefinedFunction, "function array_to_string(%s, %s) does not exist", outType(args[0].t), outType(args[1].t))
		}
		elems, err := datum.ArrayElems(args[0].t, args[0].v)
		if err != nil {
			return tv{}, err
		}
		var parts []string
		for _, el := range elems {
			if !el.IsNull() {
				parts = append(parts, datum.FormatText(args[0].t.Elem(), el))
			}
		}
		return tv{datum.TextValue(strings.Join(parts, args[1].v.S)), datum.Text}, nil
	case "pg_get_indexdef", "pg_get_constraintdef":
		if len(args) < 1 || args[0].v.IsNull() {
			return tv{datum.Null, datum.Text}, nil
		}
		return tv{datum.TextValue(pgcatalog.IndexDef(x.s.view(), uint32(args[0].v.I), name == "pg_get_constraintdef", x.s.searchSchema())), datum.Text}, nil
	case "pg_encoding_to_char":
		return tv{datum.TextValue("UTF8"), datum.Name}, nil
	case "shobj_description":
		// A branch describes itself: psql's \l+ shows what it was forked
		// from and at which snapshot.
		if len(args) == 2 && !args[0].v.IsNull() && args[1].v.S == "pg_database" {
			if d, ok := x.branchDescription(uint32(args[0].v.I)); ok {
				return tv{datum.TextValue(d), datum.Text}, nil
			}
		}
		return tv{datum.Null, datum.Text}, nil
	case "obj_description", "col_description", "pg_get_expr", "pg_get_partkeydef":
		return tv{datum.Null, datum.Text}, nil
	case "lower", "upper":
		s, ok := argText(0)
		if !ok {
			return tv{datum.Null, datum.Text}, nil
		}
		if name == "lower" {
			s = strings.ToLower(s)
		} else {
			s = strings.ToUpper(s)
		}
		return tv{datum.TextValue(s), datum.Text}, nil
	case "length", "char_length":
		s, ok := argText(0)
		if !ok {
			return tv{datum.Null, datum.Int4}, nil
		}
		return tv{datum.IntValue(int64(len([]rune(s)))), datum.Int4}, nil
	}
	return tv{}, errf(pgcode.UndefinedFunction, "function %s does not exist", name)
}
