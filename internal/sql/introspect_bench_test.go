package sql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/replay"
)

// introspectionQueries returns the reads of PostgreSQL's catalogs DuckDB's
// postgres extension sent in s11_commit_mix: the statements of its
// whole-database load and one per-table load.
func introspectionQueries(tb testing.TB) (whole []string, perTable string) {
	tb.Helper()
	tr, err := replay.LoadFixture("s11_commit_mix")
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range tr.Messages {
		if m.Dir != replay.Frontend || m.Type != "Query" {
			continue
		}
		var q struct{ String string }
		if err := json.Unmarshal(m.Raw, &q); err != nil {
			tb.Fatal(err)
		}
		switch {
		case whole == nil && strings.HasPrefix(q.String, "BEGIN") && strings.Contains(q.String, "pg_namespace.oid AS namespace_id"):
			for _, s := range strings.Split(q.String, ";") {
				if s = strings.TrimSpace(s); strings.HasPrefix(s, "SELECT") {
					whole = append(whole, s)
				}
			}
		case perTable == "" && strings.Contains(q.String, "relname='ducklake_data_file'"):
			perTable = q.String
		}
	}
	if len(whole) < 4 || perTable == "" {
		tb.Fatalf("s11 has %d whole-database reads and per-table read %q", len(whole), perTable)
	}
	return whole, perTable
}

// BenchmarkCatalogIntrospection times the executor on the catalog reads the
// postgres extension makes when it loads a DuckLake database's schema: the
// whole-database load with the catalog cache empty (a new lake, or after
// DDL), a per-table load whose text the answer cache has not seen (each
// names another table) while the built relations are cached, and one in a
// transaction with staged DDL, which uses neither cache.
func BenchmarkCatalogIntrospection(b *testing.B) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	defs, err := keyspace.FixedDefs("public", keyspace.VersionNext)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range defs {
		if out := runSQL(ctx, s, createTableSQL(d), ""); strings.Contains(out, "ERROR") {
			b.Fatal(out)
		}
	}
	whole, perTable := introspectionQueries(b)
	for _, c := range []struct {
		name    string
		queries []string
		forget  func()
	}{
		{"whole", whole, func() { ex.catalogReads = newCatalogCache() }},
		{"per-table", []string{perTable}, func() { ex.catalogReads.answers = newFIFO[catalogKey, *catalogAnswer](catalogCacheEntries) }},
		// A transaction that staged DDL (DuckLake creating its tables)
		// reads without either cache.
		{"per-table-staged", []string{perTable}, func() { ex.catalogReads.disabled = true }},
	} {
		b.Run(c.name, func(b *testing.B) {
			sink := &countSink{}
			b.ReportAllocs()
			for b.Loop() {
				c.forget()
				for _, q := range c.queries {
					if err := s.query(ctx, q, sink); err != nil {
						b.Fatalf("%s: %v", q, err)
					}
				}
			}
			if sink.n == 0 {
				b.Fatal("the reads returned no rows")
			}
		})
	}
}

// createTableSQL renders a definition as the CREATE TABLE the postgres
// extension sends.
func createTableSQL(d keyspace.TableDef) string {
	var cols []string
	for i, c := range d.Columns {
		col := fmt.Sprintf("%q %s", c.Name, c.Type.String())
		for _, pk := range d.PrimaryKey {
			if pk == i {
				col += " PRIMARY KEY"
			}
		}
		if c.NotNull && len(d.PrimaryKey) == 0 {
			col += " NOT NULL"
		}
		cols = append(cols, col)
	}
	return fmt.Sprintf("CREATE TABLE %q.%q(%s)", d.Schema, d.Name, strings.Join(cols, ", "))
}
