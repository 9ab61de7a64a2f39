package sql

import (
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Column pruning. A join concatenates its sides' rows, and every level of a
// join copies the concatenation: PostgreSQL's catalogs are twenty to thirty
// columns wide, and DuckDB's postgres extension joins six of them to read a
// dozen columns of two thousand rows. A join of a SELECT keeps, of the rows
// it produces, only the columns that a column reference still to be
// evaluated may name: one outside the ON conditions of this join and of the
// joins below it, whose name is the column's and whose qualifier, if it has
// one, is the column's table. A statement with a * (t.* or a bare *) keeps
// every column.

// columnRef is a column reference of a statement: its qualifier ("" when
// it has none), its name, and the join whose ON condition holds it (nil
// elsewhere).
type columnRef struct {
	qual, name string
	on         *pg.JoinExpr
}

// pruning is what a statement's joins need to know to prune.
type pruning struct {
	refs []columnRef
	// below maps each join to itself and the joins in its arguments: the
	// ON conditions evaluated by the time its rows are made.
	below map[*pg.JoinExpr]map[*pg.JoinExpr]bool
}

// prunings memoizes statementPruning per parse tree.
var prunings treeMemo[*pruning]

// statementPruning returns the statement's pruning, or nil when one of its
// column references is a *.
func statementPruning(sel *pg.SelectStmt) *pruning {
	return prunings.get(sel, buildPruning)
}

func buildPruning(sel *pg.SelectStmt) *pruning {
	p := &pruning{below: map[*pg.JoinExpr]map[*pg.JoinExpr]bool{}}
	star := false
	var open []*pg.JoinExpr // the joins whose arguments the walk is in
	var walk func(m protoreflect.Message, on *pg.JoinExpr)
	walk = func(m protoreflect.Message, on *pg.JoinExpr) {
		if star {
			return
		}
		switch v := m.Interface().(type) {
		case *pg.ColumnRef:
			if len(v.Fields) == 0 {
				return
			}
			last := v.Fields[len(v.Fields)-1]
			if last.GetAStar() != nil {
				star = true
				return
			}
			r := columnRef{name: nodeName(last), on: on}
			if len(v.Fields) >= 2 {
				r.qual = nodeName(v.Fields[len(v.Fields)-2])
			}
			p.refs = append(p.refs, r)
			return
		case *pg.JoinExpr:
			p.below[v] = map[*pg.JoinExpr]bool{v: true}
			for _, o := range open {
				p.below[o][v] = true
			}
			open = append(open, v)
			for _, arg := range []*pg.Node{v.Larg, v.Rarg} {
				if arg != nil {
					walk(arg.ProtoReflect(), on)
				}
			}
			open = open[:len(open)-1]
			if v.Quals != nil {
				walk(v.Quals.ProtoReflect(), v)
			}
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := val.List()
				for i := 0; i < l.Len() && !star; i++ {
					walk(l.Get(i).Message(), on)
				}
			case fd.Message() != nil && !fd.IsMap():
				walk(val.Message(), on)
			}
			return !star
		})
	}
	walk(sel.ProtoReflect(), nil)
	if star {
		return nil
	}
	return p
}

// keep returns the positions of the columns of join j's output (j nil for
// the joins of a FROM list) that a reference still to be evaluated may
// name, nil when it keeps them all.
func (x *exec) keep(cols []colInfo, j *pg.JoinExpr) []int {
	p := x.pruning
	if p == nil {
		return nil
	}
	below := p.below[j]
	var keep []int
	for i, c := range cols {
		for _, r := range p.refs {
			if r.name == c.name && (r.qual == "" || r.qual == c.qual) && (r.on == nil || !below[r.on]) {
				keep = append(keep, i)
				break
			}
		}
	}
	if len(keep) == len(cols) {
		return nil
	}
	return keep
}
