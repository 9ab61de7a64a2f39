package sql

import (
	"errors"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// isLakeTable reports whether a table name is one of DuckLake's: its
// catalog tables and the dynamic inlined-data / inlined-delete tables all
// start with "ducklake_". This server holds a DuckLake catalog only.
func isLakeTable(name string) bool { return strings.HasPrefix(name, "ducklake_") }

// tableDef builds a definition from CREATE TABLE's elements.
func tableDef(s *pg.CreateStmt) (memcat.TableDef, error) {
	var def memcat.TableDef
	var pkNames []string
	for _, el := range s.TableElts {
		switch {
		case el.GetColumnDef() != nil:
			cd := el.GetColumnDef()
			c, pk, err := columnDef(cd, false)
			if err != nil {
				return def, err
			}
			if def.ColumnIndex(c.Name) >= 0 {
				return def, errf(pgcode.DuplicateColumn, "column %q specified more than once", c.Name)
			}
			if pk {
				pkNames = append(pkNames, c.Name)
			}
			def.Columns = append(def.Columns, c)
		case el.GetConstraint() != nil:
			con := el.GetConstraint()
			if con.Contype != pg.ConstrType_CONSTR_PRIMARY {
				return def, unsupported("table constraint %s", con.Contype)
			}
			if len(pkNames) > 0 {
				return def, errf(pgcode.InvalidTableDefinition, "multiple primary keys for table %q are not allowed", s.Relation.Relname)
			}
			pkNames = names(con.Keys)
		default:
			return def, unsupported("CREATE TABLE element %s", nodeKind(el))
		}
	}
	for _, n := range pkNames {
		i := def.ColumnIndex(n)
		if i < 0 {
			return def, errf(pgcode.UndefinedColumn, "column %q named in key does not exist", n)
		}
		def.Columns[i].NotNull = true
		def.PK = append(def.PK, i)
	}
	return def, nil
}

// columnDef builds a column from its definition. withDefault allows a
// constant DEFAULT, which ALTER TABLE … ADD COLUMN gives every existing row
// (DuckLake's migrations add columns so); CREATE TABLE refuses defaults,
// since moraine's tables take every value from the statement that inserts
// the row.
func columnDef(cd *pg.ColumnDef, withDefault bool) (memcat.Column, bool, error) {
	t, err := typeFromName(cd.TypeName)
	if err != nil {
		return memcat.Column{}, false, err
	}
	c := memcat.Column{Name: cd.Colname, Type: t, NotNull: cd.IsNotNull}
	pk := false
	for _, cn := range cd.Constraints {
		con := cn.GetConstraint()
		switch con.Contype {
		case pg.ConstrType_CONSTR_NOTNULL:
			c.NotNull = true
		case pg.ConstrType_CONSTR_NULL:
		case pg.ConstrType_CONSTR_PRIMARY:
			pk = true
			c.NotNull = true
		case pg.ConstrType_CONSTR_DEFAULT:
			if !withDefault {
				return c, false, unsupported("column defaults in CREATE TABLE (%q)", cd.Colname)
			}
			if c.Default, err = constDefault(con.RawExpr, t); err != nil {
				return c, false, err
			}
		default:
			return c, false, unsupported("column constraint %s on %q", con.Contype, cd.Colname)
		}
	}
	if cd.RawDefault != nil || cd.CollClause != nil || cd.Identity != "" || cd.Generated != "" {
		return c, false, unsupported("column defaults, collations, identity and generated columns (%q)", cd.Colname)
	}
	return c, pk, nil
}

// constDefault evaluates a DEFAULT expression that is a literal, possibly
// cast (the forms DuckDB's postgres extension renders a constant in), as a
// value of type t.
func constDefault(n *pg.Node, t datum.Type) (datum.Value, error) {
	var casts []*pg.TypeName
	for n.GetTypeCast() != nil {
		casts = append(casts, n.GetTypeCast().TypeName)
		n = n.GetTypeCast().Arg
	}
	c := n.GetAConst()
	if c == nil {
		return datum.Null, unsupported("a DEFAULT other than a constant (%s)", nodeKind(n))
	}
	v, err := constValue(c)
	if err != nil {
		return datum.Null, err
	}
	for i := len(casts) - 1; i >= 0; i-- {
		ct, err := typeFromName(casts[i])
		if err != nil {
			return datum.Null, err
		}
		cv, err := coerce(v, ct)
		if err != nil {
			return datum.Null, err
		}
		v = tv{cv, ct}
	}
	return coerce(v, t)
}

func (x *exec) createTable(s *pg.CreateStmt, out sink) error {
	if len(s.InhRelations) > 0 || s.Partspec != nil || s.Partbound != nil || s.OfTypename != nil || len(s.Options) > 0 {
		return unsupported("CREATE TABLE with inheritance, partitioning, OF or WITH options")
	}
	rv := s.Relation
	def, err := tableDef(s)
	if err != nil {
		return err
	}
	if rv.Relpersistence == "t" {
		if rv.Schemaname != "" && rv.Schemaname != "pg_temp" {
			return errf(pgcode.InvalidSchemaName, "cannot create temporary relation in non-temporary schema")
		}
		if _, ok := x.s.temps[rv.Relname]; ok {
			if s.IfNotExists {
				out.notice(&pgwire.Error{Code: pgcode.DuplicateTable, Message: "relation \"" + rv.Relname + "\" already exists, skipping"})
				return out.complete("CREATE TABLE")
			}
			return errf(pgcode.DuplicateTable, "relation %q already exists", rv.Relname)
		}
		switch s.Oncommit {
		case pg.OnCommitAction_ONCOMMIT_NOOP, pg.OnCommitAction_ONCOMMIT_PRESERVE_ROWS, pg.OnCommitAction_ONCOMMIT_DROP:
		default:
			return unsupported("ON COMMIT DELETE ROWS")
		}
		db := x.s.db
		var pk uint32
		oid, typ := db.NewOID(), db.NewOID()
		if len(def.PK) > 0 {
			pk = db.NewOID()
		}
		x.s.temps[rv.Relname] = memcat.NewTable(rv.Relname, oid, typ, pk, def)
		if s.Oncommit == pg.OnCommitAction_ONCOMMIT_DROP {
			if x.s.tempOnDrop == nil {
				x.s.tempOnDrop = map[string]bool{}
			}
			x.s.tempOnDrop[rv.Relname] = true
		}
		return out.complete("CREATE TABLE")
	}
	if rv.Relpersistence == "u" {
		return unsupported("UNLOGGED tables")
	}
	if !isLakeTable(rv.Relname) {
		return unsupported("creating table %q: this server holds a DuckLake catalog only (tables named ducklake_*)", rv.Relname)
	}
	if err := x.checkWritable("CREATE TABLE"); err != nil {
		return err
	}
	schema := rv.Schemaname
	if schema == "" {
		schema = x.s.searchSchema()
	}
	if schema == "pg_catalog" || schema == "information_schema" {
		return errf(pgcode.InsufficientPrivilege, "permission denied to create %q", schema+"."+rv.Relname)
	}
	if !x.s.view().HasSchema(schema) {
		// A new lake's metadata schema is created on first use.
		if err := x.s.tx.txn.CreateSchema(schema); err != nil {
			return err
		}
	}
	if _, err := x.s.tx.txn.CreateTable(schema, rv.Relname, def); err != nil {
		if errors.Is(err, catalog.ErrTableExists) {
			if s.IfNotExists {
				out.notice(&pgwire.Error{Code: pgcode.DuplicateTable, Message: "relation \"" + rv.Relname + "\" already exists, skipping"})
				return out.complete("CREATE TABLE")
			}
			return errf(pgcode.DuplicateTable, "relation %q already exists", rv.Relname)
		}
		return err
	}
	return out.complete("CREATE TABLE")
}

func (x *exec) createSchema(s *pg.CreateSchemaStmt, out sink) error {
	if len(s.SchemaElts) > 0 || s.Authrole != nil {
		return unsupported("CREATE SCHEMA with AUTHORIZATION or elements")
	}
	if err := x.checkWritable("CREATE SCHEMA"); err != nil {
		return err
	}
	if strings.HasPrefix(s.Schemaname, "pg_") {
		return errf(pgcode.ReservedName, "unacceptable schema name %q", s.Schemaname)
	}
	if x.s.view().HasSchema(s.Schemaname) || s.Schemaname == "information_schema" {
		if s.IfNotExists {
			out.notice(&pgwire.Error{Code: pgcode.DuplicateSchema, Message: "schema \"" + s.Schemaname + "\" already exists, skipping"})
			return out.complete("CREATE SCHEMA")
		}
		return errf(pgcode.DuplicateSchema, "schema %q already exists", s.Schemaname)
	}
	if err := x.s.tx.txn.CreateSchema(s.Schemaname); err != nil {
		return err
	}
	return out.complete("CREATE SCHEMA")
}

func (x *exec) drop(s *pg.DropStmt, out sink) error {
	if s.RemoveType != pg.ObjectType_OBJECT_TABLE {
		return unsupported("DROP %s", strings.TrimPrefix(s.RemoveType.String(), "OBJECT_"))
	}
	for _, o := range s.Objects {
		ns := names(o.GetList().GetItems())
		rv := &pg.RangeVar{Relname: ns[len(ns)-1]}
		if len(ns) > 1 {
			rv.Schemaname = ns[len(ns)-2]
		}
		t, schema, err := x.lookupTable(rv)
		if err != nil {
			if s.MissingOk {
				out.notice(&pgwire.Error{Code: pgcode.SuccessfulCompletion, Message: "table \"" + rv.Relname + "\" does not exist, skipping"})
				continue
			}
			return errf(pgcode.UndefinedTable, "table %q does not exist", rv.Relname)
		}
		if schema == "" {
			delete(x.s.temps, t.Name)
			continue
		}
		if err := x.checkWritable("DROP TABLE"); err != nil {
			return err
		}
		if err := x.s.tx.txn.DropTable(schema, t.Name); err != nil {
			return err
		}
	}
	return out.complete("DROP TABLE")
}

func (x *exec) alterTable(s *pg.AlterTableStmt, out sink) error {
	if s.Objtype != pg.ObjectType_OBJECT_TABLE {
		return unsupported("ALTER %s", s.Objtype)
	}
	t, schema, err := x.lookupTable(s.Relation)
	if err != nil {
		if s.MissingOk {
			out.notice(&pgwire.Error{Code: pgcode.SuccessfulCompletion, Message: "relation \"" + s.Relation.Relname + "\" does not exist, skipping"})
			return out.complete("ALTER TABLE")
		}
		return err
	}
	if schema == "" {
		return unsupported("ALTER TABLE on a temporary table")
	}
	if err := x.checkWritable("ALTER TABLE"); err != nil {
		return err
	}
	for _, cn := range s.Cmds {
		cmd := cn.GetAlterTableCmd()
		if cmd.Subtype == pg.AlterTableType_AT_DropColumn {
			if err := x.dropColumn(schema, t.Name, cmd, out); err != nil {
				return err
			}
			continue
		}
		if cmd.Subtype != pg.AlterTableType_AT_AddColumn {
			return unsupported("ALTER TABLE %s", strings.TrimPrefix(cmd.Subtype.String(), "AT_"))
		}
		c, pk, err := columnDef(cmd.Def.GetColumnDef(), true)
		if err != nil {
			return err
		}
		if pk || c.NotNull {
			return unsupported("ALTER TABLE ADD COLUMN with NOT NULL or PRIMARY KEY")
		}
		if err := x.s.tx.txn.AddColumn(schema, t.Name, c); err != nil {
			if errors.Is(err, catalog.ErrColumnExists) {
				if cmd.MissingOk {
					out.notice(&pgwire.Error{Code: pgcode.DuplicateColumn, Message: "column \"" + c.Name + "\" of relation \"" + t.Name + "\" already exists, skipping"})
					continue
				}
				return errf(pgcode.DuplicateColumn, "column %q of relation %q already exists", c.Name, t.Name)
			}
			return err
		}
	}
	return out.complete("ALTER TABLE")
}

// dropColumn runs ALTER TABLE … DROP COLUMN [IF EXISTS] name.
func (x *exec) dropColumn(schema, table string, cmd *pg.AlterTableCmd, out sink) error {
	err := x.s.tx.txn.DropColumn(schema, table, cmd.Name)
	if errors.Is(err, catalog.ErrNoColumn) {
		if cmd.MissingOk {
			out.notice(&pgwire.Error{Code: pgcode.SuccessfulCompletion, Message: "column \"" + cmd.Name + "\" of relation \"" + table + "\" does not exist, skipping"})
			return nil
		}
		return errf(pgcode.UndefinedColumn, "column %q of relation %q does not exist", cmd.Name, table)
	}
	return err
}

// rename runs ALTER TABLE … RENAME COLUMN and ALTER TABLE [IF EXISTS] …
// RENAME TO (DuckLake's 0.2 → 0.3 migration renames a table).
func (x *exec) rename(s *pg.RenameStmt, out sink) error {
	column := s.RenameType == pg.ObjectType_OBJECT_COLUMN && s.RelationType == pg.ObjectType_OBJECT_TABLE
	if !column && s.RenameType != pg.ObjectType_OBJECT_TABLE {
		return unsupported("ALTER ... RENAME of %s", strings.TrimPrefix(s.RenameType.String(), "OBJECT_"))
	}
	t, schema, err := x.lookupTable(s.Relation)
	if err != nil {
		if !column && s.MissingOk {
			out.notice(&pgwire.Error{Code: pgcode.SuccessfulCompletion, Message: "relation \"" + s.Relation.Relname + "\" does not exist, skipping"})
			return out.complete("ALTER TABLE")
		}
		return err
	}
	if schema == "" {
		return unsupported("ALTER TABLE on a temporary table")
	}
	if err := x.checkWritable("ALTER TABLE"); err != nil {
		return err
	}
	if !column {
		if !isLakeTable(s.Newname) {
			return unsupported("renaming table %q to %q: this server holds a DuckLake catalog only (tables named ducklake_*)", t.Name, s.Newname)
		}
		if err := x.s.tx.txn.RenameTable(schema, t.Name, s.Newname); err != nil {
			if errors.Is(err, catalog.ErrTableExists) {
				return errf(pgcode.DuplicateTable, "relation %q already exists", s.Newname)
			}
			return err
		}
		return out.complete("ALTER TABLE")
	}
	if err := x.s.tx.txn.RenameColumn(schema, t.Name, s.Subname, s.Newname); err != nil {
		switch {
		case errors.Is(err, catalog.ErrNoColumn):
			return errf(pgcode.UndefinedColumn, "column %q does not exist", s.Subname)
		case errors.Is(err, catalog.ErrColumnExists):
			return errf(pgcode.DuplicateColumn, "column %q of relation %q already exists", s.Newname, t.Name)
		}
		return err
	}
	return out.complete("ALTER TABLE")
}

// set runs SET / RESET.
// assign sets a setting by name (SET, set_config); a reported one is sent
// to the client as a ParameterStatus after the statement.
func (s *Session) assign(name, val string) error {
	lower := strings.ToLower(name)
	if lower == "timezone" && !strings.EqualFold(val, "UTC") && !strings.EqualFold(val, "GMT") && val != "Etc/UTC" {
		return unsupported("TimeZone other than UTC (%s)", val)
	}
	if _, known := defaultSettings[lower]; !known && !strings.Contains(lower, ".") {
		return errf(pgcode.UndefinedObject, "unrecognized configuration parameter %q", name)
	}
	s.set(lower, val)
	if rep, ok := reported[lower]; ok {
		for i := range s.reports {
			if s.reports[i][0] == rep {
				s.reports[i][1] = val
				return nil
			}
		}
		s.reports = append(s.reports, [2]string{rep, val})
	}
	return nil
}

// flushReports sends the ParameterStatus of the reported settings changed
// so far.
func (s *Session) flushReports(out sink) {
	for _, r := range s.reports {
		out.parameter(r[0], r[1])
	}
	s.reports = s.reports[:0]
}

func (x *exec) set(s *pg.VariableSetStmt, out sink) error {
	name := strings.ToLower(s.Name)
	switch s.Kind {
	case pg.VariableSetKind_VAR_SET_VALUE:
		var parts []string
		for _, a := range s.Args {
			c := a.GetAConst()
			if c == nil {
				if tc := a.GetTypeCast(); tc != nil {
					c = tc.Arg.GetAConst()
				}
			}
			if c == nil {
				return unsupported("SET %s to an expression", name)
			}
			v, err := constValue(c)
			if err != nil {
				return err
			}
			parts = append(parts, datum.FormatText(outType(v.t), v.v))
		}
		if err := x.s.assign(s.Name, strings.Join(parts, ", ")); err != nil {
			return err
		}
		x.s.flushReports(out)
		return out.complete("SET")
	case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
		if def, ok := defaultSettings[name]; ok {
			x.s.set(name, def)
			if rep, ok := reported[name]; ok {
				out.parameter(rep, def)
			}
		} else if !strings.Contains(name, ".") {
			return errf(pgcode.UndefinedObject, "unrecognized configuration parameter %q", s.Name)
		}
		if s.Kind == pg.VariableSetKind_VAR_RESET {
			return out.complete("RESET")
		}
		return out.complete("SET")
	case pg.VariableSetKind_VAR_RESET_ALL:
		x.s.resetSettings()
		return out.complete("RESET")
	case pg.VariableSetKind_VAR_SET_MULTI:
		if name == "transaction" || name == "session characteristics" {
			for _, a := range s.Args {
				d := a.GetDefElem()
				if d == nil {
					continue
				}
				if d.Defname == "transaction_isolation" && name == "transaction" {
					lvl := d.Arg.GetAConst().GetSval().GetSval()
					x.s.tx.repeatable = lvl == "repeatable read" || lvl == "serializable"
				}
				if d.Defname == "transaction_read_only" && name == "transaction" {
					x.s.tx.readOnly = d.Arg.GetAConst().GetIval().GetIval() != 0
				}
			}
			return out.complete("SET")
		}
	}
	return unsupported("SET form %s", s.Kind)
}

func (x *exec) show(s *pg.VariableShowStmt, out sink) error {
	name := strings.ToLower(s.Name)
	if name == "all" {
		return x.showAll(out)
	}
	v, ok := x.s.setting(name)
	if !ok {
		return errf(pgcode.UndefinedObject, "unrecognized configuration parameter %q", s.Name)
	}
	return out.rows([]colInfo{{name: name, typ: datum.Text}}, [][]datum.Value{{datum.TextValue(v)}}, "SHOW")
}
