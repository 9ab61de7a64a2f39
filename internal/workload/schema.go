package workload

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// catalogDDL is the DuckLake 1.1-dev1 catalog exactly as DuckLake creates it
// on a fresh PostgreSQL catalog (testdata/shapes/inventory.md, DDL group; the
// order is the order DuckLake sends them). %s is the quoted metadata schema.
// Column order is part of the contract: every DuckLake insert is positional.
var catalogDDL = []string{
	`CREATE TABLE %s."ducklake_metadata"("key" VARCHAR NOT NULL, "value" VARCHAR NOT NULL, "scope" VARCHAR, "scope_id" BIGINT)`,
	`CREATE TABLE %s."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT)`,
	`CREATE TABLE %s."ducklake_snapshot_changes"("snapshot_id" BIGINT PRIMARY KEY, "changes_made" VARCHAR, "author" VARCHAR, "commit_message" VARCHAR, "commit_extra_info" VARCHAR)`,
	`CREATE TABLE %s."ducklake_schema"("schema_id" BIGINT PRIMARY KEY, "schema_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN)`,
	`CREATE TABLE %s."ducklake_table"("table_id" BIGINT, "table_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_id" BIGINT, "table_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN)`,
	`CREATE TABLE %s."ducklake_view"("view_id" BIGINT, "view_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_id" BIGINT, "view_name" VARCHAR, "dialect" VARCHAR, "sql" VARCHAR, "column_aliases" VARCHAR)`,
	`CREATE TABLE %s."ducklake_tag"("object_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR)`,
	`CREATE TABLE %s."ducklake_column_tag"("table_id" BIGINT, "column_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR)`,
	`CREATE TABLE %s."ducklake_data_file"("data_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "file_order" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "file_format" VARCHAR, "record_count" BIGINT, "file_size_bytes" BIGINT, "footer_size" BIGINT, "row_id_start" BIGINT, "partition_id" BIGINT, "encryption_key" VARCHAR, "mapping_id" BIGINT, "partial_max" BIGINT, "row_group_count" BIGINT)`,
	`CREATE TABLE %s."ducklake_file_column_stats"("data_file_id" BIGINT, "table_id" BIGINT, "column_id" BIGINT, "column_size_bytes" BIGINT, "value_count" BIGINT, "null_count" BIGINT, "min_value" VARCHAR, "max_value" VARCHAR, "contains_nan" BOOLEAN, "extra_stats" VARCHAR)`,
	`CREATE TABLE %s."ducklake_file_variant_stats"("data_file_id" BIGINT, "table_id" BIGINT, "column_id" BIGINT, "variant_path" VARCHAR, "shredded_type" VARCHAR, "column_size_bytes" BIGINT, "value_count" BIGINT, "null_count" BIGINT, "min_value" VARCHAR, "max_value" VARCHAR, "contains_nan" BOOLEAN, "extra_stats" VARCHAR)`,
	`CREATE TABLE %s."ducklake_delete_file"("delete_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "data_file_id" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "format" VARCHAR, "delete_count" BIGINT, "file_size_bytes" BIGINT, "footer_size" BIGINT, "encryption_key" VARCHAR, "partial_max" BIGINT, "row_group_count" BIGINT)`,
	`CREATE TABLE %s."ducklake_column"("column_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "table_id" BIGINT, "column_order" BIGINT, "column_name" VARCHAR, "column_type" VARCHAR, "initial_default" VARCHAR, "default_value" VARCHAR, "nulls_allowed" BOOLEAN, "parent_column" BIGINT, "default_value_type" VARCHAR, "default_value_dialect" VARCHAR)`,
	`CREATE TABLE %s."ducklake_table_stats"("table_id" BIGINT, "record_count" BIGINT, "next_row_id" BIGINT, "file_size_bytes" BIGINT)`,
	`CREATE TABLE %s."ducklake_table_column_stats"("table_id" BIGINT, "column_id" BIGINT, "contains_null" BOOLEAN, "contains_nan" BOOLEAN, "min_value" VARCHAR, "max_value" VARCHAR, "extra_stats" VARCHAR)`,
	`CREATE TABLE %s."ducklake_partition_info"("partition_id" BIGINT, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT)`,
	`CREATE TABLE %s."ducklake_partition_column"("partition_id" BIGINT, "table_id" BIGINT, "partition_key_index" BIGINT, "column_id" BIGINT, "transform" VARCHAR)`,
	`CREATE TABLE %s."ducklake_file_partition_value"("data_file_id" BIGINT, "table_id" BIGINT, "partition_key_index" BIGINT, "partition_value" VARCHAR)`,
	`CREATE TABLE %s."ducklake_files_scheduled_for_deletion"("data_file_id" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "schedule_start" TIMESTAMP WITH TIME ZONE)`,
	`CREATE TABLE %s."ducklake_inlined_data_tables"("table_id" BIGINT, "table_name" VARCHAR, "schema_version" BIGINT)`,
	`CREATE TABLE %s."ducklake_column_mapping"("mapping_id" BIGINT, "table_id" BIGINT, "type" VARCHAR)`,
	`CREATE TABLE %s."ducklake_name_mapping"("mapping_id" BIGINT, "column_id" BIGINT, "source_name" VARCHAR, "target_field_id" BIGINT, "parent_column" BIGINT, "is_partition" BOOLEAN)`,
	`CREATE TABLE %s."ducklake_schema_versions"("begin_snapshot" BIGINT, "schema_version" BIGINT, "table_id" BIGINT)`,
	`CREATE TABLE %s."ducklake_macro"("schema_id" BIGINT, "macro_id" BIGINT, "macro_name" VARCHAR, "begin_snapshot" BIGINT, "end_snapshot" BIGINT)`,
	`CREATE TABLE %s."ducklake_macro_impl"("macro_id" BIGINT, "impl_id" BIGINT, "dialect" VARCHAR, "sql" VARCHAR, "type" VARCHAR)`,
	`CREATE TABLE %s."ducklake_macro_parameters"("macro_id" BIGINT, "impl_id" BIGINT, "column_id" BIGINT, "parameter_name" VARCHAR, "parameter_type" VARCHAR, "default_value" VARCHAR, "default_value_type" VARCHAR)`,
	`CREATE TABLE %s."ducklake_sort_info"("sort_id" BIGINT, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT)`,
	`CREATE TABLE %s."ducklake_sort_expression"("sort_id" BIGINT, "table_id" BIGINT, "sort_key_index" BIGINT, "expression" VARCHAR, "dialect" VARCHAR, "sort_direction" VARCHAR, "null_order" VARCHAR)`,
	`CREATE TABLE %s."ducklake_view_column_tag"("view_id" BIGINT, "column_name" VARCHAR, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR)`,
}

// CatalogVersion is the DuckLake catalog version Init writes.
const CatalogVersion = "1.1-dev1"

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes a SQL string literal.
func quoteLiteral(s string) string { var w stmtBuf; return w.lit(s).String() }

func newUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func uuidString(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Init creates a fresh DuckLake catalog in cfg.Schema the way DuckLake's
// attach of a new catalog does on its local channel: one REPEATABLE READ
// transaction with the CREATE TABLEs (one simple query each), then the seed
// rows as binary COPY FROM STDIN — snapshot 0, its changes
// `created_schema:"main"`, the metadata rows and the `main` schema.
func Init(ctx context.Context, conn *pgconn.PgConn, schema, dataPath string) error {
	q := quoteIdent(schema)
	if err := exec(ctx, conn, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	fail := func(err error) error {
		_ = exec(ctx, conn, "ROLLBACK")
		return fmt.Errorf("init: %w", err)
	}
	if schema != "public" {
		if err := exec(ctx, conn, "CREATE SCHEMA IF NOT EXISTS "+q); err != nil {
			return fail(err)
		}
	}
	for _, ddl := range catalogDDL {
		if err := exec(ctx, conn, fmt.Sprintf(ddl, q)+";"); err != nil {
			return fail(err)
		}
	}
	now := time.Now()
	seeds := []struct {
		table string
		rows  [][]cell
	}{
		{"ducklake_snapshot", [][]cell{{int64(0), now, int64(0), int64(1), int64(0)}}},
		{"ducklake_snapshot_changes", [][]cell{{int64(0), `created_schema:"main"`, nil, nil, nil}}},
		{"ducklake_metadata", [][]cell{
			{"version", CatalogVersion, nil, nil},
			{"created_by", "moraine workload driver", nil, nil},
			{"data_path", dataPath, nil, nil},
			{"encrypted", "false", nil, nil},
		}},
		{"ducklake_schema", [][]cell{{int64(0), newUUID(), int64(0), nil, "main", "main/", true}}},
	}
	for _, s := range seeds {
		enc := newCopyEncoder()
		for _, r := range s.rows {
			enc.row(r...)
		}
		sql := fmt.Sprintf("COPY %s.%s FROM STDIN (FORMAT BINARY)", q, quoteIdent(s.table))
		if _, err := conn.CopyFrom(ctx, strings.NewReader(string(enc.bytes())), sql); err != nil {
			return fail(fmt.Errorf("%s: %w", sql, err))
		}
	}
	if err := exec(ctx, conn, "COMMIT"); err != nil {
		return fmt.Errorf("init: COMMIT: %w", err)
	}
	return nil
}

// exec runs one simple-protocol Query message (which may hold several
// statements) and returns its first error. It reads the results without
// keeping them (a commit batch has a dozen).
func exec(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	return conn.Exec(ctx, sql).Close()
}
