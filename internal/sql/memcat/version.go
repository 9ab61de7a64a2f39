package memcat

import (
	"slices"
	"sync"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Schema is one schema at one version, with every table (SchemaList).
type Schema struct {
	Name   string
	OID    uint32
	Tables map[string]*Table
}

// Version is one state of a database's catalog as the executor reads it.
//
// It is lazy: a table's description is made when a statement first looks
// it up, and kept for later lookups through the same Version. A writing
// transaction builds a new Version after every write (Txn.View) and a
// statement names a handful of tables, so building every table's
// description up front cost more than the statement itself. The tables of
// a Version whose source is a transaction's view are frozen at their first
// lookup: a Version keeps answering what it answered first.
type Version struct {
	Seq  uint64
	src  *catalog.Version
	defs *sync.Map // *catalog.TableInfo → *TableDef, shared by a DB's versions
	// branch is the database's record when it is a branch (branchview.go).
	branch *keyspace.Branch

	mu     sync.Mutex
	tables map[[2]string]*Table
	list   []*Schema
	dirs   map[string]map[int64]string // a writable branch's table directories, by schema
}

// DDLSeq identifies the version's schemas, tables and columns: equal for
// two versions of one database exactly when no DDL landed between them
// (catalog.Version.DDLSeq). What PostgreSQL's catalogs show depends on
// nothing else.
func (v *Version) DDLSeq() uint64 { return v.src.DDLSeq() }

func newVersion(v *catalog.Version, defs *sync.Map, branch *keyspace.Branch) *Version {
	return &Version{Seq: v.Seq(), src: v, defs: defs, branch: branch}
}

// HasSchema reports whether the named schema exists.
func (v *Version) HasSchema(name string) bool {
	_, ok := v.src.Schema(name)
	return ok
}

// Lookup returns a table.
func (v *Version) Lookup(schema, table string) (*Table, bool) {
	k := [2]string{schema, table}
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.tables[k]; ok {
		return t, true
	}
	s, ok := v.src.Schema(schema)
	if !ok {
		return nil, false
	}
	ct, ok := s.Table(table)
	if !ok {
		return nil, false
	}
	t := lakeTable(ct, v.defs)
	t.view, t.filters = v.viewFor(schema, table)
	if v.tables == nil {
		v.tables = map[[2]string]*Table{}
	}
	v.tables[k] = t
	return t, true
}

// SchemaList returns the schemas in OID order, each with all its tables.
func (v *Version) SchemaList() []*Schema {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.list != nil {
		return v.list
	}
	list := make([]*Schema, 0, 4)
	for _, s := range v.src.Schemas() {
		tables := make(map[string]*Table, s.Len())
		s.EachTable(func(ct *catalog.Table) {
			k := [2]string{s.Name, ct.Name()}
			t, ok := v.tables[k]
			if !ok {
				t = lakeTable(ct, v.defs)
				t.view, t.filters = v.viewFor(s.Name, ct.Name())
				if v.tables == nil {
					v.tables = map[[2]string]*Table{}
				}
				v.tables[k] = t
			}
			tables[ct.Name()] = t
		})
		list = append(list, &Schema{Name: s.Name, OID: s.OID, Tables: tables})
	}
	v.list = list
	return list
}

// lakeTable describes a catalog table, reusing the definition derived for
// its TableInfo (immutable: DDL replaces it) when defs is not nil.
func lakeTable(t *catalog.Table, defs *sync.Map) *Table {
	info := t.Info()
	var def *TableDef
	if defs != nil {
		if d, ok := defs.Load(info); ok {
			def = d.(*TableDef)
		}
	}
	if def == nil {
		def = &TableDef{PK: slices.Clone(info.Def.PrimaryKey), memo: new(sync.Map)}
		for _, c := range info.Def.Columns {
			def.Columns = append(def.Columns, Column{Name: c.Name, Type: c.Type, NotNull: c.NotNull})
		}
		if defs != nil {
			defs.Store(info, def)
		}
	}
	return &Table{Name: info.Def.Name, OID: info.OID, TypOID: rowTypeOID(info.OID), PKOID: info.IndexOID, Def: *def, src: t}
}
