package sql

import (
	"cmp"
	"slices"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// The pg_catalog and information_schema relations moraine answers,
// generated from the transaction's view of the catalog (so a table created
// earlier in the same transaction — DuckLake's inlined-data tables — is
// already visible). Only what DuckDB's postgres extension and psql's \dt and
// \d read is present; every relation has relpages 0, which keeps the
// extension's scans serial.

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
	databaseOwnerOID    = 6171 // pg_database_owner, owner of schema public
	tablespaceDefault   = 1663 // pg_default
	tablespaceGlobal    = 1664 // pg_global
)

type vcol struct {
	name string
	typ  datum.Type
}

var (
	tOID  = datum.OID
	tName = datum.Name
	tChar = datum.Char
	tBool = datum.Bool
	tInt2 = datum.Int2
	tInt4 = datum.Int4
	tText = datum.Text
)

func mkRel(cols []vcol) *rel {
	r := &rel{cols: make([]colInfo, len(cols))}
	for i, c := range cols {
		r.cols[i] = colInfo{name: c.name, typ: c.typ}
	}
	return r
}

func (r *rel) add(vals ...datum.Value) { r.rows = append(r.rows, vals) }

func vcols(r *rel) []vcol {
	out := make([]vcol, len(r.cols))
	for i, c := range r.cols {
		out[i] = vcol{c.name, c.typ}
	}
	return out
}

func oidV(o uint32) datum.Value  { return datum.IntValue(int64(o)) }
func nameV(s string) datum.Value { return datum.TextValue(s) }
func intV(i int) datum.Value     { return datum.IntValue(int64(i)) }
func boolV(b bool) datum.Value   { return datum.BoolValue(b) }

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

type tableInfo struct {
	schema *memcat.Schema
	t      *memcat.Table
}

func tablesOf(v *memcat.Version) []tableInfo {
	var out []tableInfo
	for _, s := range v.SchemaList() {
		for _, t := range s.Tables {
			out = append(out, tableInfo{s, t})
		}
	}
	slices.SortFunc(out, func(a, b tableInfo) int { return cmp.Compare(a.t.OID, b.t.OID) })
	return out
}

func pkIndexDef(ti tableInfo) string {
	var cols []string
	for _, i := range ti.t.Def.PK {
		cols = append(cols, ti.t.Def.Columns[i].Name)
	}
	return "CREATE UNIQUE INDEX " + ti.t.Name + "_pkey ON " + ti.schema.Name + "." + ti.t.Name + " USING btree (" + strings.Join(cols, ", ") + ")"
}

// virtual returns a system relation, or ok=false if the name is not one.
func (x *exec) virtual(schema, name string) (*rel, bool, error) {
	v := x.s.view()
	if schema == "information_schema" {
		return x.infoSchema(v, name)
	}
	switch name {
	case "pg_namespace":
		r := mkRel([]vcol{{"oid", tOID}, {"nspname", tName}, {"nspowner", tOID}, {"nspacl", tText}})
		for _, n := range namespaces(v) {
			owner := uint32(ownerOID)
			if n.name == "public" {
				owner = databaseOwnerOID
			}
			r.add(oidV(n.oid), nameV(n.name), oidV(owner), datum.Null)
		}
		return r, true, nil
	case "pg_class":
		r := mkRel([]vcol{{"oid", tOID}, {"relname", tName}, {"relnamespace", tOID}, {"reltype", tOID},
			{"reloftype", tOID}, {"relowner", tOID}, {"relam", tOID}, {"relfilenode", tOID},
			{"reltablespace", tOID}, {"relpages", tInt4}, {"reltuples", datum.Float4},
			{"relallvisible", tInt4}, {"reltoastrelid", tOID}, {"relhasindex", tBool},
			{"relisshared", tBool}, {"relpersistence", tChar}, {"relkind", tChar}, {"relnatts", tInt2},
			{"relchecks", tInt2}, {"relhasrules", tBool}, {"relhastriggers", tBool},
			{"relhassubclass", tBool}, {"relrowsecurity", tBool}, {"relforcerowsecurity", tBool},
			{"relispopulated", tBool}, {"relreplident", tChar}, {"relispartition", tBool},
			{"relrewrite", tOID}, {"reloptions", datum.TextArray}, {"relpartbound", tText}})
		r.rows = withSysRows("pg_class", vcols(r), 2*len(tablesOf(v)))
		for _, ti := range tablesOf(v) {
			t := ti.t
			r.add(oidV(t.OID), nameV(t.Name), oidV(ti.schema.OID), oidV(t.TypOID), oidV(0), oidV(ownerOID),
				oidV(heapAM), oidV(t.OID), oidV(0), intV(0), datum.FloatValue(-1), intV(0), oidV(0),
				boolV(t.PKOID != 0), boolV(false), nameV("p"), nameV("r"), intV(len(t.Def.Columns)), intV(0),
				boolV(false), boolV(false), boolV(false), boolV(false), boolV(false), boolV(true),
				nameV("d"), boolV(false), oidV(0), datum.Null, datum.Null)
			if t.PKOID != 0 {
				r.add(oidV(t.PKOID), nameV(t.Name+"_pkey"), oidV(ti.schema.OID), oidV(0), oidV(0), oidV(ownerOID),
					oidV(btreeAM), oidV(t.PKOID), oidV(0), intV(1), datum.FloatValue(0), intV(0), oidV(0),
					boolV(false), boolV(false), nameV("p"), nameV("i"), intV(len(t.Def.PK)), intV(0),
					boolV(false), boolV(false), boolV(false), boolV(false), boolV(false), boolV(true),
					nameV("n"), boolV(false), oidV(0), datum.Null, datum.Null)
			}
		}
		return r, true, nil
	case "pg_attribute":
		r := mkRel([]vcol{{"attrelid", tOID}, {"attname", tName}, {"atttypid", tOID}, {"attlen", tInt2},
			{"attnum", tInt2}, {"attndims", tInt4}, {"atttypmod", tInt4}, {"attnotnull", tBool},
			{"atthasdef", tBool}, {"atthasmissing", tBool}, {"attidentity", tChar}, {"attgenerated", tChar},
			{"attisdropped", tBool}, {"attislocal", tBool}, {"attcollation", tOID}, {"attstattarget", tInt4}})
		tables := tablesOf(v)
		extra := 0
		for _, ti := range tables {
			extra += len(ti.t.Def.Columns)
		}
		sys := sysAttributes(vcols(r))
		r.rows = make([][]datum.Value, len(sys), len(sys)+extra)
		copy(r.rows, sys)
		for _, ti := range tables {
			for i, c := range ti.t.Def.Columns {
				ndims, coll := 0, uint32(0)
				if c.Type.Kind() == datum.KindArray {
					ndims = 1
				}
				if c.Type.Kind() == datum.KindText && c.Type.OID != datum.OIDName && c.Type.OID != datum.OIDChar {
					coll = collationDefault
				}
				r.add(oidV(ti.t.OID), nameV(c.Name), oidV(c.Type.OID), intV(int(c.Type.Len())), intV(i+1),
					intV(ndims), intV(int(c.Type.Mod)), boolV(c.NotNull), boolV(false), boolV(false),
					nameV(""), nameV(""), boolV(false), boolV(true), oidV(coll), intV(-1),
					nameV(attStorage(int(c.Type.Len()))), nameV(""))
			}
		}
		r.cols = append(r.cols, colInfo{name: "attstorage", typ: tChar}, colInfo{name: "attcompression", typ: tChar})
		return r, true, nil
	case "pg_type":
		r := mkRel([]vcol{{"oid", tOID}, {"typname", tName}, {"typnamespace", tOID}, {"typowner", tOID},
			{"typlen", tInt2}, {"typbyval", tBool}, {"typtype", tChar}, {"typcategory", tChar},
			{"typrelid", tOID}, {"typelem", tOID}, {"typarray", tOID}, {"typnotnull", tBool},
			{"typbasetype", tOID}, {"typtypmod", tInt4}, {"typndims", tInt4}, {"typcollation", tOID}})
		r.rows = withSysRows("pg_type", vcols(r), len(tablesOf(v)))
		for _, ti := range tablesOf(v) {
			r.add(oidV(ti.t.TypOID), nameV(ti.t.Name), oidV(ti.schema.OID), oidV(ownerOID), intV(-1),
				boolV(false), nameV("c"), nameV("C"), oidV(ti.t.OID), oidV(0), oidV(0),
				boolV(false), oidV(0), intV(-1), intV(0), oidV(0))
		}
		return r, true, nil
	case "pg_description":
		return mkRel([]vcol{{"objoid", tOID}, {"classoid", tOID}, {"objsubid", tInt4}, {"description", tText}}), true, nil
	case "pg_enum":
		return mkRel([]vcol{{"oid", tOID}, {"enumtypid", tOID}, {"enumsortorder", datum.Float4}, {"enumlabel", tName}}), true, nil
	case "pg_am":
		r := mkRel([]vcol{{"oid", tOID}, {"amname", tName}, {"amhandler", tOID}, {"amtype", tChar}})
		for _, am := range []struct {
			oid  uint32
			name string
			typ  string
		}{{2, "heap", "t"}, {403, "btree", "i"}, {405, "hash", "i"}, {783, "gist", "i"}, {2742, "gin", "i"}, {4000, "spgist", "i"}, {3580, "brin", "i"}} {
			r.add(oidV(am.oid), nameV(am.name), oidV(0), nameV(am.typ))
		}
		return r, true, nil
	case "pg_collation":
		r := mkRel([]vcol{{"oid", tOID}, {"collname", tName}, {"collnamespace", tOID}, {"collprovider", tChar}})
		r.add(oidV(100), nameV("default"), oidV(nsPgCatalog), nameV("d"))
		r.add(oidV(950), nameV("C"), oidV(nsPgCatalog), nameV("c"))
		r.add(oidV(951), nameV("POSIX"), oidV(nsPgCatalog), nameV("c"))
		return r, true, nil
	case "pg_index":
		r := mkRel([]vcol{{"indexrelid", tOID}, {"indrelid", tOID}, {"indnatts", tInt2}, {"indnkeyatts", tInt2},
			{"indisunique", tBool}, {"indisprimary", tBool}, {"indisexclusion", tBool}, {"indimmediate", tBool},
			{"indisclustered", tBool}, {"indisvalid", tBool}, {"indcheckxmin", tBool}, {"indisready", tBool},
			{"indislive", tBool}, {"indisreplident", tBool}, {"indkey", datum.Type{OID: datum.OIDInt2Vector, Mod: -1}}})
		for _, ti := range tablesOf(v) {
			t := ti.t
			if t.PKOID == 0 {
				continue
			}
			keys := make([]datum.Value, len(t.Def.PK))
			for i, k := range t.Def.PK {
				keys[i] = intV(k + 1)
			}
			r.add(oidV(t.PKOID), oidV(t.OID), intV(len(keys)), intV(len(keys)), boolV(true), boolV(true), boolV(false),
				boolV(true), boolV(false), boolV(true), boolV(false), boolV(true), boolV(true), boolV(false),
				datum.ArrayValue(datum.Int2, keys))
		}
		return r, true, nil
	case "pg_attrdef":
		// Lake tables have no column defaults.
		return mkRel([]vcol{{"oid", tOID}, {"adrelid", tOID}, {"adnum", tInt2}, {"adbin", tText}}), true, nil
	case "pg_policy":
		return mkRel([]vcol{{"oid", tOID}, {"polname", tName}, {"polrelid", tOID}, {"polcmd", tChar}, {"polpermissive", tBool},
			{"polroles", tText}, {"polqual", tText}, {"polwithcheck", tText}}), true, nil
	case "pg_statistic_ext":
		return mkRel([]vcol{{"oid", tOID}, {"stxrelid", tOID}, {"stxname", tName}, {"stxnamespace", tOID}, {"stxowner", tOID},
			{"stxstattarget", tInt4}, {"stxkeys", tText}, {"stxkind", datum.TextArray}}), true, nil
	case "pg_publication":
		return mkRel([]vcol{{"oid", tOID}, {"pubname", tName}, {"pubowner", tOID}, {"puballtables", tBool}, {"pubviaroot", tBool}}), true, nil
	case "pg_publication_rel":
		return mkRel([]vcol{{"oid", tOID}, {"prpubid", tOID}, {"prrelid", tOID}, {"prqual", tText}, {"prattrs", tText}}), true, nil
	case "pg_publication_namespace":
		return mkRel([]vcol{{"oid", tOID}, {"pnpubid", tOID}, {"pnnspid", tOID}}), true, nil
	case "pg_inherits":
		return mkRel([]vcol{{"inhrelid", tOID}, {"inhparent", tOID}, {"inhseqno", tInt4}, {"inhdetachpending", tBool}}), true, nil
	case "pg_constraint":
		r := mkRel([]vcol{{"oid", tOID}, {"conname", tName}, {"connamespace", tOID}, {"contype", tChar},
			{"condeferrable", tBool}, {"condeferred", tBool}, {"convalidated", tBool}, {"conrelid", tOID},
			{"contypid", tOID}, {"conindid", tOID}, {"conparentid", tOID}, {"confrelid", tOID},
			{"conislocal", tBool}, {"coninhcount", tInt4}, {"connoinherit", tBool}, {"conkey", datum.Int2Array}})
		r.rows = withSysRows("pg_constraint", vcols(r), len(tablesOf(v)))
		for _, ti := range tablesOf(v) {
			t := ti.t
			if t.PKOID == 0 {
				continue
			}
			keys := make([]datum.Value, len(t.Def.PK))
			for i, k := range t.Def.PK {
				keys[i] = intV(k + 1)
			}
			r.add(oidV(t.PKOID), nameV(t.Name+"_pkey"), oidV(ti.schema.OID), nameV("p"), boolV(false), boolV(false),
				boolV(true), oidV(t.OID), oidV(0), oidV(t.PKOID), oidV(0), oidV(0), boolV(true), intV(0), boolV(true),
				datum.ArrayValue(datum.Int2, keys))
		}
		return r, true, nil
	case "pg_indexes":
		r := mkRel([]vcol{{"schemaname", tName}, {"tablename", tName}, {"indexname", tName}, {"tablespace", tName}, {"indexdef", tText}})
		r.rows = withSysRows("pg_indexes", vcols(r), len(tablesOf(v)))
		for _, ti := range tablesOf(v) {
			if ti.t.PKOID != 0 {
				r.add(nameV(ti.schema.Name), nameV(ti.t.Name), nameV(ti.t.Name+"_pkey"), datum.Null, datum.TextValue(pkIndexDef(ti)))
			}
		}
		return r, true, nil
	case "pg_settings":
		r := mkRel([]vcol{{"name", tText}, {"setting", tText}})
		for k, val := range x.s.settings {
			r.add(datum.TextValue(k), datum.TextValue(val))
		}
		return r, true, nil
	case "pg_database":
		r := mkRel([]vcol{{"oid", tOID}, {"datname", tName}, {"datdba", tOID}, {"encoding", tInt4},
			{"datlocprovider", tChar}, {"datcollate", tText}, {"datctype", tText}, {"daticulocale", tText},
			{"datistemplate", tBool}, {"datallowconn", tBool}, {"datacl", datum.TextArray}, {"dattablespace", tOID}})
		for i, name := range x.s.ex.cat.Catalog().Databases() {
			r.add(oidV(uint32(16384+i)), nameV(name), oidV(ownerOID), intV(6), nameV("c"), nameV("C.UTF-8"),
				nameV("C.UTF-8"), datum.Null, boolV(false), boolV(true), datum.Null, oidV(tablespaceDefault))
		}
		return r, true, nil
	case "pg_roles", "pg_user", "pg_authid":
		return x.roles(), true, nil
	case "pg_auth_members":
		return mkRel([]vcol{{"roleid", tOID}, {"member", tOID}, {"grantor", tOID}, {"admin_option", tBool}}), true, nil
	case "pg_tablespace":
		r := mkRel([]vcol{{"oid", tOID}, {"spcname", tName}, {"spcowner", tOID}, {"spcacl", datum.TextArray}, {"spcoptions", datum.TextArray}})
		r.add(oidV(tablespaceDefault), nameV("pg_default"), oidV(ownerOID), datum.Null, datum.Null)
		r.add(oidV(tablespaceGlobal), nameV("pg_global"), oidV(ownerOID), datum.Null, datum.Null)
		return r, true, nil
	case "pg_stat_activity":
		return x.statActivity(), true, nil
	}
	return nil, false, nil
}

func (x *exec) infoSchema(v *memcat.Version, name string) (*rel, bool, error) {
	switch name {
	case "schemata":
		r := mkRel([]vcol{{"catalog_name", tName}, {"schema_name", tName}, {"schema_owner", tName}})
		for _, n := range namespaces(v) {
			r.add(nameV(x.s.dbName), nameV(n.name), nameV(x.s.user))
		}
		return r, true, nil
	case "tables":
		r := mkRel([]vcol{{"table_catalog", tName}, {"table_schema", tName}, {"table_name", tName}, {"table_type", datum.Varchar}})
		for _, ti := range tablesOf(v) {
			r.add(nameV(x.s.dbName), nameV(ti.schema.Name), nameV(ti.t.Name), datum.TextValue("BASE TABLE"))
		}
		return r, true, nil
	case "columns":
		r := mkRel([]vcol{{"table_catalog", tName}, {"table_schema", tName}, {"table_name", tName},
			{"column_name", tName}, {"ordinal_position", tInt4}, {"column_default", datum.Varchar},
			{"is_nullable", datum.Varchar}, {"data_type", datum.Varchar}, {"character_maximum_length", tInt4},
			{"numeric_precision", tInt4}, {"numeric_scale", tInt4}, {"udt_schema", tName}, {"udt_name", tName}})
		for _, ti := range tablesOf(v) {
			for i, c := range ti.t.Def.Columns {
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
				r.add(nameV(x.s.dbName), nameV(ti.schema.Name), nameV(ti.t.Name), nameV(c.Name), intV(i+1),
					datum.Null, datum.TextValue(nullable), datum.TextValue(dt), maxLen, prec, scale,
					nameV("pg_catalog"), nameV(c.Type.TypeName()))
			}
		}
		return r, true, nil
	}
	return nil, false, nil
}

// indexDef is pg_get_indexdef / pg_get_constraintdef for a lake table's
// primary key (the only index and constraint moraine's tables have).
func (x *exec) indexDef(oid uint32, constraint bool) string {
	for _, ti := range tablesOf(x.s.view()) {
		if ti.t.PKOID != oid || oid == 0 {
			continue
		}
		if !constraint {
			def := pkIndexDef(ti)
			if ti.schema.Name == x.s.searchSchema() {
				// pg_get_indexdef names a visible table without its schema.
				def = strings.Replace(def, " ON "+ti.schema.Name+".", " ON ", 1)
			}
			return def
		}
		var cols []string
		for _, i := range ti.t.Def.PK {
			cols = append(cols, ti.t.Def.Columns[i].Name)
		}
		return "PRIMARY KEY (" + strings.Join(cols, ", ") + ")"
	}
	return ""
}
