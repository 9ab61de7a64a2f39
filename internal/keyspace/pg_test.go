package keyspace

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moraine-db/moraine/internal/testenv"
)

// TestDefsMatchPostgres is a differential test against a real PostgreSQL
// (MORAINE_TEST_POSTGRES, started by .ci/run): DuckLake's captured DDL is run
// there, and what PostgreSQL reports for every table — column names and
// order, format_type, attnotnull, the primary key — must equal moraine's
// canonical definitions (FixedDefs for the fixed tables at 1.0 and 1.1, and
// the parsed definition for the inlined tables). The SQL layer serves
// pg_catalog from these definitions, so they must be what PostgreSQL says.
func TestDefsMatchPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())

	creates, _ := inventoryDDL(t)
	creates = append(creates, versionDDL(t)...)
	// The DDL by (table, column names): the data and delete file tables
	// differ between versions only in their columns.
	type shape struct {
		name string
		cols string
	}
	names := func(d TableDef) string {
		var n []string
		for _, c := range d.Columns {
			n = append(n, c.Name)
		}
		return strings.Join(n, " ")
	}
	ddl := map[shape]string{}
	var inlined []string
	for _, sql := range creates {
		def, err := parseCreate(sql)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := Known(def.Name); ok && !s.Dynamic {
			ddl[shape{def.Name, names(def)}] = sql
		} else {
			inlined = append(inlined, sql)
		}
	}
	suffix := fmt.Sprintf("%d_%d", os.Getpid(), rand.Int63())
	for _, version := range Versions {
		schema := "ks_" + strings.NewReplacer(".", "", "-", "").Replace(version) + "_" + suffix
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
		defs, err := FixedDefs(schema, version)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range defs {
			sql, ok := ddl[shape{want.Name, names(want)}]
			if !ok {
				t.Errorf("%s: no DuckLake DDL for %s(%s)", version, want.Name, names(want))
				continue
			}
			got := pgTableDef(ctx, t, conn, schema, sql)
			if got.String() != want.String() {
				t.Errorf("%s: PostgreSQL reports\n  %s\nmoraine's definition is\n  %s", version, got.String(), want.String())
			}
		}
		if version == Version11 {
			for i, sql := range inlined {
				want, _ := parseCreate(sql)
				want.Schema = schema
				// Several captures create the same inlined table name.
				sql = strings.Replace(sql, want.Name, fmt.Sprintf("%s_x%d", want.Name, i), 1)
				got := pgTableDef(ctx, t, conn, schema, sql)
				got.Name = want.Name
				if got.String() != want.String() {
					t.Errorf("PostgreSQL reports\n  %s\nparsed definition is\n  %s", got.String(), want.String())
				}
			}
		}
	}
}

// pgTableDef runs a captured CREATE TABLE in schema and reads the table back
// from pg_catalog as a TableDef.
func pgTableDef(ctx context.Context, t *testing.T, conn *pgx.Conn, schema, sql string) TableDef {
	t.Helper()
	sql = strings.Replace(sql, `"public".`, `"`+schema+`".`, 1)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	def, err := parseCreate(sql)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `
		SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull,
		       coalesce(a.attnum = ANY (i.indkey), false)
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, schema, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := TableDef{Schema: schema, Name: def.Name}
	for rows.Next() {
		var name string
		var oid uint32
		var mod int32
		var notNull, pk bool
		if err := rows.Scan(&name, &oid, &mod, &notNull, &pk); err != nil {
			t.Fatal(err)
		}
		if pk {
			got.PrimaryKey = append(got.PrimaryKey, len(got.Columns))
		}
		c := ColumnDef{Name: name, NotNull: notNull}
		c.Type.OID, c.Type.Mod = oid, mod
		got.Columns = append(got.Columns, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
