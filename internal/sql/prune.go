package sql

import (
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Column pruning. A join concatenates its sides' rows, and every level of a
// join copies the concatenation: PostgreSQL's catalogs are twenty to thirty
// columns wide, and DuckDB's postgres extension joins six of them to read a
// dozen columns of two thousand rows. A join of a SELECT keeps, of the rows
// it produces, only the columns that some name anywhere in the statement
// refers to; a statement with a * (t.* or a bare *) keeps them all.

// referenced memoizes referencedNames per parse tree.
var referenced treeMemo[map[string]bool]

// referencedNames returns the column names the statement's column
// references end in, or nil when one of them is a *.
func referencedNames(sel *pg.SelectStmt) map[string]bool {
	return referenced.get(sel, columnNames)
}

func columnNames(sel *pg.SelectStmt) map[string]bool {
	names := map[string]bool{}
	star := false
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if star {
			return
		}
		if cr, ok := m.Interface().(*pg.ColumnRef); ok {
			if len(cr.Fields) == 0 {
				return
			}
			last := cr.Fields[len(cr.Fields)-1]
			if last.GetAStar() != nil {
				star = true
				return
			}
			names[nodeName(last)] = true
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := val.List()
				for i := 0; i < l.Len() && !star; i++ {
					walk(l.Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				walk(val.Message())
			}
			return !star
		})
	}
	walk(sel.ProtoReflect())
	if star {
		return nil
	}
	return names
}

// keep returns the positions of the columns of a join's output that the
// statement names, nil when it keeps them all.
func (x *exec) keep(cols []colInfo) []int {
	if x.needed == nil {
		return nil
	}
	var keep []int
	for i, c := range cols {
		if x.needed[c.name] {
			keep = append(keep, i)
		}
	}
	if len(keep) == len(cols) {
		return nil
	}
	return keep
}
