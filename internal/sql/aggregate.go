package sql

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	pg "github.com/pganalyze/pg_query_go/v6"
)

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
			return tv{}, datum.IntRangeError(resT)
		default:
			acc.v = datum.IntValue(sum)
		}
	}
	return acc, nil
}
