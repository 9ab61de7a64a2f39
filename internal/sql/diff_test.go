package sql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
)

// The differential test runs the same statement sequences — DuckLake's
// DDL, commit batches, reads, ctid paths, temp tables, introspection and
// errors — on a fresh database of a real PostgreSQL and on moraine's
// executor, and compares every result: column names and type OIDs, rows
// (as text, in order, ctid included), command tags, and errors (SQLSTATE,
// message, detail). Timestamps from NOW() and object ids (allocated by each
// server in its own way) are masked.

// diffStep is one simple-query message, optionally with COPY FROM data.
type diffStep struct {
	sql  string
	copy string // text-format COPY data
	// copyTo runs sql, a COPY ... TO STDOUT, through pgwire (moraine's
	// wire path, which the COPY fast path lives on) and compares the bytes
	// of the COPY stream, not their decoded text.
	copyTo bool
}

var diffScript = []diffStep{
	{sql: `SET TimeZone = 'UTC'`},
	{sql: `SELECT 1`},
	// The connection pool's reset, alone and (refused) in a
	// multi-statement query, whose statements form an implicit block.
	{sql: `DISCARD ALL`},
	{sql: `SELECT 1; DISCARD ALL`},
	{sql: `SELECT to_regclass('duckdb_secrets')`},
	{sql: `SELECT current_setting('search_path'), current_setting('standard_conforming_strings')`},
	// DuckLake's existence probe on a fresh lake.
	{sql: `COPY (SELECT NULL FROM "public"."ducklake_metadata" LIMIT 1) TO STDOUT (FORMAT "binary")`},
	{sql: `SELECT * FROM "public"."ducklake_metadata"`},
	// Initialisation: one transaction of DDL.
	{sql: `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ`},
	{sql: `CREATE TABLE "public"."ducklake_metadata"("key" VARCHAR NOT NULL, "value" VARCHAR NOT NULL, "scope" VARCHAR, "scope_id" BIGINT);`},
	{sql: `CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT);`},
	{sql: `CREATE TABLE "public"."ducklake_snapshot_changes"("snapshot_id" BIGINT PRIMARY KEY, "changes_made" VARCHAR, "author" VARCHAR, "commit_message" VARCHAR, "commit_extra_info" VARCHAR);`},
	{sql: `CREATE TABLE "public"."ducklake_schema"("schema_id" BIGINT PRIMARY KEY, "schema_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN);`},
	{sql: `CREATE TABLE "public"."ducklake_table"("table_id" BIGINT, "table_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_id" BIGINT, "table_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN);`},
	{sql: `CREATE TABLE "public"."ducklake_data_file"("data_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "file_order" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "file_format" VARCHAR, "record_count" BIGINT, "file_size_bytes" BIGINT, "footer_size" BIGINT, "row_id_start" BIGINT, "partition_id" BIGINT, "encryption_key" VARCHAR, "mapping_id" BIGINT);`},
	{sql: `CREATE TABLE "public"."ducklake_file_column_stats"("data_file_id" BIGINT, "table_id" BIGINT, "column_id" BIGINT, "column_size_bytes" BIGINT, "value_count" BIGINT, "null_count" BIGINT, "min_value" VARCHAR, "max_value" VARCHAR, "contains_nan" BOOLEAN, "extra_stats" VARCHAR);`},
	{sql: `CREATE TABLE "public"."ducklake_column"("column_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "table_id" BIGINT, "column_order" BIGINT, "column_name" VARCHAR, "column_type" VARCHAR, "initial_default" VARCHAR, "default_value" VARCHAR, "nulls_allowed" BOOLEAN, "parent_column" BIGINT);`},
	{sql: `CREATE TABLE "public"."ducklake_files_scheduled_for_deletion"("data_file_id" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "schedule_start" TIMESTAMP WITH TIME ZONE);`},
	{sql: `CREATE TABLE "public"."ducklake_inlined_data_tables"("table_id" BIGINT, "table_name" VARCHAR, "schema_version" BIGINT);`},
	{sql: `COPY "public"."ducklake_metadata" FROM STDIN`, copy: "version\t0.3\t\\N\t\\N\ncreated_by\tDuckDB 1.4\t\\N\t\\N\ndata_path\t/lake/x/\t\\N\t\\N\n"},
	{sql: `INSERT INTO "public".ducklake_snapshot VALUES (0, NOW(), 0, 1, 0); INSERT INTO "public".ducklake_snapshot_changes VALUES (0, 'created_schema:"main"', NULL, NULL, NULL); INSERT INTO "public".ducklake_schema VALUES (0, '6b9b8d1e-4c2a-4bb5-9e58-1e9b1f7c2a10', 0, NULL, 'main', 'main/', true)`},
	{sql: `COMMIT`},
	// Reads DuckLake sends constantly.
	{sql: `COPY (SELECT "key", "value" FROM "public"."ducklake_metadata" WHERE "key" = 'version' COLLATE "C") TO STDOUT (FORMAT "binary")`},
	{sql: `SELECT "key", "value", "scope", "scope_id", ctid FROM "public"."ducklake_metadata"`},
	{sql: `SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM "public".ducklake_snapshot WHERE snapshot_id = ( SELECT MAX(snapshot_id) FROM "public".ducklake_snapshot )`},
	{sql: `SELECT "snapshot_id", "schema_version" FROM (SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM "public".ducklake_snapshot WHERE snapshot_id = ( SELECT MAX(snapshot_id) FROM "public".ducklake_snapshot )) AS __unnamed_subquery`},
	// A commit batch: one multi-statement message inside a transaction.
	{sql: `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ`},
	{sql: `INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 0);
INSERT INTO "public".ducklake_snapshot_changes VALUES (1, 'created_table:"main"."t"', NULL, NULL, NULL);
INSERT INTO "public".ducklake_table VALUES (1, '01a228fa-c981-73bd-bd75-de9b66b06eb9', 1, NULL, 0, 't', 't/', true);
INSERT INTO "public".ducklake_column VALUES (1, 1, NULL, 1, 1, 'id', 'int64', NULL, 'NULL', true, NULL),(2, 1, NULL, 1, 2, 'name', 'varchar', NULL, 'NULL', true, NULL);
INSERT INTO "public".ducklake_inlined_data_tables VALUES (1, 'ducklake_inlined_data_1_1', 1);
CREATE TABLE IF NOT EXISTS "public".ducklake_inlined_data_1_1(row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, id BIGINT, name VARCHAR, price DECIMAL(18,3), b BYTEA, ts TIMESTAMP, d DATE, f DOUBLE PRECISION, flag BOOLEAN, u UUID, i INTEGER, s SMALLINT, r REAL);
INSERT INTO "public".ducklake_inlined_data_1_1 VALUES (0, 1, NULL, 1, 'one', 1.50, '\x6f6e65', CAST('2026-01-01 10:00:00' AS TIMESTAMP), '2026-01-02', 2.5, true, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 7, 3, 0.25), (1, 1, NULL, 2, NULL, -2.125, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`},
	{sql: `SELECT pg_namespace.oid AS namespace_id, relname, relpages, attname, pg_type.typname type_name, atttypmod type_modifier, pg_attribute.attndims ndim, attnum, pg_attribute.attnotnull AS notnull, NULL constraint_id, NULL constraint_type, NULL constraint_key, type_ns.nspname AS type_schema, col_desc.description AS column_comment, tbl_desc.description AS table_comment
FROM pg_class
JOIN pg_namespace ON relnamespace = pg_namespace.oid
JOIN pg_attribute ON pg_class.oid=pg_attribute.attrelid
JOIN pg_type ON atttypid=pg_type.oid
JOIN pg_namespace type_ns ON pg_type.typnamespace = type_ns.oid
LEFT JOIN pg_description col_desc ON col_desc.objoid=pg_class.oid AND col_desc.objsubid=pg_attribute.attnum
LEFT JOIN pg_description tbl_desc ON tbl_desc.objoid=pg_class.oid AND tbl_desc.objsubid=0
WHERE attnum > 0 AND relkind IN ('r', 'v', 'm', 'f', 'p') AND pg_namespace.nspname IN ('public')AND relname='ducklake_inlined_data_1_1'
UNION ALL
SELECT pg_namespace.oid AS namespace_id, relname, NULL relpages, NULL attname, NULL type_name, NULL type_modifier, NULL ndim, NULL attnum, NULL AS notnull, pg_constraint.oid AS constraint_id, contype AS constraint_type, conkey AS constraint_key, NULL AS type_schema, NULL AS column_comment, NULL AS table_comment
FROM pg_class
JOIN pg_namespace ON relnamespace = pg_namespace.oid
JOIN pg_constraint ON (pg_class.oid=pg_constraint.conrelid)
WHERE relkind IN ('r', 'v', 'm', 'f', 'p') AND contype IN ('p', 'u') AND pg_namespace.nspname IN ('public')AND relname='ducklake_inlined_data_1_1'
ORDER BY namespace_id, relname, attnum, constraint_id`},
	{sql: `COMMIT`},
	{sql: `SELECT * FROM "public".ducklake_inlined_data_1_1`},
	{sql: `COPY (SELECT "row_id", "name", "price", "b", "ts", "d", "f", "flag", "u", "i", "s", "r" FROM "public"."ducklake_inlined_data_1_1" ) TO STDOUT (FORMAT "binary")`},
	// A lost race: the same snapshot id again.
	{sql: `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ`},
	{sql: `INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 0); INSERT INTO "public".ducklake_snapshot_changes VALUES (1, 'x', NULL, NULL, NULL)`},
	{sql: `SELECT 1`},
	{sql: `ROLLBACK`},
	// Files, stats, updates and deletes.
	{sql: `BEGIN`},
	{sql: `INSERT INTO "public".ducklake_data_file VALUES (1, 1, 2, NULL, NULL, 'a.parquet', true, 'parquet', 100, 2000, 300, 0, NULL, NULL, NULL), (2, 1, 2, NULL, NULL, 'b.parquet', true, 'parquet', 50, 1000, 300, 100, NULL, NULL, NULL), (3, 1, 2, NULL, NULL, 'c.parquet', true, 'parquet', 10, 900, 300, 150, NULL, NULL, NULL);
INSERT INTO "public".ducklake_file_column_stats VALUES (1, 1, 1, 20053, 5000, 0, '100', '5099', NULL, NULL),(1, 1, 2, 10, 5000, 3, 'a', 'z', NULL, NULL),(2, 1, 1, 20, 50, 0, '1', '50', false, NULL)`},
	{sql: `UPDATE "public".ducklake_data_file SET end_snapshot = 3 WHERE end_snapshot IS NULL AND table_id IN (1) AND data_file_id >= 2`},
	{sql: `UPDATE "public".ducklake_data_file SET begin_snapshot = 8 WHERE data_file_id = 1`},
	// Key-index paths of UPDATE/DELETE (index.go): an IN list out of ctid
	// order, with a repeat, a NULL and a missing id; rows are still
	// visited, and new versions placed, in ctid order.
	{sql: `UPDATE "public".ducklake_data_file SET file_order = 7 WHERE data_file_id IN (1, 3, 1, NULL, 99)`},
	{sql: `UPDATE "public".ducklake_data_file SET file_order = 8 WHERE data_file_id IN (2, 1) AND end_snapshot IS NULL`},
	{sql: `DELETE FROM "public".ducklake_data_file WHERE data_file_id IN (2) AND end_snapshot = 99`},
	{sql: `SELECT data_file_id, file_order, ctid FROM "public".ducklake_data_file`},
	{sql: `WITH dropped_cols(tid, cid) AS ( VALUES (1, 2) ) UPDATE "public".ducklake_column SET end_snapshot = 6 FROM dropped_cols WHERE table_id = tid AND column_id = cid AND end_snapshot IS NULL`},
	{sql: `UPDATE "public".ducklake_file_column_stats SET contains_nan=CAST(false AS BOOLEAN), min_value=CAST('0' AS VARCHAR) WHERE data_file_id = 1 AND column_id = 1`},
	{sql: `SELECT data_file_id, value_count, max_value, min_value FROM "public".ducklake_file_column_stats WHERE column_id = 1 AND table_id = 1`},
	{sql: `SELECT "data_file_id", "begin_snapshot", "end_snapshot", ctid FROM "public"."ducklake_data_file"`},
	{sql: `SELECT column_id, end_snapshot, ctid FROM "public".ducklake_column ORDER BY column_id DESC LIMIT 1`},
	// Lookup-index paths of UPDATE/DELETE (index.go): DuckLake's statistics
	// updates by id on tables without a key. Rows with NULL ids share the
	// index key of id 0 and must be re-checked; a prefix of the index
	// columns, an IN list on the first, and an update that moves a row to
	// another id all read their candidates from the index.
	{sql: `CREATE TABLE "public"."ducklake_table_column_stats"("table_id" BIGINT, "column_id" BIGINT, "contains_null" BOOLEAN, "contains_nan" BOOLEAN, "min_value" VARCHAR, "max_value" VARCHAR, "extra_stats" VARCHAR)`},
	{sql: `INSERT INTO "public".ducklake_table_column_stats VALUES (1, 2, false, NULL, 'a', 'k', NULL), (2, 1, true, NULL, '3', '4', NULL), (1, 1, false, NULL, '1', '9', NULL), (NULL, 1, NULL, NULL, 'n', 'n', NULL), (0, NULL, NULL, NULL, 'z', 'z', NULL), (0, 1, NULL, NULL, '0', '0', NULL), (1, 2, true, NULL, 'dup', 'dup', NULL)`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET max_value = max_value || '!' WHERE table_id = 1`},
	{sql: `SELECT table_id, column_id, max_value, ctid FROM "public".ducklake_table_column_stats`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET contains_null=CAST(false AS BOOLEAN), contains_nan=CAST(NULL AS BOOLEAN), min_value='0', max_value='99', extra_stats=NULL WHERE table_id=1 AND column_id=2`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET extra_stats = 'e' WHERE table_id IN (2, 0, NULL, 2) AND column_id = 1`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET contains_nan = true WHERE table_id = 0 AND column_id = 1`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET table_id = 3 WHERE table_id = 2`},
	{sql: `UPDATE "public".ducklake_table_column_stats SET min_value = 'x' WHERE table_id = 2`},
	{sql: `DELETE FROM "public".ducklake_table_column_stats WHERE table_id = 1 AND column_id IN (1, 5)`},
	{sql: `SELECT table_id, column_id, contains_null, contains_nan, min_value, max_value, extra_stats, ctid FROM "public".ducklake_table_column_stats`},
	{sql: `UPDATE "public".ducklake_column SET end_snapshot = 7 WHERE table_id = 1 AND column_id = 1 AND end_snapshot IS NULL`},
	{sql: `UPDATE "public".ducklake_table SET end_snapshot = 9 WHERE end_snapshot IS NULL AND table_id IN (1, 4)`},
	{sql: `SELECT column_id, end_snapshot, ctid FROM "public".ducklake_column`},
	{sql: `SELECT table_id, end_snapshot, ctid FROM "public".ducklake_table`},
	{sql: `DELETE FROM "public".ducklake_file_column_stats WHERE data_file_id IN (2, 3)`},
	{sql: `DELETE FROM "public".ducklake_data_file WHERE ctid IN ('(0,3)')`},
	{sql: `DELETE FROM "public".ducklake_inlined_data_1_1 WHERE begin_snapshot <= 7 AND (name IS NULL OR id < 0)`},
	{sql: `SELECT count(*) FROM "public".ducklake_file_column_stats`},
	{sql: `SELECT data_file_id, ctid FROM "public".ducklake_data_file WHERE data_file_id > 1 OR end_snapshot IS NOT NULL ORDER BY data_file_id`},
	// TID paths of UPDATE/DELETE (index.go): a dead version's ctid, a live
	// one's, a repeat, a NULL, a ctid past the table, an extra conjunct.
	{sql: `UPDATE "public".ducklake_file_column_stats SET max_value = 'dead' WHERE ctid = '(0,1)'`},
	{sql: `UPDATE "public".ducklake_file_column_stats SET max_value = 'tid' WHERE ctid = '(0,4)'`},
	{sql: `DELETE FROM "public".ducklake_file_column_stats WHERE ctid IN ('(0,2)', NULL, '(0,2)', '(5,1)', '(0,5)') AND column_id = 2`},
	{sql: `SELECT data_file_id, column_id, max_value, ctid FROM "public".ducklake_file_column_stats`},
	{sql: `COMMIT`},
	// Migrations.
	{sql: `ALTER TABLE "public"."ducklake_data_file" ADD COLUMN "row_group_count" BIGINT`},
	{sql: `ALTER TABLE "public"."ducklake_inlined_data_1_1" RENAME COLUMN "begin_snapshot" TO "_ducklake_begin_snapshot"`},
	{sql: `SELECT data_file_id, row_group_count FROM "public".ducklake_data_file`},
	{sql: `SELECT _ducklake_begin_snapshot, row_id FROM "public".ducklake_inlined_data_1_1`},
	// set_option through a temp table (UPDATE ... FROM tmp WHERE ctid = ::TID).
	{sql: `BEGIN`},
	{sql: `CREATE LOCAL TEMPORARY TABLE "update_data_1"("value" VARCHAR, __page_id_string VARCHAR) ON COMMIT DROP;`},
	{sql: `COPY "update_data_1" FROM STDIN (FORMAT TEXT, NULL '')`, copy: "0.4\t(0,1)\n"},
	{sql: `UPDATE "public"."ducklake_metadata" SET "value" = "update_data_1"."value" FROM "update_data_1" WHERE "ducklake_metadata".ctid=__page_id_string::TID`},
	{sql: `SELECT "key", "value", ctid FROM "public"."ducklake_metadata"`},
	{sql: `COMMIT`},
	{sql: `SELECT * FROM "update_data_1"`},
	// expire/cleanup: ctid deletes and the schedule.
	{sql: `INSERT INTO "public".ducklake_files_scheduled_for_deletion VALUES (4, 'main/t/x.parquet', true, NOW())`},
	{sql: `DELETE FROM "public".ducklake_files_scheduled_for_deletion WHERE ctid IN ('(0,1)','(0,2)')`},
	{sql: `DELETE FROM "public".ducklake_inlined_data_tables`},
	{sql: `DROP TABLE IF EXISTS "public".ducklake_inlined_data_9_9`},
	{sql: `DROP TABLE "public".ducklake_inlined_data_1_1`},
	{sql: `CREATE TABLE IF NOT EXISTS "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY)`},
	// Errors as PostgreSQL words them.
	{sql: `INSERT INTO "public".ducklake_snapshot VALUES (0, NOW(), 0, 1, 0)`},
	{sql: `INSERT INTO "public".ducklake_metadata VALUES ('k', NULL, NULL, NULL)`},
	{sql: `INSERT INTO "public".ducklake_snapshot VALUES ('x', NOW(), 0, 1, 0)`},
	{sql: `SELECT * FROM "public".ducklake_nothing`},
	{sql: `COPY (SELECT "snapshot_id" FROM "public"."ducklake_nothing" ) TO STDOUT (FORMAT "binary")`},
	{sql: `SELECT nope FROM "public".ducklake_snapshot`},
	{sql: `BEGIN; SELECT * FROM "public".ducklake_nothing`},
	{sql: `SELECT 1`},
	{sql: `COMMIT`},
	{sql: `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`},
	{sql: `SELECT snapshot_id FROM "public".ducklake_snapshot ORDER BY snapshot_id`},
	{sql: `DELETE FROM "public".ducklake_snapshot`},
	{sql: `ROLLBACK`},
	{sql: `COMMIT`},
	{sql: `DISCARD ALL`},
	{sql: `SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot ORDER BY snapshot_id`},
	// Index access paths (index.go): key equality and MIN/MAX of the first
	// key column must answer exactly as a scan does, including correlated
	// subqueries, NULL keys, cross-type comparisons and empty tables.
	{sql: `CREATE TABLE ducklake_ix (id BIGINT PRIMARY KEY, grp INTEGER, note VARCHAR)`},
	{sql: `CREATE TABLE ducklake_ix2 (a BIGINT, b BIGINT, v VARCHAR, PRIMARY KEY (a, b))`},
	{sql: `CREATE TABLE ducklake_ixt (k VARCHAR PRIMARY KEY, v BIGINT)`},
	{sql: `CREATE TABLE ducklake_ixe (id BIGINT PRIMARY KEY)`},
	{sql: `INSERT INTO ducklake_ix VALUES (-7, 1, 'neg'), (3, 1, 'three'), (12, 2, 'twelve'), (-1, 2, 'minus one'), (0, 3, NULL)`},
	{sql: `INSERT INTO ducklake_ix2 VALUES (1, 1, 'a'), (1, 2, 'b'), (2, -5, 'c'), (-3, 9, 'd')`},
	{sql: `INSERT INTO ducklake_ixt VALUES ('b', 2), ('a', 1), ('', 0), ('a ', 5)`},
	{sql: `SELECT max(id), min(id) FROM ducklake_ix`},
	{sql: `SELECT MAX(id) FROM ducklake_ix`},
	{sql: `SELECT max(a), min(a) FROM ducklake_ix2`},
	{sql: `SELECT max(id), min(id) FROM ducklake_ixe`},
	{sql: `SELECT max(k), min(k) FROM ducklake_ixt`},
	{sql: `SELECT max(grp) FROM ducklake_ix`},
	{sql: `SELECT * FROM ducklake_ix WHERE id = (SELECT MAX(id) FROM ducklake_ix)`},
	{sql: `SELECT * FROM ducklake_ix WHERE id = (SELECT MIN(id) FROM ducklake_ix) AND note = 'neg'`},
	{sql: `SELECT * FROM ducklake_ix WHERE id = (SELECT MIN(id) FROM ducklake_ix) AND note = 'other'`},
	{sql: `SELECT id, note, ctid FROM ducklake_ix WHERE id = 12`},
	{sql: `SELECT id FROM ducklake_ix WHERE 3 = id`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = 4`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = NULL`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = 3.0`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = '12'`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = CAST(-1 AS SMALLINT)`},
	{sql: `SELECT a.id FROM ducklake_ix a WHERE a.id = (SELECT max(b.id) FROM ducklake_ix b WHERE b.grp = a.grp) ORDER BY a.id`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = (SELECT max(a) FROM ducklake_ix2 WHERE a = grp) ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE id = (SELECT id FROM ducklake_ixe)`},
	{sql: `SELECT * FROM ducklake_ix2 WHERE a = 1 AND b = 2`},
	{sql: `SELECT * FROM ducklake_ix2 WHERE b = -5 AND a = 2`},
	{sql: `SELECT * FROM ducklake_ix2 WHERE a = 1 ORDER BY b`},
	{sql: `SELECT * FROM ducklake_ixt WHERE k = 'a'`},
	{sql: `SELECT * FROM ducklake_ixt WHERE k = ''`},
	{sql: `BEGIN`},
	{sql: `DELETE FROM ducklake_ix WHERE id = 12`},
	{sql: `INSERT INTO ducklake_ix VALUES (40, 4, 'forty')`},
	{sql: `SELECT max(id), min(id) FROM ducklake_ix`},
	{sql: `SELECT note FROM ducklake_ix WHERE id = 12`},
	{sql: `SELECT note FROM ducklake_ix WHERE id = (SELECT max(id) FROM ducklake_ix)`},
	{sql: `ROLLBACK`},
	{sql: `SELECT max(id) FROM ducklake_ix`},
	// A subquery in a multi-row VALUES reads the table as the statement
	// found it, not with the statement's earlier rows: both rows compute
	// the same id, so the second is a duplicate.
	{sql: `INSERT INTO ducklake_ix VALUES ((SELECT max(id) + 1 FROM ducklake_ix), 5, 'a'), ((SELECT max(id) + 1 FROM ducklake_ix), 5, 'b')`},
	{sql: `INSERT INTO ducklake_ix VALUES ((SELECT max(id) + 1 FROM ducklake_ix), 5, 'a'), (-100, 5, 'b')`},
	{sql: `SELECT id, grp, note FROM ducklake_ix WHERE grp IN (5, 9) ORDER BY id`},
	{sql: `DELETE FROM ducklake_ix WHERE grp = 5`},
	// Comparisons with a subquery's column, NULLs among its rows, and the
	// shapes PostgreSQL refuses (found by fuzzing).
	{sql: `INSERT INTO ducklake_ix VALUES (50, NULL, 'null group')`},
	{sql: `SELECT id, grp > ANY (SELECT a FROM ducklake_ix2) AS gt_any, grp <= ALL (SELECT a FROM ducklake_ix2 WHERE a > 0) AS le_all, grp <> ALL (SELECT grp FROM ducklake_ix WHERE id < 5) AS ne_all, id = ALL (SELECT id FROM ducklake_ixe) AS all_empty, grp IN (SELECT b FROM ducklake_ix2) AS in_ FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE id IN (SELECT id, grp FROM ducklake_ix)`},
	{sql: `SELECT id FROM ducklake_ix WHERE id IN (SELECT)`},
	{sql: `SELECT count() FROM ducklake_ix`},
	{sql: `DELETE FROM ducklake_ix WHERE id = 50`},
	// The rest of the read vocabulary against PostgreSQL: NULL ordering,
	// LIMIT/OFFSET edges, aggregates over empty and NULL input, LIKE,
	// BETWEEN, CASE, joins, UNION ALL, VALUES, casts, and integer
	// arithmetic at its type's edges (22003, never a wrapped value; sum of
	// bigint is numeric).
	{sql: `SELECT id FROM ducklake_ix ORDER BY grp DESC, id`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY grp NULLS FIRST, id`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY id LIMIT NULL`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY id LIMIT 2 OFFSET 10`},
	{sql: `SELECT sum(grp), max(note), min(note), count(note) FROM ducklake_ix`},
	{sql: `SELECT sum(id) FROM ducklake_ix WHERE id > 1000`},
	{sql: `SELECT max(id) + 1, count(*) - 1 FROM ducklake_ix WHERE false`},
	{sql: `SELECT note || '-' || id FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE note LIKE 't%' ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE note NOT LIKE '%e%' ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE id BETWEEN 3 AND -1`},
	{sql: `SELECT id FROM ducklake_ix WHERE id NOT BETWEEN -1 AND 3 ORDER BY id`},
	{sql: `SELECT CASE grp WHEN 1 THEN 'one' WHEN 2 THEN 'two' END FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT 9223372036854775807 + 1`},
	{sql: `SELECT a.id, b.a FROM ducklake_ix a LEFT JOIN ducklake_ix2 b ON a.id = b.a ORDER BY a.id, b.b`},
	// Joins whose hash table is built on either side, with and without a
	// condition beyond the hashed equality, and with filters left to WHERE.
	{sql: `SELECT b.a, a.note FROM ducklake_ix2 b JOIN ducklake_ix a ON a.id = b.a ORDER BY 1, 2`},
	{sql: `SELECT a.id, b.b FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a AND b.b > 1 ORDER BY 1, 2`},
	{sql: `SELECT a.id, b.b FROM (SELECT * FROM ducklake_ix WHERE id = 1) a LEFT JOIN ducklake_ix2 b ON a.id = b.a AND b.b > 100 ORDER BY 1, 2`},
	{sql: `SELECT a.id, b.b FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a WHERE a.id = 2 AND b.b IS NOT NULL AND a.note IN ('two', 'x') ORDER BY 1, 2`},
	{sql: `SELECT * FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a ORDER BY a.id, b.b`},
	{sql: `SELECT a.* , b.a FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a ORDER BY a.id, b.b`},
	// Columns a join's ON consumes are dropped above it unless a later ON,
	// the WHERE, the select list or ORDER BY may still name them.
	{sql: `SELECT a.id, c.note FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a JOIN ducklake_ix c ON c.id = b.b ORDER BY 1, 2`},
	{sql: `SELECT a.note FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a JOIN ducklake_ix c ON c.id = b WHERE b.a > 0 ORDER BY b.a, 1`},
	{sql: `SELECT count(*) FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a JOIN ducklake_ix2 b2 ON b2.a = a.id`},
	{sql: `SELECT x.id FROM (SELECT a.id, b.b FROM ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a) x JOIN ducklake_ix c ON c.id = x.b ORDER BY 1`},
	// IN lists of string literals against text and "char".
	{sql: `SELECT id FROM ducklake_ix WHERE note IN ('one', 'three', NULL) ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE note NOT IN ('one', 'three') ORDER BY id`},
	{sql: `SELECT relname FROM pg_class WHERE relkind IN ('rx', 'zz') AND relname LIKE 'ducklake_ix%' ORDER BY 1`},
	{sql: `SELECT relname FROM pg_class WHERE relkind NOT IN ('r', 'i', 'S') AND relname LIKE 'ducklake_ix%' ORDER BY 1`},
	{sql: `SELECT id FROM ducklake_ix UNION ALL SELECT a FROM ducklake_ix2 ORDER BY 1`},
	{sql: `SELECT * FROM (VALUES (1, 'a'), (2, NULL)) AS v(x, y) ORDER BY x DESC`},
	{sql: `SELECT length(note), upper(note), lower(note) FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT '  x '::varchar = 'x', 'a' < 'b', 'B' < 'a'`},
	{sql: `SELECT id FROM ducklake_ix WHERE id IN (3, NULL) ORDER BY id`},
	{sql: `SELECT CAST(3.7 AS BIGINT), CAST(-3.5 AS BIGINT), CAST('2.5' AS NUMERIC)`},
	{sql: `SELECT id FROM ducklake_ix WHERE id > ALL (SELECT a FROM ducklake_ix2) ORDER BY id`},
	{sql: `SELECT id, (SELECT count(*) FROM ducklake_ix2 WHERE a = ducklake_ix.grp) FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE NOT EXISTS (SELECT 1 FROM ducklake_ix2 WHERE a = ducklake_ix.grp) ORDER BY id`},
	{sql: `SELECT count(*) FROM ducklake_ix WHERE note IS NOT NULL AND grp IS NULL`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY note COLLATE "C" DESC NULLS LAST, id`},
	{sql: `SELECT min(grp)::text, max(id)::varchar FROM ducklake_ix`},
	{sql: `SELECT 1 WHERE NULL IN (SELECT a FROM ducklake_ix2 WHERE false)`},
	{sql: `SELECT 1 WHERE NULL NOT IN (SELECT a FROM ducklake_ix2 WHERE false)`},
	{sql: `SELECT bool_and(grp > 0), bool_or(grp > 2) FROM ducklake_ix`},
	{sql: `SELECT id + 1, -id, id - 1 FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT 2147483647 + 1`},
	{sql: `SELECT -2147483647 - 2`},
	{sql: `SELECT -(-9223372036854775807 - 1)`},
	{sql: `SELECT 9223372036854775807 - -1`},
	{sql: `SELECT CAST(32767 AS SMALLINT) + CAST(1 AS SMALLINT)`},
	{sql: `SELECT CAST(1 AS SMALLINT) + 1, CAST(1 AS SMALLINT) + CAST(2 AS SMALLINT), 1 + 9223372036854775806`},
	{sql: `SELECT sum(x) FROM (VALUES (9223372036854775807), (1), (-5)) AS v(x)`},
	{sql: `SELECT sum(x) FROM (VALUES (2147483647), (2147483647)) AS v(x)`},
	// Writes that PostgreSQL refuses or converts: values out of a
	// column's range or type, column lists that do not match their values
	// or name a column twice, keys that collide, casts that round.
	{sql: `INSERT INTO ducklake_ix VALUES (60, 3000000000, 'big')`},
	{sql: `INSERT INTO ducklake_ix VALUES (61, 'x', 'bad')`},
	{sql: `INSERT INTO ducklake_ix VALUES (62, 1, 'a', 'extra')`},
	{sql: `INSERT INTO ducklake_ix (id, nope) VALUES (63, 1)`},
	{sql: `INSERT INTO ducklake_ix (id, grp) VALUES (64)`},
	{sql: `INSERT INTO ducklake_ix (id, id) VALUES (65, 65)`},
	{sql: `INSERT INTO ducklake_ix VALUES (NULL, 1, 'null key')`},
	{sql: `INSERT INTO ducklake_ix VALUES (3, 1, 'dup')`},
	{sql: `INSERT INTO ducklake_ix VALUES (66, 2147483647, 'max')`},
	{sql: `UPDATE ducklake_ix SET grp = grp + 1 WHERE id = 66`},
	{sql: `UPDATE ducklake_ix SET grp = grp - 1 WHERE id = 66`},
	{sql: `UPDATE ducklake_ix SET nope = 1 WHERE id = 66`},
	{sql: `UPDATE ducklake_ix SET id = 3 WHERE id = 66`},
	{sql: `UPDATE ducklake_ix SET grp = 'x' WHERE id = 66`},
	{sql: `UPDATE ducklake_ix SET grp = NULL, note = NULL WHERE id = 66`},
	{sql: `SELECT * FROM ducklake_ix WHERE id = 66`},
	{sql: `INSERT INTO ducklake_ix VALUES (67, 1.5, 'half')`},
	{sql: `INSERT INTO ducklake_ix VALUES (68, 2.5, 'two and a half'), (69, -2.5, 'minus')`},
	{sql: `INSERT INTO ducklake_ix VALUES (70, '7', 7)`},
	{sql: `SELECT * FROM ducklake_ix WHERE id >= 66 ORDER BY id`},
	{sql: `DELETE FROM ducklake_ix WHERE id >= 60`},
	{sql: `INSERT INTO ducklake_ixt VALUES (NULL, 1)`},
	{sql: `INSERT INTO ducklake_ixt VALUES ('toolong', 9223372036854775808)`},
	{sql: `INSERT INTO ducklake_ix2 VALUES (1, 1, 'dup pk')`},
	{sql: `INSERT INTO ducklake_ix2 (a, v) VALUES (5, 'no b')`},
	{sql: `UPDATE ducklake_ix2 SET b = 2 WHERE a = 1 AND b = 1`},
	{sql: `DELETE FROM ducklake_ix WHERE nope = 1`},
	{sql: `DELETE FROM ducklake_nowhere`},
	{sql: `INSERT INTO ducklake_types (i2) VALUES (40000)`},
	{sql: `INSERT INTO ducklake_types (u) VALUES ('not-a-uuid')`},
	{sql: `INSERT INTO ducklake_types (d) VALUES ('2024-02-30')`},
	{sql: `INSERT INTO ducklake_types (b) VALUES ('maybe')`},
	{sql: `INSERT INTO ducklake_types (n) VALUES (12345678901234567.0)`},
	{sql: `INSERT INTO ducklake_types (tz) VALUES ('not a time')`},
	{sql: `SELECT CAST(CAST('NaN' AS NUMERIC) AS BIGINT)`},
	{sql: `SELECT CAST(1e30 AS BIGINT)`},
	{sql: `SELECT CAST(CAST(1e30 AS DOUBLE PRECISION) AS INTEGER)`},
	{sql: `SELECT CAST(CAST('NaN' AS DOUBLE PRECISION) AS BIGINT)`},
	{sql: `SELECT CAST(2.5 AS INTEGER), CAST(-2.5 AS INTEGER), CAST(CAST(2.5 AS DOUBLE PRECISION) AS INTEGER)`},
	{sql: `INSERT INTO ducklake_ix (id, grp) SELECT 71`},
	{sql: `INSERT INTO ducklake_ix (grp, id, note, grp) VALUES (1, 72, 'x', 2)`},
	{sql: `INSERT INTO ducklake_ix VALUES (73)`},
	{sql: `SELECT id, grp, note FROM ducklake_ix WHERE id = 73`},
	{sql: `DELETE FROM ducklake_ix WHERE id = 73`},
	// Transaction control out of place, a failed and a read-only block,
	// and what PostgreSQL refuses when it plans a statement: a column
	// assigned twice, an ambiguous ORDER BY name, a FROM name used twice,
	// a WHERE or ON condition that is not boolean.
	{sql: `COMMIT`},
	{sql: `ROLLBACK`},
	{sql: `BEGIN; BEGIN`},
	{sql: `SELECT nope FROM ducklake_ix`},
	{sql: `SELECT 1`},
	{sql: `ROLLBACK`},
	{sql: `BEGIN READ ONLY`},
	{sql: `INSERT INTO ducklake_ix VALUES (80, 1, 'ro')`},
	{sql: `ROLLBACK`},
	{sql: `SET TRANSACTION ISOLATION LEVEL SERIALIZABLE`},
	{sql: `UPDATE ducklake_ix SET grp = 1, grp = 2 WHERE id = 3`},
	{sql: `UPDATE ducklake_ix SET id = NULL WHERE id = 3`},
	{sql: `UPDATE ducklake_ix SET grp = grp + 1`},
	{sql: `SELECT id, grp FROM ducklake_ix ORDER BY id`},
	{sql: `UPDATE ducklake_ix SET grp = grp - 1 WHERE grp IS NOT NULL`},
	{sql: `DELETE FROM ducklake_ix WHERE id IN (SELECT a FROM ducklake_ix2)`},
	{sql: `SHOW search_path`},
	{sql: `SHOW nope`},
	{sql: `SELECT id FROM ducklake_ix LIMIT 0`},
	{sql: `SELECT id AS x, grp AS x FROM ducklake_ix ORDER BY x`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY 5`},
	{sql: `SELECT id FROM ducklake_ix ORDER BY 0`},
	{sql: `SELECT id, id FROM ducklake_ix ORDER BY id`},
	{sql: `SELECT * FROM ducklake_ix AS a, ducklake_ix AS a`},
	{sql: `SELECT x.nope FROM ducklake_ix AS x`},
	{sql: `SELECT id FROM ducklake_ix WHERE grp`},
	{sql: `SELECT id FROM ducklake_ix WHERE 1`},
	{sql: `SELECT id FROM ducklake_ix WHERE NULL`},
	{sql: `SELECT 'a' || NULL, NULL || 'b', 1 || 'x'`},
	{sql: `SELECT CAST('abc' AS BIGINT)`},
	{sql: `SELECT count(*) FROM ducklake_ix WHERE note ~ '^t'`},
	{sql: `SELECT true AND NULL, false AND NULL, true OR NULL, NOT NULL::boolean`},
	{sql: `UPDATE ducklake_ix SET grp = grp WHERE grp`},
	{sql: `DELETE FROM ducklake_ix WHERE 1`},
	{sql: `SELECT id FROM ducklake_ix WHERE 'true' ORDER BY id`},
	{sql: `SELECT id FROM ducklake_ix WHERE 'maybe'`},
	{sql: `SELECT a.id FROM ducklake_ix a JOIN ducklake_ix2 b ON 1`},
	{sql: `SELECT * FROM ducklake_ix, ducklake_ix`},
	{sql: `SELECT count(*) FROM public.ducklake_ix, ducklake_ix`},
	{sql: `SELECT count(*) FROM (ducklake_ix a JOIN ducklake_ix2 b ON a.id = b.a) AS j, ducklake_ix a`},
	{sql: `SELECT count(*) FROM ducklake_ix a JOIN ducklake_ix2 a ON true`},
	{sql: `SELECT id AS note FROM ducklake_ix ORDER BY note`},
	// COPY FROM STDIN: NULLs, a column list, and rows PostgreSQL refuses.
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "90\t1\tninety\n91\t\\N\t\\N\n"},
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "92\t1\n"},
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "93\t1\tx\ty\n"},
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "94\tx\tbad\n"},
	{sql: `COPY ducklake_ix (id, note) FROM STDIN`, copy: "95\tfive\n"},
	{sql: `COPY ducklake_ix (id, id) FROM STDIN`, copy: "96\t96\n"},
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "3\t1\tdup\n"},
	{sql: `COPY ducklake_ix FROM STDIN`, copy: "97\t99999999999\tbig\n"},
	{sql: `SELECT * FROM ducklake_ix WHERE id >= 90 ORDER BY id`},
	{sql: `DELETE FROM ducklake_ix WHERE id >= 90`},
	// DDL that PostgreSQL refuses or answers with a notice.
	{sql: `CREATE TABLE ducklake_ddl (a BIGINT, a VARCHAR)`},
	{sql: `CREATE TABLE ducklake_ddl (a BIGINT PRIMARY KEY, b VARCHAR NOT NULL)`},
	{sql: `CREATE TABLE ducklake_ddl (a BIGINT)`},
	{sql: `CREATE TABLE IF NOT EXISTS ducklake_ddl (a BIGINT)`},
	{sql: `ALTER TABLE ducklake_ddl ADD COLUMN b BIGINT`},
	{sql: `ALTER TABLE ducklake_ddl ADD COLUMN IF NOT EXISTS b BIGINT`},
	{sql: `ALTER TABLE ducklake_nowhere ADD COLUMN c BIGINT`},
	{sql: `ALTER TABLE ducklake_ddl RENAME COLUMN a TO b`},
	{sql: `ALTER TABLE ducklake_ddl RENAME COLUMN nope TO c`},
	{sql: `CREATE TABLE ducklake_ddl2 (a nope)`},
	{sql: `CREATE TABLE ducklake_ddl2 (a BIGINT PRIMARY KEY, PRIMARY KEY (a))`},
	{sql: `CREATE TABLE ducklake_ddl2 (a BIGINT, PRIMARY KEY (z))`},
	{sql: `CREATE SCHEMA public`},
	{sql: `CREATE SCHEMA IF NOT EXISTS public`},
	{sql: `INSERT INTO ducklake_ddl VALUES (1, NULL)`},
	{sql: `INSERT INTO ducklake_ddl (a) VALUES (1)`},
	{sql: `DROP TABLE ducklake_ddl`},
	{sql: `DROP TABLE ducklake_ddl`},
	{sql: `DROP TABLE IF EXISTS ducklake_ddl`},
	// Whole-table binary COPY, compared byte for byte: every column type
	// the catalog uses, NULLs in each, edge values, ctid, rows stored
	// before an ADD COLUMN (their new columns read as NULL).
	{sql: `CREATE TABLE ducklake_types (i8 BIGINT, i4 INTEGER, i2 SMALLINT, v VARCHAR, t TEXT, b BOOLEAN, u UUID, tz TIMESTAMP WITH TIME ZONE, ts TIMESTAMP, d DATE, f8 DOUBLE PRECISION, f4 REAL, n DECIMAL(18,3), nu NUMERIC, by BYTEA, tm TIME)`},
	{sql: `INSERT INTO ducklake_types VALUES
(1, 2, 3, 'one', 'uno', true, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2026-01-01 10:00:00.123456+00', '2026-01-01 10:00:00', '2026-01-02', 2.5, 0.25, 1.50, 12345678901234567890.0001, '\x6f6e65', '23:59:59.999999'),
(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
(-9223372036854775808, -2147483648, -32768, '', 'tab\there', false, '00000000-0000-0000-0000-000000000000', 'infinity', '-infinity', '-infinity', -0.0, -1e30, -0.001, 0, '\x', '00:00:00'),
(9223372036854775807, 2147483647, 32767, 'ünïcode ✓', NULL, NULL, 'ffffffff-ffff-ffff-ffff-ffffffffffff', '1970-01-01 00:00:00+00', '0044-03-15 12:00:00', '1999-12-31', 'Infinity', '-Infinity', 999999999999999.999, -3.14159, NULL, NULL),
(7, NULL, 1, NULL, 'x', true, NULL, '2000-01-01 00:00:00+00', NULL, '2000-01-01', 1e-300, 'NaN', NULL, NULL, '\xdeadbeef', '12:00:00'),
(9, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'NaN', NULL, NULL, 'NaN', NULL, NULL)`},
	{sql: `COPY (SELECT "i8", "i4", "i2", "v", "t", "b", "u", "tz", "ts", "d", "f8", "f4", "n", "nu", "by", "tm", ctid FROM "public"."ducklake_types") TO STDOUT (FORMAT "binary")`, copyTo: true},
	{sql: `ALTER TABLE ducklake_types ADD COLUMN late BIGINT`},
	{sql: `ALTER TABLE ducklake_types ADD COLUMN late_v VARCHAR`},
	{sql: `INSERT INTO ducklake_types (i8, late, late_v) VALUES (8, 80, 'eighty')`},
	{sql: `COPY (SELECT "late_v", "late", "i8", ctid, "i8", "b" FROM "public"."ducklake_types") TO STDOUT (FORMAT "binary")`, copyTo: true},
	{sql: `COPY (SELECT * FROM "public"."ducklake_types") TO STDOUT (FORMAT "binary")`, copyTo: true},
	{sql: `COPY (SELECT "i8", "v", "tz", "late" FROM "public"."ducklake_types") TO STDOUT`, copyTo: true},
	{sql: `COPY (SELECT "data_file_id", "table_id", "begin_snapshot", "end_snapshot", "file_order", "path", "path_is_relative", "file_format", "record_count", "file_size_bytes", "footer_size", "row_id_start", "partition_id", "encryption_key", "mapping_id", "row_group_count" FROM "public"."ducklake_data_file") TO STDOUT (FORMAT "binary")`, copyTo: true},
	{sql: `COPY (SELECT "data_file_id", "table_id", "column_id", "column_size_bytes", "value_count", "null_count", "min_value", "max_value", "contains_nan", "extra_stats" FROM "public"."ducklake_file_column_stats") TO STDOUT (FORMAT "binary")`, copyTo: true},
}

var (
	maskTimestamp = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00`)
	maskOID       = regexp.MustCompile(`\b(1[6-9]|[2-9][0-9])[0-9]{3}\b`)
)

func maskValue(s string) string {
	return maskOID.ReplaceAllString(maskTimestamp.ReplaceAllString(s, "<now>"), "<oid>")
}

func pgEvents(ctx context.Context, c *pgconn.PgConn, st diffStep) []string {
	var ev []string
	if st.copy != "" {
		tag, err := c.CopyFrom(ctx, strings.NewReader(st.copy), st.sql)
		if err != nil {
			return append(ev, pgErrEvent(err))
		}
		return append(ev, "C "+tag.String())
	}
	mrr := c.Exec(ctx, st.sql)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		fds := rr.FieldDescriptions()
		if len(fds) > 0 {
			var cols []string
			for _, fd := range fds {
				cols = append(cols, fmt.Sprintf("%s:%d", fd.Name, fd.DataTypeOID))
			}
			ev = append(ev, "T "+strings.Join(cols, ","))
		}
		for rr.NextRow() {
			var cells []string
			for _, v := range rr.Values() {
				if v == nil {
					cells = append(cells, "NULL")
				} else {
					cells = append(cells, maskValue(string(v)))
				}
			}
			ev = append(ev, "D "+strings.Join(cells, "|"))
		}
		tag, err := rr.Close()
		if err != nil {
			ev = append(ev, pgErrEvent(err))
			break
		}
		ev = append(ev, "C "+tag.String())
	}
	if err := mrr.Close(); err != nil && (len(ev) == 0 || !strings.HasPrefix(ev[len(ev)-1], "E ")) {
		ev = append(ev, pgErrEvent(err))
	}
	return ev
}

// copyToEvents runs a COPY ... TO STDOUT on c and renders the stream's
// bytes and the tag.
func copyToEvents(ctx context.Context, c *pgconn.PgConn, sql string) []string {
	var buf bytes.Buffer
	tag, err := c.CopyTo(ctx, &buf, sql)
	if err != nil {
		return []string{fmt.Sprintf("B %x", buf.Bytes()), pgErrEvent(err)}
	}
	return []string{fmt.Sprintf("B %x", buf.Bytes()), "C " + tag.String()}
}

func pgErrEvent(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		s := "E " + pe.Code + " " + pe.Message
		if pe.Detail != "" {
			s += " DETAIL " + pe.Detail
		}
		return s
	}
	return "E untyped " + err.Error()
}

// moraineEvents renders moraine's answer like pgEvents does. COPY OUT rows
// are compared through their text form.
func moraineEvents(ctx context.Context, s *Session, st diffStep) []string {
	rs := &recSink{}
	if st.copy != "" {
		rs.stdin = [][]byte{[]byte(st.copy)}
	}
	err := s.query(ctx, st.sql, rs)
	var ev []string
	for _, e := range rs.ev {
		switch e.kind {
		case "H", "G", "d":
			continue // COPY framing: pgconn hides it
		case "D":
			ev = append(ev, "D "+maskValue(e.text))
		default:
			ev = append(ev, e.kind+" "+e.text)
		}
	}
	if err != nil {
		if pe, ok := wireError(err); ok {
			s := "E " + pe.Code + " " + pe.Message
			if pe.Detail != "" {
				s += " DETAIL " + pe.Detail
			}
			ev = append(ev, s)
		} else {
			ev = append(ev, "E untyped "+err.Error())
		}
	}
	return ev
}

func TestDifferential(t *testing.T) {
	conninfo := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	db := fmt.Sprintf("moraine_diff_%d", rand.Uint32())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db).ReadAll(); err != nil {
		t.Fatalf("create database: %v", err)
	}
	defer func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)").ReadAll()
	}()
	cfg, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = db
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", db, err)
	}
	defer pc.Close(ctx)

	ex := New(memcat.NewServer("lake"))
	s := ex.Open(db, "postgres", "", 1)
	// copyTo steps go through pgwire to the same executor and database.
	addr := wiretest.Serve(t, ex, nil)
	wc, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db))
	if err != nil {
		t.Fatalf("connect to moraine: %v", err)
	}
	defer wc.Close(ctx)
	for i, st := range diffScript {
		var want, got []string
		if st.copyTo {
			want, got = copyToEvents(ctx, pc, st.sql), copyToEvents(ctx, wc, st.sql)
		} else {
			want, got = pgEvents(ctx, pc, st), moraineEvents(ctx, s, st)
		}
		if os.Getenv("DIFF_DEBUG") != "" {
			t.Logf("step %d: %q", i, want)
		}
		if strings.Join(want, "\n") != strings.Join(got, "\n") {
			t.Errorf("step %d: %s\n--- postgres ---\n%s\n--- moraine ---\n%s", i, abbreviate(st.sql, 300), strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
		wantStatus := pc.TxStatus()
		if byte(s.TxStatus()) != wantStatus {
			t.Errorf("step %d: transaction status %c, postgres %c", i, s.TxStatus(), wantStatus)
		}
	}
}

// TestDiscardAllDeallocates: DISCARD ALL (which DuckDB's connection pool
// sends whenever it gets a connection back, and which poolers such as
// PgBouncer send between clients) deallocates the named prepared
// statements of the session, so a name can be prepared again and an old
// one is gone — on PostgreSQL and on moraine alike. The unnamed statement
// survives on both.
func TestDiscardAllDeallocates(t *testing.T) {
	conninfo := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer pc.Close(ctx)
	addr := wiretest.Serve(t, New(memcat.NewServer("lake")), nil)
	wc, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/lake?sslmode=disable", addr))
	if err != nil {
		t.Fatalf("connect to moraine: %v", err)
	}
	defer wc.Close(ctx)
	run := func(c *pgconn.PgConn) []string {
		var out []string
		note := func(what string, err error) {
			var pe *pgconn.PgError
			switch {
			case errors.As(err, &pe):
				out = append(out, fmt.Sprintf("%s: ERROR %s %s", what, pe.Code, pe.Message))
			case err != nil:
				out = append(out, fmt.Sprintf("%s: %v", what, err))
			default:
				out = append(out, what+": ok")
			}
		}
		exec := func(name string) {
			res := c.ExecPrepared(ctx, name, nil, nil, nil).Read()
			if res.Err != nil {
				note("execute "+name, res.Err)
				return
			}
			out = append(out, fmt.Sprintf("execute %s: %q", name, res.Rows))
		}
		_, err := c.Prepare(ctx, "s1", "SELECT 1", nil)
		note("prepare s1", err)
		_, err = c.Prepare(ctx, "s2", "SELECT 2", nil)
		note("prepare s2", err)
		_, err = c.Prepare(ctx, "", "SELECT 5", nil)
		note("prepare unnamed", err)
		_, err = c.Prepare(ctx, "s1", "SELECT 9", nil)
		note("prepare s1 again", err)
		_, err = c.Exec(ctx, "DISCARD ALL").ReadAll()
		note("discard all", err)
		_, err = c.Prepare(ctx, "s1", "SELECT 3", nil)
		note("prepare s1 after discard", err)
		exec("s1")
		exec("s2")
		exec("")
		return out
	}
	want, got := run(pc), run(wc)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("--- postgres ---\n%s\n--- moraine ---\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	t.Logf("%s", strings.Join(got, "\n"))
}
