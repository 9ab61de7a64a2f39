package keyspace

import (
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
)

// This file turns captured DDL into TableDefs the way the SQL layer does, so
// that ValidateDef can be checked against the real statements DuckLake sent.

// parseCreate parses one CREATE TABLE statement into a TableDef.
func parseCreate(sql string) (TableDef, error) {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return TableDef{}, err
	}
	if len(tree.Stmts) != 1 {
		return TableDef{}, fmt.Errorf("want one statement, got %d", len(tree.Stmts))
	}
	cs := tree.Stmts[0].Stmt.GetCreateStmt()
	if cs == nil {
		return TableDef{}, fmt.Errorf("not CREATE TABLE: %s", sql)
	}
	def := TableDef{Schema: cs.Relation.Schemaname, Name: cs.Relation.Relname}
	for _, elt := range cs.TableElts {
		cd := elt.GetColumnDef()
		if cd == nil {
			return TableDef{}, fmt.Errorf("unexpected table element in %s", sql)
		}
		c, pk, err := columnFromAST(cd)
		if err != nil {
			return TableDef{}, err
		}
		if pk {
			def.PrimaryKey = append(def.PrimaryKey, len(def.Columns))
		}
		def.Columns = append(def.Columns, c)
	}
	return def, nil
}

func columnFromAST(cd *pg_query.ColumnDef) (ColumnDef, bool, error) {
	var names []string
	for _, n := range cd.TypeName.Names {
		names = append(names, n.GetString_().Sval)
	}
	var mods []int32
	for _, m := range cd.TypeName.Typmods {
		mods = append(mods, m.GetAConst().GetIval().Ival)
	}
	typ, err := datum.ParseTypeName(names, mods, len(cd.TypeName.ArrayBounds))
	if err != nil {
		return ColumnDef{}, false, fmt.Errorf("column %s: %w", cd.Colname, err)
	}
	c := ColumnDef{Name: cd.Colname, Type: typ}
	pk := false
	for _, con := range cd.Constraints {
		switch con.GetConstraint().Contype {
		case pg_query.ConstrType_CONSTR_NOTNULL:
			c.NotNull = true
		case pg_query.ConstrType_CONSTR_PRIMARY:
			pk = true
		}
	}
	return c, pk, nil
}

// applyAlter applies an ALTER TABLE … ADD COLUMN or RENAME COLUMN statement
// to the matching def in defs; it reports whether one matched.
func applyAlter(defs map[string]*TableDef, sql string) (string, error) {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return "", err
	}
	st := tree.Stmts[0].Stmt
	if at := st.GetAlterTableStmt(); at != nil {
		d := defs[at.Relation.Relname]
		if d == nil {
			return "", fmt.Errorf("no table %s", at.Relation.Relname)
		}
		for _, cmd := range at.Cmds {
			ac := cmd.GetAlterTableCmd()
			if ac.Subtype != pg_query.AlterTableType_AT_AddColumn {
				return "", fmt.Errorf("unexpected alter %v", ac.Subtype)
			}
			c, _, err := columnFromAST(ac.Def.GetColumnDef())
			if err != nil {
				return "", err
			}
			d.Columns = append(d.Columns, c)
		}
		return d.Name, nil
	}
	if rs := st.GetRenameStmt(); rs != nil && rs.RenameType == pg_query.ObjectType_OBJECT_COLUMN {
		d := defs[rs.Relation.Relname]
		if d == nil {
			return "", fmt.Errorf("no table %s", rs.Relation.Relname)
		}
		i := d.ColumnIndex(rs.Subname)
		if i < 0 {
			return "", fmt.Errorf("no column %s in %s", rs.Subname, d.Name)
		}
		d.Columns[i].Name = rs.Newname
		return d.Name, nil
	}
	return "", fmt.Errorf("not an ALTER TABLE: %s", sql)
}

func isDuckLakeDDL(sql, verb string) bool {
	u := strings.ToUpper(sql)
	return strings.HasPrefix(u, verb) && strings.Contains(sql, "ducklake_")
}
