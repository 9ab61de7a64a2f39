package sql

import (
	"slices"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	pg "github.com/pganalyze/pg_query_go/v6"
)

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
