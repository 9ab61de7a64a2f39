package pgcatalog

import (
	"testing"

	"github.com/moraine-db/moraine/internal/sql/memcat"
)

func emptyContext() *Context {
	return &Context{Version: memcat.NewServer("lake").Database("lake").Head(), Database: "lake", User: "postgres",
		Databases: []string{"postgres", "lake"}, Roles: []string{"postgres"}, Settings: map[string]string{}}
}

// TestSysdata checks that every embedded system catalog file parses with
// its relation's column types.
func TestSysdata(t *testing.T) {
	c := emptyContext()
	for _, name := range []string{"pg_class", "pg_attribute", "pg_type", "pg_constraint", "pg_indexes"} {
		r, ok := Lookup(c, "pg_catalog", name)
		if !ok {
			t.Fatalf("%s: not answered", name)
		}
		cols := colsOf(r)
		if name == "pg_attribute" {
			cols = cols[:16] // attstorage and attcompression are computed
		}
		rows, err := loadSys(name, cols)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 100 {
			t.Errorf("%s: only %d rows", name, len(rows))
		}
	}
}

// TestExists: Exists answers exactly for the relations Lookup builds, and
// each is labelled with PostgreSQL's relation OID where PostgreSQL has it.
func TestExists(t *testing.T) {
	c := emptyContext()
	for schema, names := range map[string]map[string]bool{"pg_catalog": catalogNames, "information_schema": infoSchemaNames} {
		for name := range names {
			r, ok := build(c, schema, name)
			if !ok || r == nil {
				t.Errorf("%s.%s: Exists says yes, build says no", schema, name)
			}
		}
		if Exists(schema, "pg_nonesuch") {
			t.Errorf("%s.pg_nonesuch exists", schema)
		}
	}
	if _, ok := build(c, "pg_catalog", "pg_nonesuch"); ok {
		t.Error("build answers a relation Exists does not list")
	}
	r, _ := Lookup(c, "pg_catalog", "pg_class")
	if r.Cols[0].Name != "oid" || r.Cols[0].TableOID != 1259 || r.Cols[0].Attnum != 1 {
		t.Errorf("pg_class.oid labelled %+v, PostgreSQL's is relation 1259 attribute 1", r.Cols[0])
	}
}
