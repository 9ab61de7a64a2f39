package transfer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/transfer"
)

// TestOlderCatalogVersions serves catalogs DuckLake created at 0.2, 0.3 and 0.4
// and runs DuckLake's own automatic migration of them to 1.1-dev1 through
// the wire, against moraine and PostgreSQL side by side. Each lake is
// written by the script of what DuckLake at that version writes
// (testdata/versions), to PostgreSQL and to a moraine database; the
// PostgreSQL lake is also imported. The three must hold the same rows and
// shapes after the writes and after the migration, and the migrated
// catalog exports back to PostgreSQL unchanged.
func TestOlderCatalogVersions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg := testenv.Postgres(t)
	for _, version := range []string{"0.2", "0.3", "0.4"} {
		t.Run(version, func(t *testing.T) {
			store := "file://" + t.TempDir()
			r := testserver.Start(t, store, "--row-id-hold=false")
			admin := r.Conninfo("postgres")
			script := lakeScript(t, version)
			onPG := freshPostgres(t, ctx, pg, "lake")
			suffix := strings.ReplaceAll(version, ".", "")
			served, imported := "served_"+suffix, "imported_"+suffix
			sqlExec(t, ctx, admin, "CREATE DATABASE "+served)
			for _, conninfo := range []string{onPG, r.Conninfo(served)} {
				runScript(t, ctx, conninfo, script)
			}
			want := contents(t, ctx, onPG)
			same(t, "written at "+version, want, contents(t, ctx, r.Conninfo(served)))
			sum, err := transfer.Import(ctx, onPG, admin, "public", imported, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Version != version {
				t.Fatalf("import reports catalog version %q, want %q", sum.Version, version)
			}
			same(t, "imported at "+version, want, contents(t, ctx, r.Conninfo(imported)))

			for _, conninfo := range []string{onPG, r.Conninfo(served), r.Conninfo(imported)} {
				migrate(t, ctx, conninfo, version)
			}
			want = contents(t, ctx, onPG)
			if v := want["ducklake_metadata"]; !strings.Contains(strings.Join(v, "\n"), "version\t1.1-dev1") {
				t.Fatalf("PostgreSQL's catalog after the migration: %q", v)
			}
			same(t, "served, migrated from "+version, want, contents(t, ctx, r.Conninfo(served)))
			same(t, "imported, migrated from "+version, want, contents(t, ctx, r.Conninfo(imported)))
			// The migration's rewritten rows are what the store holds.
			r.Stop(t)
			r = testserver.Start(t, store, "--row-id-hold=false")
			admin = r.Conninfo("postgres")
			same(t, "served, migrated, reopened", want, contents(t, ctx, r.Conninfo(served)))

			dst := freshPostgres(t, ctx, pg, "exported")
			if _, err := transfer.Export(ctx, admin, served, dst, "public", nil); err != nil {
				t.Fatal(err)
			}
			same(t, "exported after the migration", want, contents(t, ctx, dst))
			dropDB(t, ctx, admin, served)
			dropDB(t, ctx, admin, imported)
		})
	}
}

// lakeScript reads testdata/versions/lake-<version>.sql as its commits: the
// statements between "-- commit" lines, each commit one Query message.
func lakeScript(t *testing.T, version string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "versions", "lake-"+version+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	var commits []string
	for i, part := range strings.Split(string(raw), "-- commit\n") {
		if i == 0 {
			continue // the header
		}
		commits = append(commits, strings.TrimSpace(part))
	}
	if len(commits) < 2 {
		t.Fatalf("lake-%s.sql holds %d commits", version, len(commits))
	}
	return commits
}

// runScript sends each commit in its own transaction, as DuckLake does.
func runScript(t *testing.T, ctx context.Context, conninfo string, commits []string) {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for i, sql := range commits {
		if _, err := c.Exec(ctx, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;\n"+sql+"\nCOMMIT").ReadAll(); err != nil {
			t.Fatalf("commit %d on %s: %v", i, conninfo, err)
		}
	}
}

// migration sends what DuckLake's LoadExistingDuckLake sends through DuckDB's
// postgres extension when AUTOMATIC_MIGRATION brings a catalog to 1.1-dev1:
// one transaction holding each step (MigrateV02, MigrateV03, MigrateV04,
// MigrateV10).
// DDL goes as the extension renders it; what DuckDB evaluates itself — the
// WHERE of an UPDATE, the temporary table of CREATE TEMP TABLE … AS, the
// join of UPDATE … FROM and INSERT … SELECT — it does over a binary COPY of
// the columns it needs with their ctids, then writes by ctid: an UPDATE
// through a temporary table of new values (as captured in s09_v10_migrate),
// a DELETE … WHERE ctid IN, a binary COPY FROM STDIN.
type migration struct {
	t   *testing.T
	ctx context.Context
	c   *pgconn.PgConn
}

func migrate(t *testing.T, ctx context.Context, conninfo, from string) {
	t.Helper()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	m := &migration{t: t, ctx: ctx, c: c}
	m.exec("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	if from == "0.2" {
		m.v02()
		from = "0.3"
	}
	if from == "0.3" {
		m.v03()
		from = "0.4"
	}
	if from == "0.4" {
		m.setVersion("1.0")
	}
	m.v10(false)
	m.exec("COMMIT")
	// DuckLake re-runs the 1.0 → 1.1-dev1 step, tolerant of what exists,
	// whenever it attaches a 1.1-dev1 catalog with AUTOMATIC_MIGRATION.
	m.exec("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	m.v10(true)
	m.exec("COMMIT")
}

// v02 is MigrateV02 (0.2 → 0.3).
func (m *migration) v02() {
	m.exec(`ALTER TABLE "public"."ducklake_name_mapping" ADD COLUMN  "is_partition" BOOLEAN DEFAULT false`)
	m.exec(`ALTER TABLE "public"."ducklake_snapshot_changes" ADD COLUMN  "author" VARCHAR DEFAULT NULL`)
	m.exec(`ALTER TABLE "public"."ducklake_snapshot_changes" ADD COLUMN  "commit_message" VARCHAR DEFAULT NULL`)
	m.exec(`ALTER TABLE "public"."ducklake_snapshot_changes" ADD COLUMN  "commit_extra_info" VARCHAR DEFAULT NULL`)
	m.setVersion("0.3")
	m.exec(`CREATE TABLE "public"."ducklake_schema_versions"("begin_snapshot" BIGINT, "schema_version" BIGINT);`)
	// INSERT INTO ducklake_schema_versions SELECT * FROM (SELECT MIN(snapshot_id),
	// schema_version FROM ducklake_snapshot GROUP BY schema_version ORDER BY schema_version) t
	first := map[int64]int64{}
	var order []int64
	for _, r := range m.scan("ducklake_snapshot", "snapshot_id", "schema_version") {
		id, sv := int8Of(r.vals[0]), int8Of(r.vals[1])
		if cur, ok := first[sv]; !ok || id < cur {
			if !ok {
				order = append(order, sv)
			}
			first[sv] = id
		}
	}
	slices.Sort(order)
	var rows [][]*int64
	for _, sv := range order {
		rows = append(rows, []*int64{ptrInt(first[sv]), ptrInt(sv)})
	}
	m.insert("ducklake_schema_versions", nil, rows)
	m.exec(`ALTER TABLE "public"."ducklake_file_column_statistics" RENAME TO "ducklake_file_column_stats"`)
	m.exec(`ALTER TABLE "public"."ducklake_file_column_stats" ADD COLUMN  "extra_stats" VARCHAR DEFAULT NULL`)
	m.exec(`ALTER TABLE "public"."ducklake_table_column_stats" ADD COLUMN  "extra_stats" VARCHAR DEFAULT NULL`)
}

// v03 is MigrateV03 (0.3 → 0.4) with its per-table schema versions.
func (m *migration) v03() {
	m.exec(`CREATE TABLE "public"."ducklake_macro"("schema_id" BIGINT, "macro_id" BIGINT, "macro_name" VARCHAR, "begin_snapshot" BIGINT, "end_snapshot" BIGINT);`)
	m.exec(`CREATE TABLE "public"."ducklake_macro_impl"("macro_id" BIGINT, "impl_id" BIGINT, "dialect" VARCHAR, "sql" VARCHAR, "type" VARCHAR);`)
	m.exec(`CREATE TABLE "public"."ducklake_macro_parameters"("macro_id" BIGINT, "impl_id" BIGINT, "column_id" BIGINT, "parameter_name" VARCHAR, "parameter_type" VARCHAR, "default_value" VARCHAR, "default_value_type" VARCHAR);`)
	m.exec(`ALTER TABLE "public"."ducklake_column" ADD COLUMN  "default_value_type" VARCHAR DEFAULT 'literal'`)
	// UPDATE ducklake_column SET default_value_type = 'literal' WHERE default_value_type IS NULL
	var nulls []string
	for _, r := range m.scan("ducklake_column", "default_value_type") {
		if r.vals[0] == nil {
			nulls = append(nulls, r.ctid)
		}
	}
	m.update("ducklake_column", "default_value_type", "VARCHAR", nulls, func(string) *string { return ptr("literal") })
	m.exec(`ALTER TABLE "public"."ducklake_column" ADD COLUMN  "default_value_dialect" VARCHAR DEFAULT NULL`)
	m.exec(`CREATE TABLE "public"."ducklake_sort_info"("sort_id" BIGINT, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT);`)
	m.exec(`CREATE TABLE "public"."ducklake_sort_expression"("sort_id" BIGINT, "table_id" BIGINT, "sort_key_index" BIGINT, "expression" VARCHAR, "dialect" VARCHAR, "sort_direction" VARCHAR, "null_order" VARCHAR);`)
	m.exec(`CREATE TABLE "public"."ducklake_file_variant_stats"("data_file_id" BIGINT, "table_id" BIGINT, "column_id" BIGINT, "variant_path" VARCHAR, "shredded_type" VARCHAR, "column_size_bytes" BIGINT, "value_count" BIGINT, "null_count" BIGINT, "min_value" VARCHAR, "max_value" VARCHAR, "contains_nan" BOOLEAN, "extra_stats" VARCHAR);`)
	m.exec(`ALTER TABLE "public"."ducklake_schema_versions" ADD COLUMN  "table_id" BIGINT`)
	m.exec(`ALTER TABLE "public"."ducklake_data_file" ADD COLUMN  "partial_max" BIGINT`)
	m.exec(`ALTER TABLE "public"."ducklake_delete_file" ADD COLUMN  "partial_max" BIGINT`)
	// CREATE TEMP TABLE __ducklake_partial_max_migration AS SELECT data_file_id,
	// TRY_CAST(regexp_extract(partial_file_info, 'partial_max:(\d+)', 1) AS BIGINT)
	// ... WHERE partial_file_info IS NOT NULL AND partial_file_info LIKE '%partial_max:%'
	re := regexp.MustCompile(`partial_max:(\d+)`)
	partial := map[string]*string{}
	for _, r := range m.scan("ducklake_data_file", "data_file_id", "partial_file_info") {
		info := r.vals[1]
		if info == nil || !strings.Contains(string(info), "partial_max:") {
			continue
		}
		var v *string
		if g := re.FindSubmatch(info); g != nil {
			if _, err := strconv.ParseInt(string(g[1]), 10, 64); err == nil {
				v = ptr(string(g[1]))
			}
		}
		partial[int8Text(r.vals[0])] = v
	}
	m.exec(`ALTER TABLE "public"."ducklake_data_file" DROP COLUMN  "partial_file_info"`)
	// UPDATE ducklake_data_file AS df SET partial_max = m.partial_max
	// FROM __ducklake_partial_max_migration m WHERE df.data_file_id = m.data_file_id
	var ctids []string
	ids := map[string]string{}
	for _, r := range m.scan("ducklake_data_file", "data_file_id") {
		if id := int8Text(r.vals[0]); partialHas(partial, id) {
			ctids = append(ctids, r.ctid)
			ids[r.ctid] = id
		}
	}
	m.update("ducklake_data_file", "partial_max", "BIGINT", ctids, func(ctid string) *string { return partial[ids[ctid]] })
	m.setVersion("0.4")

	// INSERT INTO ducklake_schema_versions (table_id, begin_snapshot, schema_version)
	// SELECT t.table_id, sv.begin_snapshot, sv.schema_version FROM ducklake_schema_versions sv
	// JOIN ducklake_table t ON sv.begin_snapshot BETWEEN t.begin_snapshot AND
	// COALESCE(t.end_snapshot, sv.begin_snapshot) WHERE sv.table_id IS NULL
	tables := m.scan("ducklake_table", "table_id", "begin_snapshot", "end_snapshot")
	var rows [][]*int64
	for _, sv := range m.scan("ducklake_schema_versions", "begin_snapshot", "schema_version", "table_id") {
		if sv.vals[2] != nil || sv.vals[0] == nil {
			continue
		}
		b := int8Of(sv.vals[0])
		for _, t := range tables {
			end := b
			if t.vals[2] != nil {
				end = int8Of(t.vals[2])
			}
			if t.vals[1] != nil && b >= int8Of(t.vals[1]) && b <= end {
				rows = append(rows, []*int64{int8Ptr(t.vals[0]), int8Ptr(sv.vals[0]), int8Ptr(sv.vals[1])})
			}
		}
	}
	m.insert("ducklake_schema_versions", []string{"table_id", "begin_snapshot", "schema_version"}, rows)
	// DELETE FROM ducklake_schema_versions WHERE table_id IS NULL
	var global []string
	for _, r := range m.scan("ducklake_schema_versions", "table_id") {
		if r.vals[0] == nil {
			global = append(global, r.ctid)
		}
	}
	m.delete("ducklake_schema_versions", global)
}

// v10 is MigrateV10 (1.0 → 1.1-dev1); tolerant adds IF NOT EXISTS where
// DuckLake's allow_failures does.
func (m *migration) v10(tolerant bool) {
	// MigrateInlinedColumnNames: the metadata columns of every inlined
	// data table get their 1.1 names.
	old := []string{"row_id", "begin_snapshot", "end_snapshot"}
	for _, r := range m.scan("ducklake_inlined_data_tables", "table_name") {
		name := string(r.vals[0])
		// DuckDB knows the columns from the extension's read of pg_attribute.
		rs, err := m.c.Exec(m.ctx, fmt.Sprintf(`SELECT a.attname FROM pg_catalog.pg_attribute a
			JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relname = '%s' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, name)).ReadAll()
		if err != nil || len(rs[0].Rows) < 3 {
			m.t.Fatalf("columns of %s: %v", name, err)
		}
		for i, f := range rs[0].Rows[:3] {
			if string(f[0]) == old[i] {
				m.exec(fmt.Sprintf(`ALTER TABLE "public".%q RENAME COLUMN  %q TO %q`, name, old[i], "_ducklake_"+old[i]))
			}
		}
	}
	ifNot := ""
	if tolerant {
		ifNot = "IF NOT EXISTS "
	}
	m.exec(`ALTER TABLE "public"."ducklake_data_file" ADD COLUMN  ` + ifNot + `"row_group_count" BIGINT`)
	m.exec(`ALTER TABLE "public"."ducklake_delete_file" ADD COLUMN  ` + ifNot + `"row_group_count" BIGINT`)
	if !tolerant {
		// With IF NOT EXISTS DuckDB finds the table in its catalog and sends nothing.
		m.exec(`CREATE TABLE "public"."ducklake_view_column_tag"("view_id" BIGINT, "column_name" VARCHAR, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR);`)
	}
	m.setVersion("1.1-dev1")
}

// setVersion is UPDATE ducklake_metadata SET value = v WHERE key = 'version'.
func (m *migration) setVersion(v string) {
	var ctids []string
	for _, r := range m.scan("ducklake_metadata", "key") {
		if string(r.vals[0]) == "version" {
			ctids = append(ctids, r.ctid)
		}
	}
	m.update("ducklake_metadata", "value", "VARCHAR", ctids, func(string) *string { return &v })
}

func (m *migration) exec(sql string) {
	m.t.Helper()
	if _, err := m.c.Exec(m.ctx, sql).ReadAll(); err != nil {
		m.t.Fatalf("%s: %v", sql, err)
	}
}

// scanned is one row of a scan: the columns' binary values (nil for NULL)
// and its ctid as "(block,offset)".
type scanned struct {
	vals [][]byte
	ctid string
}

// scan reads columns and ctid of every row of table as the postgres
// extension does.
func (m *migration) scan(table string, cols ...string) []scanned {
	m.t.Helper()
	var list []string
	for _, c := range cols {
		list = append(list, strconv.Quote(c))
	}
	q := fmt.Sprintf(`COPY (SELECT %s, ctid FROM "public".%q ) TO STDOUT (FORMAT "binary");`, strings.Join(list, ", "), table)
	var buf bytes.Buffer
	if _, err := m.c.CopyTo(m.ctx, &buf, q); err != nil {
		m.t.Fatalf("%s: %v", q, err)
	}
	b := buf.Bytes()
	const sig = "PGCOPY\n\xff\r\n\x00"
	if !bytes.HasPrefix(b, []byte(sig)) {
		m.t.Fatalf("%s: not a binary COPY", q)
	}
	b = b[len(sig)+4:]
	ext := binary.BigEndian.Uint32(b)
	b = b[4+ext:]
	var out []scanned
	for {
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if n == -1 {
			return out
		}
		if int(n) != len(cols)+1 {
			m.t.Fatalf("%s: tuple of %d fields", q, n)
		}
		var r scanned
		for i := 0; i < int(n); i++ {
			l := int32(binary.BigEndian.Uint32(b))
			b = b[4:]
			var v []byte
			if l >= 0 {
				v, b = b[:l], b[l:]
			}
			if i < len(cols) {
				r.vals = append(r.vals, v)
				continue
			}
			r.ctid = fmt.Sprintf("(%d,%d)", binary.BigEndian.Uint32(v), binary.BigEndian.Uint16(v[4:]))
		}
		out = append(out, r)
	}
}

// update sets col of the rows at ctids to value(ctid) through a temporary
// table of new values, as the postgres extension's UPDATE does. No rows:
// nothing is sent.
func (m *migration) update(table, col, typ string, ctids []string, value func(ctid string) *string) {
	m.t.Helper()
	if len(ctids) == 0 {
		return
	}
	tmp := "update_data_" + uuid.NewString()
	m.exec(fmt.Sprintf(`CREATE LOCAL TEMPORARY TABLE %q(%q %s, __page_id_string VARCHAR) ON COMMIT DROP;`, tmp, col, typ))
	var data strings.Builder
	for _, ctid := range ctids {
		if v := value(ctid); v != nil {
			data.WriteString(*v)
		} else {
			data.WriteString("\b")
		}
		data.WriteString("\t'" + ctid + "'\n")
	}
	data.WriteString("\\.\n")
	q := fmt.Sprintf(`COPY %q FROM STDIN (FORMAT TEXT, NULL '%s')`, tmp, "\b")
	if _, err := m.c.CopyFrom(m.ctx, strings.NewReader(data.String()), q); err != nil {
		m.t.Fatalf("%s: %v", q, err)
	}
	m.exec(fmt.Sprintf(`UPDATE "public".%q SET %q = %q.%q FROM %q WHERE %q.ctid=__page_id_string::TID`, table, col, tmp, col, tmp, table))
}

// delete removes the rows at ctids as the postgres extension's DELETE does.
func (m *migration) delete(table string, ctids []string) {
	m.t.Helper()
	if len(ctids) == 0 {
		return
	}
	var list []string
	for _, c := range ctids {
		list = append(list, "'"+c+"'")
	}
	m.exec(fmt.Sprintf(`DELETE FROM "public".%q WHERE ctid IN (%s)`, table, strings.Join(list, ",")))
}

// insert appends bigint rows with a binary COPY, naming the columns when
// cols is not nil, as the postgres extension's INSERT does.
func (m *migration) insert(table string, cols []string, rows [][]*int64) {
	m.t.Helper()
	if len(rows) == 0 {
		return
	}
	var b bytes.Buffer
	b.WriteString("PGCOPY\n\xff\r\n\x00")
	b.Write(make([]byte, 8))
	for _, r := range rows {
		b.Write(binary.BigEndian.AppendUint16(nil, uint16(len(r))))
		for _, v := range r {
			if v == nil {
				b.Write(binary.BigEndian.AppendUint32(nil, 0xffffffff))
				continue
			}
			b.Write(binary.BigEndian.AppendUint32(nil, 8))
			b.Write(binary.BigEndian.AppendUint64(nil, uint64(*v)))
		}
	}
	b.Write([]byte{0xff, 0xff})
	q := fmt.Sprintf(`COPY "public".%q FROM STDIN (FORMAT BINARY)`, table)
	if cols != nil {
		var list []string
		for _, c := range cols {
			list = append(list, strconv.Quote(c))
		}
		q = fmt.Sprintf(`COPY "public".%q (%s) FROM STDIN (FORMAT BINARY)`, table, strings.Join(list, ", "))
	}
	if _, err := m.c.CopyFrom(m.ctx, &b, q); err != nil {
		m.t.Fatalf("%s: %v", q, err)
	}
}

func ptr(s string) *string { return &s }

func ptrInt(v int64) *int64 { return &v }

func int8Of(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

func int8Ptr(b []byte) *int64 {
	if b == nil {
		return nil
	}
	v := int8Of(b)
	return &v
}

func int8Text(b []byte) string { return strconv.FormatInt(int8Of(b), 10) }

func partialHas(m map[string]*string, id string) bool {
	_, ok := m[id]
	return ok
}
