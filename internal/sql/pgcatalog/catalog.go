package pgcatalog

import (
	"cmp"
	"slices"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Namespace OIDs of the built-in schemas (PostgreSQL's own numbers;
// information_schema's varies between installations).
const (
	nsPgCatalog         = 11
	nsPgToast           = 99
	nsInformationSchema = 13207
	ownerOID            = 10
	heapAM              = 2
	btreeAM             = 403
	collationDefault    = 100
	DatabaseOwnerOID    = 6171 // pg_database_owner, owner of schema public (pg_get_userbyid)
	tablespaceDefault   = 1663 // pg_default
	tablespaceGlobal    = 1664 // pg_global
)

type nsInfo struct {
	oid  uint32
	name string
}

// namespaces lists every schema in OID order: the built-in ones first.
func namespaces(v *memcat.Version) []nsInfo {
	out := []nsInfo{{nsPgCatalog, "pg_catalog"}, {nsPgToast, "pg_toast"}}
	var user []nsInfo
	for _, s := range v.SchemaList() {
		user = append(user, nsInfo{s.OID, s.Name})
	}
	// public (2200) sorts before information_schema; later schemas after.
	for _, u := range user {
		if u.oid < nsInformationSchema {
			out = append(out, u)
		}
	}
	out = append(out, nsInfo{nsInformationSchema, "information_schema"})
	for _, u := range user {
		if u.oid >= nsInformationSchema {
			out = append(out, u)
		}
	}
	return out
}

// TableInfo is a table of a catalog version with its schema.
type TableInfo struct {
	Schema *memcat.Schema
	Table  *memcat.Table
}

// Tables lists every table of v, in OID order.
func Tables(v *memcat.Version) []TableInfo {
	var out []TableInfo
	for _, s := range v.SchemaList() {
		for _, t := range s.Tables {
			out = append(out, TableInfo{s, t})
		}
	}
	slices.SortFunc(out, func(a, b TableInfo) int { return cmp.Compare(a.Table.OID, b.Table.OID) })
	return out
}

func pkIndexDef(ti TableInfo) string {
	var cols []string
	for _, i := range ti.Table.Def.PK {
		cols = append(cols, ti.Table.Def.Columns[i].Name)
	}
	return "CREATE UNIQUE INDEX " + ti.Table.Name + "_pkey ON " + ti.Schema.Name + "." + ti.Table.Name + " USING btree (" + strings.Join(cols, ", ") + ")"
}

// build generates the relation, or ok=false if the name is not one.
func build(c *Context, schema, name string) (*Relation, bool) {
	v := c.Version
	if schema == "information_schema" {
		return infoSchema(c, v, name)
	}
	switch name {
	case "pg_namespace":
		r := newRel([]col{{"oid", tOID}, {"nspname", tName}, {"nspowner", tOID}, {"nspacl", tText}})
		for _, n := range namespaces(v) {
			owner := uint32(ownerOID)
			if n.name == "public" {
				owner = DatabaseOwnerOID
			}
			r.add(oidV(n.oid), nameV(n.name), oidV(owner), datum.Null)
		}
		return r, true
	case "pg_class":
		r := newRel([]col{{"oid", tOID}, {"relname", tName}, {"relnamespace", tOID}, {"reltype", tOID},
			{"reloftype", tOID}, {"relowner", tOID}, {"relam", tOID}, {"relfilenode", tOID},
			{"reltablespace", tOID}, {"relpages", tInt4}, {"reltuples", datum.Float4},
			{"relallvisible", tInt4}, {"reltoastrelid", tOID}, {"relhasindex", tBool},
			{"relisshared", tBool}, {"relpersistence", tChar}, {"relkind", tChar}, {"relnatts", tInt2},
			{"relchecks", tInt2}, {"relhasrules", tBool}, {"relhastriggers", tBool},
			{"relhassubclass", tBool}, {"relrowsecurity", tBool}, {"relforcerowsecurity", tBool},
			{"relispopulated", tBool}, {"relreplident", tChar}, {"relispartition", tBool},
			{"relrewrite", tOID}, {"reloptions", datum.TextArray}, {"relpartbound", tText}})
		r.Rows = withSysRows("pg_class", colsOf(r), 2*len(Tables(v)))
		r.Sys = len(r.Rows)
		for _, ti := range Tables(v) {
			t := ti.Table
			r.add(oidV(t.OID), nameV(t.Name), oidV(ti.Schema.OID), oidV(t.TypOID), oidV(0), oidV(ownerOID),
				oidV(heapAM), oidV(t.OID), oidV(0), intV(0), datum.FloatValue(-1), intV(0), oidV(0),
				boolV(t.PKOID != 0), boolV(false), nameV("p"), nameV("r"), intV(len(t.Def.Columns)), intV(0),
				boolV(false), boolV(false), boolV(false), boolV(false), boolV(false), boolV(true),
				nameV("d"), boolV(false), oidV(0), datum.Null, datum.Null)
			if t.PKOID != 0 {
				r.add(oidV(t.PKOID), nameV(t.Name+"_pkey"), oidV(ti.Schema.OID), oidV(0), oidV(0), oidV(ownerOID),
					oidV(btreeAM), oidV(t.PKOID), oidV(0), intV(1), datum.FloatValue(0), intV(0), oidV(0),
					boolV(false), boolV(false), nameV("p"), nameV("i"), intV(len(t.Def.PK)), intV(0),
					boolV(false), boolV(false), boolV(false), boolV(false), boolV(false), boolV(true),
					nameV("n"), boolV(false), oidV(0), datum.Null, datum.Null)
			}
		}
		return r, true
	case "pg_attribute":
		r := newRel([]col{{"attrelid", tOID}, {"attname", tName}, {"atttypid", tOID}, {"attlen", tInt2},
			{"attnum", tInt2}, {"attndims", tInt4}, {"atttypmod", tInt4}, {"attnotnull", tBool},
			{"atthasdef", tBool}, {"atthasmissing", tBool}, {"attidentity", tChar}, {"attgenerated", tChar},
			{"attisdropped", tBool}, {"attislocal", tBool}, {"attcollation", tOID}, {"attstattarget", tInt4}})
		tables := Tables(v)
		extra := 0
		for _, ti := range tables {
			extra += len(ti.Table.Def.Columns)
		}
		sys := sysAttributes(colsOf(r))
		r.Rows = make([][]datum.Value, len(sys), len(sys)+extra)
		copy(r.Rows, sys)
		r.Sys = len(sys)
		for _, ti := range tables {
			for i, c := range ti.Table.Def.Columns {
				ndims, coll := 0, uint32(0)
				if c.Type.Kind() == datum.KindArray {
					ndims = 1
				}
				if c.Type.Kind() == datum.KindText && c.Type.OID != datum.OIDName && c.Type.OID != datum.OIDChar {
					coll = collationDefault
				}
				r.add(oidV(ti.Table.OID), nameV(c.Name), oidV(c.Type.OID), intV(int(c.Type.Len())), intV(i+1),
					intV(ndims), intV(int(c.Type.Mod)), boolV(c.NotNull), boolV(false), boolV(false),
					nameV(""), nameV(""), boolV(false), boolV(true), oidV(coll), intV(-1),
					nameV(attStorage(int(c.Type.Len()))), nameV(""))
			}
		}
		r.Cols = append(r.Cols, Column{Name: "attstorage", Type: tChar}, Column{Name: "attcompression", Type: tChar})
		return r, true
	case "pg_type":
		r := newRel([]col{{"oid", tOID}, {"typname", tName}, {"typnamespace", tOID}, {"typowner", tOID},
			{"typlen", tInt2}, {"typbyval", tBool}, {"typtype", tChar}, {"typcategory", tChar},
			{"typrelid", tOID}, {"typelem", tOID}, {"typarray", tOID}, {"typnotnull", tBool},
			{"typbasetype", tOID}, {"typtypmod", tInt4}, {"typndims", tInt4}, {"typcollation", tOID}})
		r.Rows = withSysRows("pg_type", colsOf(r), len(Tables(v)))
		r.Sys = len(r.Rows)
		for _, ti := range Tables(v) {
			r.add(oidV(ti.Table.TypOID), nameV(ti.Table.Name), oidV(ti.Schema.OID), oidV(ownerOID), intV(-1),
				boolV(false), nameV("c"), nameV("C"), oidV(ti.Table.OID), oidV(0), oidV(0),
				boolV(false), oidV(0), intV(-1), intV(0), oidV(0))
		}
		return r, true
	case "pg_description":
		return newRel([]col{{"objoid", tOID}, {"classoid", tOID}, {"objsubid", tInt4}, {"description", tText}}), true
	case "pg_enum":
		return newRel([]col{{"oid", tOID}, {"enumtypid", tOID}, {"enumsortorder", datum.Float4}, {"enumlabel", tName}}), true
	case "pg_am":
		r := newRel([]col{{"oid", tOID}, {"amname", tName}, {"amhandler", tOID}, {"amtype", tChar}})
		for _, am := range []struct {
			oid  uint32
			name string
			typ  string
		}{{2, "heap", "t"}, {403, "btree", "i"}, {405, "hash", "i"}, {783, "gist", "i"}, {2742, "gin", "i"}, {4000, "spgist", "i"}, {3580, "brin", "i"}} {
			r.add(oidV(am.oid), nameV(am.name), oidV(0), nameV(am.typ))
		}
		return r, true
	case "pg_collation":
		r := newRel([]col{{"oid", tOID}, {"collname", tName}, {"collnamespace", tOID}, {"collprovider", tChar}})
		r.add(oidV(100), nameV("default"), oidV(nsPgCatalog), nameV("d"))
		r.add(oidV(950), nameV("C"), oidV(nsPgCatalog), nameV("c"))
		r.add(oidV(951), nameV("POSIX"), oidV(nsPgCatalog), nameV("c"))
		return r, true
	case "pg_index":
		r := newRel([]col{{"indexrelid", tOID}, {"indrelid", tOID}, {"indnatts", tInt2}, {"indnkeyatts", tInt2},
			{"indisunique", tBool}, {"indisprimary", tBool}, {"indisexclusion", tBool}, {"indimmediate", tBool},
			{"indisclustered", tBool}, {"indisvalid", tBool}, {"indcheckxmin", tBool}, {"indisready", tBool},
			{"indislive", tBool}, {"indisreplident", tBool}, {"indkey", datum.Type{OID: datum.OIDInt2Vector, Mod: -1}}})
		for _, ti := range Tables(v) {
			t := ti.Table
			if t.PKOID == 0 {
				continue
			}
			keys := pkColumns(t)
			r.add(oidV(t.PKOID), oidV(t.OID), intV(len(t.Def.PK)), intV(len(t.Def.PK)), boolV(true), boolV(true), boolV(false),
				boolV(true), boolV(false), boolV(true), boolV(false), boolV(true), boolV(true), boolV(false),
				keys)
		}
		return r, true
	case "pg_attrdef":
		// Lake tables have no column defaults.
		return newRel([]col{{"oid", tOID}, {"adrelid", tOID}, {"adnum", tInt2}, {"adbin", tText}}), true
	case "pg_policy":
		return newRel([]col{{"oid", tOID}, {"polname", tName}, {"polrelid", tOID}, {"polcmd", tChar}, {"polpermissive", tBool},
			{"polroles", tText}, {"polqual", tText}, {"polwithcheck", tText}}), true
	case "pg_statistic_ext":
		return newRel([]col{{"oid", tOID}, {"stxrelid", tOID}, {"stxname", tName}, {"stxnamespace", tOID}, {"stxowner", tOID},
			{"stxstattarget", tInt4}, {"stxkeys", tText}, {"stxkind", datum.TextArray}}), true
	case "pg_publication":
		return newRel([]col{{"oid", tOID}, {"pubname", tName}, {"pubowner", tOID}, {"puballtables", tBool}, {"pubviaroot", tBool}}), true
	case "pg_publication_rel":
		return newRel([]col{{"oid", tOID}, {"prpubid", tOID}, {"prrelid", tOID}, {"prqual", tText}, {"prattrs", tText}}), true
	case "pg_publication_namespace":
		return newRel([]col{{"oid", tOID}, {"pnpubid", tOID}, {"pnnspid", tOID}}), true
	case "pg_inherits":
		return newRel([]col{{"inhrelid", tOID}, {"inhparent", tOID}, {"inhseqno", tInt4}, {"inhdetachpending", tBool}}), true
	case "pg_constraint":
		r := newRel([]col{{"oid", tOID}, {"conname", tName}, {"connamespace", tOID}, {"contype", tChar},
			{"condeferrable", tBool}, {"condeferred", tBool}, {"convalidated", tBool}, {"conrelid", tOID},
			{"contypid", tOID}, {"conindid", tOID}, {"conparentid", tOID}, {"confrelid", tOID},
			{"conislocal", tBool}, {"coninhcount", tInt4}, {"connoinherit", tBool}, {"conkey", datum.Int2Array}})
		r.Rows = withSysRows("pg_constraint", colsOf(r), len(Tables(v)))
		r.Sys = len(r.Rows)
		for _, ti := range Tables(v) {
			t := ti.Table
			if t.PKOID == 0 {
				continue
			}
			keys := pkColumns(t)
			r.add(oidV(t.PKOID), nameV(t.Name+"_pkey"), oidV(ti.Schema.OID), nameV("p"), boolV(false), boolV(false),
				boolV(true), oidV(t.OID), oidV(0), oidV(t.PKOID), oidV(0), oidV(0), boolV(true), intV(0), boolV(true),
				keys)
		}
		return r, true
	case "pg_indexes":
		r := newRel([]col{{"schemaname", tName}, {"tablename", tName}, {"indexname", tName}, {"tablespace", tName}, {"indexdef", tText}})
		r.Rows = withSysRows("pg_indexes", colsOf(r), len(Tables(v)))
		r.Sys = len(r.Rows)
		for _, ti := range Tables(v) {
			if ti.Table.PKOID != 0 {
				r.add(nameV(ti.Schema.Name), nameV(ti.Table.Name), nameV(ti.Table.Name+"_pkey"), datum.Null, datum.TextValue(pkIndexDef(ti)))
			}
		}
		return r, true
	case "pg_settings":
		r := newRel([]col{{"name", tText}, {"setting", tText}})
		for k, val := range c.Settings {
			r.add(datum.TextValue(k), datum.TextValue(val))
		}
		return r, true
	case "pg_database":
		r := newRel([]col{{"oid", tOID}, {"datname", tName}, {"datdba", tOID}, {"encoding", tInt4},
			{"datlocprovider", tChar}, {"datcollate", tText}, {"datctype", tText}, {"daticulocale", tText},
			{"datistemplate", tBool}, {"datallowconn", tBool}, {"datacl", datum.TextArray}, {"dattablespace", tOID}})
		for i, name := range c.Databases {
			r.add(oidV(DatabaseOID(i)), nameV(name), oidV(ownerOID), intV(6), nameV("c"), nameV("C.UTF-8"),
				nameV("C.UTF-8"), datum.Null, boolV(false), boolV(true), datum.Null, oidV(tablespaceDefault))
		}
		return r, true
	case "pg_roles", "pg_user", "pg_authid":
		return roles(c), true
	case "pg_auth_members":
		return newRel([]col{{"roleid", tOID}, {"member", tOID}, {"grantor", tOID}, {"admin_option", tBool}}), true
	case "pg_tablespace":
		r := newRel([]col{{"oid", tOID}, {"spcname", tName}, {"spcowner", tOID}, {"spcacl", datum.TextArray}, {"spcoptions", datum.TextArray}})
		r.add(oidV(tablespaceDefault), nameV("pg_default"), oidV(ownerOID), datum.Null, datum.Null)
		r.add(oidV(tablespaceGlobal), nameV("pg_global"), oidV(ownerOID), datum.Null, datum.Null)
		return r, true
	case "pg_stat_activity":
		return activity(c), true
	}
	return nil, false
}

func infoSchema(c *Context, v *memcat.Version, name string) (*Relation, bool) {
	db, user := c.Database, c.User
	switch name {
	case "schemata":
		r := newRel([]col{{"catalog_name", tName}, {"schema_name", tName}, {"schema_owner", tName}})
		for _, n := range namespaces(v) {
			r.add(nameV(db), nameV(n.name), nameV(user))
		}
		return r, true
	case "tables":
		r := newRel([]col{{"table_catalog", tName}, {"table_schema", tName}, {"table_name", tName}, {"table_type", datum.Varchar}})
		for _, ti := range Tables(v) {
			r.add(nameV(db), nameV(ti.Schema.Name), nameV(ti.Table.Name), datum.TextValue("BASE TABLE"))
		}
		return r, true
	case "columns":
		r := newRel([]col{{"table_catalog", tName}, {"table_schema", tName}, {"table_name", tName},
			{"column_name", tName}, {"ordinal_position", tInt4}, {"column_default", datum.Varchar},
			{"is_nullable", datum.Varchar}, {"data_type", datum.Varchar}, {"character_maximum_length", tInt4},
			{"numeric_precision", tInt4}, {"numeric_scale", tInt4}, {"udt_schema", tName}, {"udt_name", tName}})
		for _, ti := range Tables(v) {
			for i, c := range ti.Table.Def.Columns {
				nullable := "YES"
				if c.NotNull {
					nullable = "NO"
				}
				dt := datum.Type{OID: c.Type.OID, Mod: -1}.String()
				if c.Type.Kind() == datum.KindArray {
					dt = "ARRAY"
				}
				maxLen, prec, scale := datum.Null, datum.Null, datum.Null
				if (c.Type.OID == datum.OIDVarchar || c.Type.OID == datum.OIDBPChar) && c.Type.Mod >= 4 {
					maxLen = intV(int(c.Type.Mod - 4))
				}
				if p, s, ok := c.Type.NumericPrecisionScale(); ok {
					prec, scale = intV(p), intV(s)
				}
				r.add(nameV(db), nameV(ti.Schema.Name), nameV(ti.Table.Name), nameV(c.Name), intV(i+1),
					datum.Null, datum.TextValue(nullable), datum.TextValue(dt), maxLen, prec, scale,
					nameV("pg_catalog"), nameV(c.Type.TypeName()))
			}
		}
		return r, true
	}
	return nil, false
}

// IndexDef is pg_get_indexdef (pg_get_constraintdef when constraint) for a
// table's primary key, the only index and constraint moraine's tables have;
// searchSchema is the first schema of the session's search path, whose
// tables pg_get_indexdef names without their schema. "" for any other oid.
func IndexDef(v *memcat.Version, oid uint32, constraint bool, searchSchema string) string {
	for _, ti := range Tables(v) {
		if ti.Table.PKOID != oid || oid == 0 {
			continue
		}
		if !constraint {
			def := pkIndexDef(ti)
			if ti.Schema.Name == searchSchema {
				// pg_get_indexdef names a visible table without its schema.
				def = strings.Replace(def, " ON "+ti.Schema.Name+".", " ON ", 1)
			}
			return def
		}
		var cols []string
		for _, i := range ti.Table.Def.PK {
			cols = append(cols, ti.Table.Def.Columns[i].Name)
		}
		return "PRIMARY KEY (" + strings.Join(cols, ", ") + ")"
	}
	return ""
}

// pkColumns is a primary key's column numbers (from 1), as pg_index.indkey
// and pg_constraint.conkey hold them.
func pkColumns(t *memcat.Table) datum.Value {
	keys := make([]datum.Value, len(t.Def.PK))
	for i, k := range t.Def.PK {
		keys[i] = intV(k + 1)
	}
	return datum.ArrayValue(datum.Int2, keys)
}
