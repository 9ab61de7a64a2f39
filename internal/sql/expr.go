package sql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
)

// unknownType is PostgreSQL's "unknown": the type of a quoted literal until
// context decides (it becomes the other operand's type in a comparison, the
// column's type in an INSERT, and text in a result).
var unknownType = datum.Type{OID: 705, Mod: -1}

// colInfo describes one column of an intermediate relation.
type colInfo struct {
	qual     string // the range variable's name or alias
	name     string
	typ      datum.Type
	tableOID uint32 // for RowDescription: the base table, 0 if computed
	attnum   int16
	hidden   bool // ctid: addressable by name, not expanded by *
}

// rel is a materialized relation.
type rel struct {
	cols []colInfo
	rows [][]datum.Value
	// ix holds the join indexes of a relation shared by many statements
	// (a catalog relation of the relation cache); nil for the others.
	ix *relIndexes
}

// relIndexes are hash indexes of a catalog relation's integer and text
// columns, built the first time a join or an equality filter needs one:
// DuckDB's postgres extension joins a table's few rows of pg_class with all
// of pg_attribute and pg_type, and looking them up beats testing every
// row. The relation's leading rows that are PostgreSQL's own (pgcatalog's
// Relation.Sys) are indexed once for every build of the relation; its own
// rows per relation. Safe for concurrent use (the relation cache shares
// relations).
type relIndexes struct {
	name  string // schema.relation, naming the shared index of its PostgreSQL rows
	sys   int    // rows[:sys] are PostgreSQL's own
	mu    sync.Mutex
	ints  map[int]*rowLookup[int64]
	texts map[int]*rowLookup[string]
}

// rowLookup finds the rows whose column holds a value, in ascending order.
type rowLookup[K comparable] struct {
	sys, own map[K][]int
}

func (l *rowLookup[K]) get(k K) []int {
	a, b := l.sys[k], l.own[k]
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	return append(a[:len(a):len(a)], b...)
}

// sharedIndexes holds the indexes of PostgreSQL's own rows of each catalog
// relation and column, with the row they were built from first (the rows
// are the same slices in every build; a build that differs gets its own).
var sharedIndexes sync.Map // sharedKey → *sharedIndex

type sharedKey struct {
	name string
	col  int
	text bool
}

type sharedIndex struct {
	first *datum.Value
	ints  map[int64][]int
	texts map[string][]int
	ok    bool
}

// intIndex returns the lookup of integer column c of rows, ok false when
// the column holds something other than integers and NULLs.
func (x *relIndexes) intIndex(rows [][]datum.Value, c int) (*rowLookup[int64], bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l, ok := x.ints[c]; ok {
		return l, l != nil
	}
	var l *rowLookup[int64]
	if sys, ok := x.shared(rows, c, false); ok && allInts(rows[x.sys:], c) {
		l = &rowLookup[int64]{sys: sys.ints, own: intsOf(rows, c, x.sys)}
	}
	if x.ints == nil {
		x.ints = map[int]*rowLookup[int64]{}
	}
	x.ints[c] = l
	return l, l != nil
}

// textIndex is intIndex for a text column.
func (x *relIndexes) textIndex(rows [][]datum.Value, c int) (*rowLookup[string], bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l, ok := x.texts[c]; ok {
		return l, l != nil
	}
	var l *rowLookup[string]
	if sys, ok := x.shared(rows, c, true); ok {
		if own, ok := textsOf(rows, c, x.sys); ok {
			l = &rowLookup[string]{sys: sys.texts, own: own}
		}
	}
	if x.texts == nil {
		x.texts = map[int]*rowLookup[string]{}
	}
	x.texts[c] = l
	return l, l != nil
}

// shared returns the index of rows[:x.sys] column c, built once for every
// build of the relation whose PostgreSQL rows are the same slices.
func (x *relIndexes) shared(rows [][]datum.Value, c int, text bool) (*sharedIndex, bool) {
	build := func() *sharedIndex {
		si := &sharedIndex{ok: true}
		if x.sys > 0 {
			si.first = &rows[0][0]
		}
		if text {
			si.texts, si.ok = textsOf(rows[:x.sys], c, 0)
		} else if si.ok = allInts(rows[:x.sys], c); si.ok {
			si.ints = intsOf(rows[:x.sys], c, 0)
		}
		return si
	}
	if x.sys == 0 || len(rows[0]) == 0 {
		si := build()
		return si, si.ok
	}
	k := sharedKey{x.name, c, text}
	if v, ok := sharedIndexes.Load(k); ok {
		if si := v.(*sharedIndex); si.first == &rows[0][0] {
			return si, si.ok
		}
		si := build() // other rows than the shared index's: index them apart
		return si, si.ok
	}
	si := build()
	sharedIndexes.Store(k, si)
	return si, si.ok
}

// intsOf indexes integer column c of rows[from:] by absolute row number.
func intsOf(rows [][]datum.Value, c, from int) map[int64][]int {
	m := make(map[int64][]int, len(rows)-from)
	for i := from; i < len(rows); i++ {
		if v := rows[i][c]; !v.IsNull() {
			m[v.I] = append(m[v.I], i)
		}
	}
	return m
}

// textsOf indexes text column c of rows[from:] by absolute row number, ok
// false when it holds something else.
func textsOf(rows [][]datum.Value, c, from int) (map[string][]int, bool) {
	m := make(map[string][]int, len(rows)-from)
	for i := from; i < len(rows); i++ {
		switch v := rows[i][c]; {
		case v.IsNull():
		case v.K == datum.KindText:
			m[v.S] = append(m[v.S], i)
		default:
			return nil, false
		}
	}
	return m, true
}

// env is the scope an expression is evaluated in: one row of a relation.
type env struct {
	cols  []colInfo
	row   []datum.Value
	aggs  map[*pg.FuncCall]tv // results of aggregates, in aggregate mode
	outer *env                // the enclosing query's row, for correlated subqueries
	// probe: the row is a row of NULLs evaluated only for the result
	// types; functions with effects beyond their result do not run.
	probe bool
	// slots memoizes where the column references found in cols are: an
	// env's columns are fixed while its rows change, and resolving a name
	// for every row of every scan showed in profiles.
	slots map[*pg.ColumnRef]int
}

// lookupRef is lookup of a column reference node, remembering its slot
// when it resolves to one of e's own columns.
func (e *env) lookupRef(cr *pg.ColumnRef) (tv, error) {
	fields := names(cr.Fields)
	if i, err := e.resolve(fields); err == nil && e.row != nil {
		if e.slots == nil {
			e.slots = map[*pg.ColumnRef]int{}
		}
		e.slots[cr] = i
		return tv{e.row[i], e.cols[i].typ}, nil
	}
	return e.lookup(fields)
}

// lookup evaluates a column reference, trying enclosing queries when the
// name is not in this one.
func (e *env) lookup(fields []string) (tv, error) {
	i, err := e.resolve(fields)
	if err == nil {
		if e.row == nil {
			return tv{}, errRowDependent // evaluated before the scan (index.go)
		}
		return tv{e.row[i], e.cols[i].typ}, nil
	}
	for o := e.outer; o != nil; o = o.outer {
		if j, oerr := o.resolve(fields); oerr == nil {
			if o.row == nil {
				return tv{}, errRowDependent
			}
			return tv{o.row[j], o.cols[j].typ}, nil
		}
	}
	return tv{}, err
}

// tv is a typed value.
type tv struct {
	v datum.Value
	t datum.Type
}

func nodeName(n *pg.Node) string {
	if s := n.GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

func names(ns []*pg.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = nodeName(n)
	}
	return out
}

// resolve finds a column reference in scope.
func (e *env) resolve(fields []string) (int, error) {
	var qual, name string
	switch len(fields) {
	case 1:
		name = fields[0]
	case 2:
		qual, name = fields[0], fields[1]
	case 3:
		qual, name = fields[1], fields[2]
	default:
		return -1, unsupported("column reference %s", strings.Join(fields, "."))
	}
	found := -1
	for i, c := range e.cols {
		if c.name != name || (qual != "" && c.qual != qual) {
			continue
		}
		if found >= 0 {
			return -1, errf(pgcode.AmbiguousColumn, "column reference %q is ambiguous", name)
		}
		found = i
	}
	if found < 0 {
		if qual != "" {
			for _, c := range e.cols {
				if c.qual == qual {
					return -1, errf(pgcode.UndefinedColumn, "column %s.%s does not exist", qual, name)
				}
			}
			return -1, errf(pgcode.UndefinedTable, "missing FROM-clause entry for table %q", qual)
		}
		return -1, errf(pgcode.UndefinedColumn, "column %q does not exist", name)
	}
	return found, nil
}

// constValue converts a literal.
func constValue(c *pg.A_Const) (tv, error) {
	if c.Isnull {
		return tv{datum.Null, unknownType}, nil
	}
	switch {
	case c.GetIval() != nil:
		return tv{datum.IntValue(int64(c.GetIval().Ival)), datum.Int4}, nil
	case c.GetFval() != nil:
		s := c.GetFval().Fval
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return tv{datum.IntValue(i), datum.Int8}, nil
		}
		n, err := datum.ParseNumeric(s, datum.Numeric)
		if err != nil {
			return tv{}, err
		}
		return tv{datum.NumericValue(n), datum.Numeric}, nil
	case c.GetBoolval() != nil:
		return tv{datum.BoolValue(c.GetBoolval().Boolval), datum.Bool}, nil
	case c.GetSval() != nil:
		return tv{datum.TextValue(c.GetSval().Sval), unknownType}, nil
	case c.GetBsval() != nil:
		return tv{}, unsupported("bit string literals")
	}
	// pg_query leaves Ival's oneof empty for the integer 0.
	return tv{datum.IntValue(0), datum.Int4}, nil
}

// coerce converts x to type t with PostgreSQL's implicit/assignment rules.
func coerce(x tv, t datum.Type) (datum.Value, error) {
	if x.v.IsNull() {
		return datum.Null, nil
	}
	if x.t == t {
		return x.v, nil
	}
	if t.OID == datum.OIDTID && x.v.K == datum.KindText {
		return parseTIDLenient(x.v.S)
	}
	if x.t == unknownType {
		return datum.ParseText(t, x.v.S)
	}
	v, err := datum.Cast(x.v, x.t, t)
	if err != nil {
		return datum.Null, err
	}
	return v, nil
}

// unify brings two operands of a comparison to a common representation:
// an unknown literal takes the other side's type; integers meet numerics
// and floats through datum.Compare's cross-kind rules.
func unify(a, b tv) (tv, tv, error) {
	switch {
	case a.t == unknownType && b.t != unknownType:
		v, err := coerce(a, b.t)
		if err != nil {
			return a, b, err
		}
		return tv{v, b.t}, b, nil
	case b.t == unknownType && a.t != unknownType:
		v, err := coerce(b, a.t)
		if err != nil {
			return a, b, err
		}
		return a, tv{v, a.t}, nil
	}
	if a.v.K == datum.KindText && b.v.K != datum.KindText && !b.v.IsNull() {
		v, err := datum.Cast(a.v, a.t, b.t)
		if err != nil {
			return a, b, err
		}
		return tv{v, b.t}, b, nil
	}
	if b.v.K == datum.KindText && a.v.K != datum.KindText && !a.v.IsNull() {
		v, err := datum.Cast(b.v, b.t, a.t)
		if err != nil {
			return a, b, err
		}
		return a, tv{v, a.t}, nil
	}
	return a, b, nil
}

func boolTV(b bool) tv { return tv{datum.BoolValue(b), datum.Bool} }

var nullBool = tv{datum.Null, datum.Bool}

// compareOp evaluates a comparison operator; NULL in, NULL out.
func compareOp(op string, a, b tv) (tv, error) {
	a, b, err := unify(a, b)
	if err != nil {
		return tv{}, err
	}
	if a.v.IsNull() || b.v.IsNull() {
		return nullBool, nil
	}
	c := datum.Compare(a.v, b.v)
	switch op {
	case "=":
		return boolTV(c == 0), nil
	case "<>", "!=":
		return boolTV(c != 0), nil
	case "<":
		return boolTV(c < 0), nil
	case "<=":
		return boolTV(c <= 0), nil
	case ">":
		return boolTV(c > 0), nil
	case ">=":
		return boolTV(c >= 0), nil
	}
	return tv{}, unsupported("operator %s", op)
}

// intArith is l op r, op "+" or "-", for two integers, as PostgreSQL's
// int2/int4/int8 operators compute it: typed as the wider operand, and
// 22003 when the result does not fit that type (never a wrapped value).
func intArith(op string, l, r tv) (tv, error) {
	t := widerInt(l.t, r.t)
	a, b := l.v.I, r.v.I
	var v int64
	var ok bool
	switch {
	case op == "+":
		v, ok = addInt64(a, b)
	case b == math.MinInt64:
		// -b does not exist; a - b fits only for a < 0.
		v, ok = a-b, a < 0
	default:
		v, ok = addInt64(a, -b)
	}
	if !ok {
		// Only int8 operands reach past int64.
		return tv{}, datum.IntRangeError(t)
	}
	x, err := datum.CheckIntRange(t, v)
	if err != nil {
		return tv{}, err
	}
	return tv{x, t}, nil
}

// addInt64 is a + b, ok false if it overflows.
func addInt64(a, b int64) (int64, bool) {
	v := a + b
	return v, (a >= 0) != (b >= 0) || (v >= 0) == (a >= 0)
}

// widerInt is the type of an integer operator's result: int8 if either
// operand is, else int4 if either is, else int2 for two int2s; any other
// integer type (oid) keeps the left operand's.
func widerInt(l, r datum.Type) datum.Type {
	switch {
	case l == datum.Int8 || r == datum.Int8:
		return datum.Int8
	case l == datum.Int4 || r == datum.Int4:
		return datum.Int4
	case l == datum.Int2 && r == datum.Int2:
		return datum.Int2
	}
	return l
}

// condition evaluates a WHERE or JOIN/ON condition (clause names it in
// the error) for the row in e: only TRUE passes; a value that is not
// boolean is 42804, as PostgreSQL refuses it when it plans the statement,
// and a quoted literal is read as a boolean ('true', 'f', …). A caller
// that only narrows rows ahead of the clause (a prefilter) keeps a row
// whose condition fails, so that the clause itself reports it.
func (x *exec) condition(clause string, n *pg.Node, e *env) (bool, error) {
	v, err := x.eval(n, e)
	if err != nil {
		return false, err
	}
	return conditionValue(clause, v)
}

// conditionValue is condition's test of an evaluated value.
func conditionValue(clause string, v tv) (bool, error) {
	switch {
	case v.t.OID == datum.OIDBool:
		return truth(v), nil
	case v.v.IsNull():
		return false, nil
	case v.t == unknownType && v.v.K == datum.KindText:
		b, err := datum.ParseText(datum.Bool, v.v.S)
		if err != nil {
			return false, err
		}
		return b.I != 0, nil
	}
	return false, errf(pgcode.DatatypeMismatch, "argument of %s must be type boolean, not type %s", clause, outType(v.t))
}

// truth is SQL's WHERE test: only TRUE passes.
func truth(x tv) bool { return x.v.K == datum.KindBool && x.v.I != 0 }

// typeFromName resolves a pg_query TypeName.
func typeFromName(tn *pg.TypeName) (datum.Type, error) {
	ns := names(tn.Names)
	var mods []int32
	for _, m := range tn.Typmods {
		c := m.GetAConst()
		if c == nil || c.GetIval() == nil {
			if c != nil && c.GetIval() == nil && c.GetFval() == nil && c.GetSval() == nil {
				mods = append(mods, 0)
				continue
			}
			return datum.Type{}, unsupported("type modifier in %s", strings.Join(ns, "."))
		}
		mods = append(mods, c.GetIval().Ival)
	}
	if len(ns) > 0 {
		switch strings.ToLower(ns[len(ns)-1]) {
		case "regclass", "regnamespace", "regtype", "regproc", "oid":
			if strings.ToLower(ns[len(ns)-1]) != "regclass" {
				return datum.OID, nil
			}
		case "char":
			if len(ns) == 1 || ns[0] != "pg_catalog" {
				// "char" quoted is the one-byte type.
				if len(tn.Typmods) == 0 && len(ns) == 1 {
					return datum.Char, nil
				}
			}
		}
	}
	t, err := datum.ParseTypeName(ns, mods, len(tn.ArrayBounds))
	if err != nil {
		return datum.Type{}, errf(pgcode.UndefinedObject, "%s", err.Error())
	}
	return t, nil
}

// parseTIDLenient is PostgreSQL's tidin, which finds the '(' and ',' by
// scanning and ignores what follows the ')': DuckDB's UPDATE through a temp
// table sends '(0,1)' with its quotes and PostgreSQL accepts it.
func parseTIDLenient(s string) (datum.Value, error) {
	bad := &datum.SyntaxError{Code: pgcode.InvalidTextRepresentation, Msg: fmt.Sprintf("invalid input syntax for type tid: %q", s)}
	var coord [2]int
	n := 0
	for i := 0; i < len(s) && n < 2 && s[i] != ')'; i++ {
		if s[i] == ',' || (s[i] == '(' && n == 0) {
			coord[n] = i + 1
			n++
		}
	}
	if n < 2 {
		return datum.Null, bad
	}
	num := func(from int, end byte) (uint64, bool) {
		j := from
		for j < len(s) && s[j] == ' ' {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j || k >= len(s) || s[k] != end {
			return 0, false
		}
		v, err := strconv.ParseUint(s[j:k], 10, 64)
		return v, err == nil
	}
	b, ok1 := num(coord[0], ',')
	o, ok2 := num(coord[1], ')')
	if !ok1 || !ok2 || b > math.MaxUint32 || o > math.MaxUint16 {
		return datum.Null, bad
	}
	return datum.TIDValue(uint32(b), uint16(o)), nil
}
