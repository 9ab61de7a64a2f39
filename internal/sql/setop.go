package sql

import (
	"slices"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	pg "github.com/pganalyze/pg_query_go/v6"
)

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
