package sql

import (
	"context"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/pgwire"
)

// FuzzStatement feeds arbitrary text to the SQL front: parse, classify and
// run against a session with DuckLake tables. It must never panic; errors
// are expected.
func FuzzStatement(f *testing.F) {
	seeds := []string{
		`SELECT 1`,
		`COPY (SELECT "key", "value" FROM "public"."ducklake_metadata" WHERE "key" = 'version' COLLATE "C") TO STDOUT (FORMAT "binary")`,
		`INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 0)`,
		`UPDATE "public".ducklake_data_file SET end_snapshot = 3 WHERE end_snapshot IS NULL AND table_id IN (1)`,
		`WITH c(tid, cid) AS ( VALUES (1, 2) ) UPDATE "public".ducklake_column SET end_snapshot = 6 FROM c WHERE table_id = tid AND column_id = cid`,
		`DELETE FROM "public".ducklake_data_file WHERE ctid IN ('(0,3)')`,
		`SELECT oid, nspname FROM pg_namespace ORDER BY oid`,
		`BEGIN; SELECT * FROM ducklake_snapshot; COMMIT`,
		`SELECT count(*) FROM ducklake_snapshot WHERE snapshot_id BETWEEN 1 AND 2 OR NOT (snapshot_id > 3)`,
		`SELECT CASE WHEN 1 = 1 THEN 'a' ELSE NULL END, coalesce(NULL, 2), 'x' || 1`,
		// Aggregates, grouping, ordering and the functions the executor
		// knows (the first fuzzing found a panic in count()).
		`SELECT table_id, max(end_snapshot), min(begin_snapshot), sum(data_file_id), count(data_file_id) FROM ducklake_data_file GROUP BY table_id ORDER BY table_id DESC LIMIT 2 OFFSET 1`,
		`SELECT bool_and(end_snapshot IS NULL), bool_or(true) FROM ducklake_data_file`,
		`SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id IN (SELECT begin_snapshot FROM ducklake_data_file) AND EXISTS (SELECT 1 FROM ducklake_column)`,
		`SELECT current_setting('search_path'), current_setting('nope', true), format_type(20, NULL), array_to_string(ARRAY[1, 2], ','), version(), current_database()`,
		`SELECT unnest FROM unnest(ARRAY[1, 2, 3])`,
		`SELECT CAST('12' AS BIGINT) + 1, '2024-01-01'::date, NULL::varchar, (1 < 2) = true`,
		`SET search_path TO public; SHOW search_path; RESET ALL`,
		`CREATE TABLE t1(a BIGINT PRIMARY KEY, b VARCHAR); ALTER TABLE t1 ADD COLUMN c BIGINT; DROP TABLE t1`,
		`COPY ducklake_column FROM STDIN`,
		`SELECT pg_get_constraintdef(c.oid), c.conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace`,
		`UPDATE ducklake_data_file SET end_snapshot = NULL WHERE data_file_id = (SELECT max(data_file_id) FROM ducklake_data_file) RETURNING *`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	ex := fuzzServer(f)
	f.Fuzz(func(t *testing.T, sql string) {
		s := ex.Open("fuzz", "postgres", "", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.query(ctx, sql, &textSink{stdin: "1\t2\n"})
		_, _ = s.Prepare(ctx, sql, nil)
		_ = s.Close()
	})
}

// fuzzServer is an executor with a database "fuzz" holding a few DuckLake
// tables and rows, for the fuzz targets to run statements against.
func fuzzServer(tb testing.TB) *Executor {
	ex := testServer()
	setup := ex.Open("fuzz", "postgres", "", 1)
	defer setup.Close()
	err := setup.query(context.Background(), `CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT);
CREATE TABLE "public"."ducklake_metadata"("key" VARCHAR NOT NULL, "value" VARCHAR NOT NULL, "scope" VARCHAR, "scope_id" BIGINT);
CREATE TABLE "public"."ducklake_data_file"("data_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT);
CREATE TABLE "public"."ducklake_column"("column_id" BIGINT, "table_id" BIGINT, "end_snapshot" BIGINT);
INSERT INTO "public".ducklake_snapshot VALUES (0, NOW(), 0, 1, 0), (1, NOW(), 1, 2, 0);
INSERT INTO "public".ducklake_metadata VALUES ('version', '0.3', NULL, NULL);
INSERT INTO "public".ducklake_data_file VALUES (7, 1, 1, NULL), (8, 2, 1, 3)`, &textSink{})
	if err != nil {
		tb.Fatal(err)
	}
	return ex
}

// FuzzBoundStatement is FuzzStatement through the extended protocol's
// path: the text is prepared with one parameter of a fuzzed type, bound
// to a fuzzed value in text or binary form, and run with it. Bind may
// refuse the value and the statement may fail; nothing may panic.
func FuzzBoundStatement(f *testing.F) {
	seeds := []struct {
		sql    string
		oid    uint32
		binary bool
		value  []byte
	}{
		{`SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id = $1`, 20, false, []byte("1")},
		{`SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id IN (SELECT $1::BIGINT)`, 0, true, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
		{`UPDATE ducklake_data_file SET end_snapshot = $1 WHERE data_file_id = 7`, 20, false, nil},
		{`INSERT INTO ducklake_metadata VALUES ($1, 'v', NULL, NULL)`, 25, false, []byte("k")},
		{`SELECT $1::TIMESTAMP WITH TIME ZONE, $1 IS NULL`, 1184, true, []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{`SELECT count(*) FROM ducklake_data_file WHERE table_id = ANY($1)`, 1016, false, []byte("{1,2}")},
		{`SELECT CAST($1 AS NUMERIC) + 1`, 1700, false, []byte("1.5")},
		{`DELETE FROM ducklake_data_file WHERE ctid = $1`, 27, false, []byte("(0,1)")},
	}
	for _, s := range seeds {
		f.Add(s.sql, s.oid, s.binary, s.value)
	}
	ex := fuzzServer(f)
	f.Fuzz(func(t *testing.T, sql string, oid uint32, binary bool, value []byte) {
		s := ex.Open("fuzz", "postgres", "", 2)
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := s.Prepare(ctx, sql, []uint32{oid})
		if err != nil {
			return
		}
		format := int16(0)
		if binary {
			format = 1
		}
		params := make([]pgwire.Param, len(st.ParamOIDs()))
		for i := range params {
			params[i] = pgwire.Param{OID: oid, Format: format, Value: value}
		}
		po, err := st.Bind(ctx, params)
		if err != nil {
			return
		}
		p := po.(*portal)
		for _, stmt := range p.p.stmts {
			if s.run(ctx, stmt, &textSink{stdin: "1\t2\n"}, p.params) != nil {
				return
			}
		}
	})
}
