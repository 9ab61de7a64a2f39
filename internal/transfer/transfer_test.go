package transfer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/transfer"
	"github.com/moraine-db/moraine/internal/workload"
)

// The fixtures whose lakes stand alone (s07 and s10 continue s01's).
var fixtures = []string{"s01_basic", "s02_schema_evolution", "s03_partition_sort", "s04_compaction", "s05_inlining", "s06_options_misc"}

// withDatabase returns conninfo with its database replaced.
func withDatabase(t *testing.T, conninfo, db string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, db)
}

// contents reads every DuckLake table of schema public at conninfo: per
// table, its rows as sorted text lines, and its shape (columns, types,
// NOT NULL, primary key).
func contents(t *testing.T, ctx context.Context, conninfo string) map[string][]string {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'ducklake%' ORDER BY 1`).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rs[0].Rows {
		name := string(r[0])
		var b strings.Builder
		if _, err := c.CopyTo(ctx, &b, fmt.Sprintf(`COPY (SELECT * FROM "public"."%s") TO STDOUT`, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if b.Len() == 0 {
			lines = nil
		}
		sort.Strings(lines)
		shape, err := c.Exec(ctx, fmt.Sprintf(`SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
			FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relname = '%s' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, name)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shape[0].Rows {
			lines = append(lines, "column "+string(s[0]))
		}
		out[name] = lines
	}
	return out
}

// same fails the test unless two catalogs hold the same tables, shapes and
// rows.
func same(t *testing.T, what string, want, got map[string][]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the source holds no DuckLake tables: the comparison proves nothing", what)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Fatalf("%s: table %s missing", what, name)
		}
		if !slices.Equal(w, g) {
			t.Fatalf("%s: table %s differs:\nwant %q\ngot  %q", what, name, w, g)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Fatalf("%s: extra table %s", what, name)
		}
	}
}

// lakeOnPostgres builds the lake of the captured conversation name on
// PostgreSQL, in fresh databases of the conversation's names.
func lakeOnPostgres(t *testing.T, ctx context.Context, pg, name string) {
	t.Helper()
	tr, err := replay.LoadFixture(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.RecreateDatabases(ctx, pg, tr.Databases()); err != nil {
		t.Fatal(err)
	}
	if res := replay.Replay(ctx, tr, replay.Options{Addr: pg, Timeout: time.Minute}); !res.Passed() {
		t.Fatalf("%s on PostgreSQL: %v", name, res.Err)
	}
}

// TestImportExportRoundTrip builds lakes on PostgreSQL with the real
// DuckDB+DuckLake conversations, imports each into moraine and compares
// every table row for row, exports it (and a branch of it) to a fresh
// PostgreSQL database and compares again; and refuses what cannot be imported, leaving nothing
// behind.
func TestImportExportRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pg := testenv.Postgres(t)
	testenv.LockFixtureDatabases(t, pg)
	for _, name := range fixtures {
		lakeOnPostgres(t, ctx, pg, name)
	}
	r := testserver.Start(t, "file://"+t.TempDir(), "--row-id-hold=false")
	admin := r.Conninfo("postgres")
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			source := withDatabase(t, pg, name)
			want := contents(t, ctx, source)
			var last transfer.Progress
			imported := "imported_" + name
			sum, err := transfer.Import(ctx, source, admin, "public", imported, func(p transfer.Progress) { last = p })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("import: catalog %s, %d tables, %d rows, %d bytes in %v", sum.Version, sum.Tables, sum.Rows, sum.Bytes, sum.Elapsed)
			if last.TablesDone != sum.Tables || last.Rows != sum.Rows || sum.Rows == 0 {
				t.Fatalf("last progress %+v, summary %+v", last, sum)
			}
			same(t, "imported into moraine", want, contents(t, ctx, r.Conninfo(imported)))

			dst := freshPostgres(t, ctx, pg, "exported")
			if _, err := transfer.Export(ctx, admin, imported, dst, "public", nil); err != nil {
				t.Fatal(err)
			}
			same(t, "exported back to PostgreSQL", want, contents(t, ctx, dst))
			if _, err := transfer.Export(ctx, admin, imported, dst, "public", nil); err == nil {
				t.Fatal("export into a database that already holds the catalog succeeded")
			}
			// A branch of it exports as the same standalone catalog.
			branch := "branch_" + name
			sqlExec(t, ctx, admin, "CREATE DATABASE "+branch+" TEMPLATE "+imported)
			bdst := freshPostgres(t, ctx, pg, "exported_branch")
			if _, err := transfer.Export(ctx, admin, branch, bdst, "public", nil); err != nil {
				t.Fatal(err)
			}
			same(t, "a branch exported to PostgreSQL", want, contents(t, ctx, bdst))
			dropDB(t, ctx, admin, branch)
			dropDB(t, ctx, admin, imported)
		})
	}

	t.Run("refusals", func(t *testing.T) {
		// No DuckLake catalog: refused before anything is made.
		_, err := transfer.Import(ctx, pg, admin, "public", "nothing", nil)
		if !errors.Is(err, transfer.ErrNotDuckLake) {
			t.Fatalf("import of a database without a catalog: %v", err)
		}
		// An inconsistent catalog (a delete file naming a data file that is
		// gone): moraine's commit refuses it, and the database it made for
		// it is dropped.
		broken := "broken_" + fmt.Sprint(time.Now().UnixNano())
		sqlExec(t, ctx, pg, "CREATE DATABASE "+broken+" TEMPLATE s04_compaction")
		defer sqlExec(t, context.Background(), pg, "DROP DATABASE IF EXISTS "+broken+" WITH (FORCE)")
		sqlExec(t, ctx, withDatabase(t, pg, broken), `DELETE FROM ducklake_data_file WHERE data_file_id IN (SELECT data_file_id FROM ducklake_delete_file)`)
		_, err = transfer.Import(ctx, withDatabase(t, pg, broken), admin, "public", "broken", nil)
		if err == nil || !strings.Contains(err.Error(), "inconsistent") {
			t.Fatalf("import of an inconsistent catalog: %v", err)
		}
		if has := databases(t, ctx, admin); slices.Contains(has, "broken") || slices.Contains(has, "nothing") {
			t.Fatalf("a refused import left a database behind: %v", has)
		}
	})
}

// freshPostgres makes an empty PostgreSQL database named prefix_<random>,
// dropped when the test ends, and returns its conninfo.
func freshPostgres(t *testing.T, ctx context.Context, pg, prefix string) string {
	t.Helper()
	dial, drop, err := workload.FreshDatabase(ctx, pg, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	c, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	return withDatabase(t, pg, dbName(t, ctx, c))
}

func dbName(t *testing.T, ctx context.Context, c *pgconn.PgConn) string {
	t.Helper()
	rs, err := c.Exec(ctx, "SELECT current_database()").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return string(rs[0].Rows[0][0])
}

func sqlExec(t testing.TB, ctx context.Context, conninfo, sql string) {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func dropDB(t *testing.T, ctx context.Context, admin, name string) {
	t.Helper()
	sqlExec(t, ctx, admin, "DROP DATABASE "+name+" WITH (FORCE)")
}

func databases(t *testing.T, ctx context.Context, admin string) []string {
	t.Helper()
	c, err := pgconn.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, "SELECT datname FROM pg_database").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs[0].Rows {
		out = append(out, string(r[0]))
	}
	return out
}

// newestDatabase is the name of the PostgreSQL database with prefix made
// last (workload.FreshDatabase names them prefix_<random>).
func newestDatabase(t *testing.T, ctx context.Context, pg, prefix string) string {
	t.Helper()
	c, err := pgconn.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, "SELECT datname FROM pg_database WHERE datname LIKE '"+prefix+"\\_%' ORDER BY oid DESC LIMIT 1").ReadAll()
	if err != nil || len(rs[0].Rows) == 0 {
		t.Fatalf("no database %s_…: %v", prefix, err)
	}
	return string(rs[0].Rows[0][0])
}
