-- A DuckLake catalog at version 0.2, written as DuckLake 0.2 writes it to a
-- PostgreSQL catalog: the tables of its InitializeDuckLake (rendered as
-- DuckDB's postgres extension sends DDL), then commits in the shape of its
-- metadata manager's statements, each one postgres_execute call (one Query
-- message, inside the transaction). NOW() and UUID() are fixed literals so
-- that two servers given this script hold the same rows.
--
-- The lake: main.t(id INTEGER, s VARCHAR) with inlined rows, a data file
-- with a partial_max, a second data file and a delete file, then a column
-- added; main.u created and dropped.
-- commit
CREATE TABLE "public"."ducklake_metadata"("key" VARCHAR NOT NULL, "value" VARCHAR NOT NULL, "scope" VARCHAR, "scope_id" BIGINT);
CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT);
CREATE TABLE "public"."ducklake_snapshot_changes"("snapshot_id" BIGINT PRIMARY KEY, "changes_made" VARCHAR);
CREATE TABLE "public"."ducklake_schema"("schema_id" BIGINT PRIMARY KEY, "schema_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN);
CREATE TABLE "public"."ducklake_table"("table_id" BIGINT, "table_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_id" BIGINT, "table_name" VARCHAR, "path" VARCHAR, "path_is_relative" BOOLEAN);
CREATE TABLE "public"."ducklake_view"("view_id" BIGINT, "view_uuid" UUID, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "schema_id" BIGINT, "view_name" VARCHAR, "dialect" VARCHAR, "sql" VARCHAR, "column_aliases" VARCHAR);
CREATE TABLE "public"."ducklake_tag"("object_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR);
CREATE TABLE "public"."ducklake_column_tag"("table_id" BIGINT, "column_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "key" VARCHAR, "value" VARCHAR);
CREATE TABLE "public"."ducklake_data_file"("data_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "file_order" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "file_format" VARCHAR, "record_count" BIGINT, "file_size_bytes" BIGINT, "footer_size" BIGINT, "row_id_start" BIGINT, "partition_id" BIGINT, "encryption_key" VARCHAR, "partial_file_info" VARCHAR, "mapping_id" BIGINT);
CREATE TABLE "public"."ducklake_file_column_statistics"("data_file_id" BIGINT, "table_id" BIGINT, "column_id" BIGINT, "column_size_bytes" BIGINT, "value_count" BIGINT, "null_count" BIGINT, "min_value" VARCHAR, "max_value" VARCHAR, "contains_nan" BOOLEAN);
CREATE TABLE "public"."ducklake_delete_file"("delete_file_id" BIGINT PRIMARY KEY, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "data_file_id" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "format" VARCHAR, "delete_count" BIGINT, "file_size_bytes" BIGINT, "footer_size" BIGINT, "encryption_key" VARCHAR);
CREATE TABLE "public"."ducklake_column"("column_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "table_id" BIGINT, "column_order" BIGINT, "column_name" VARCHAR, "column_type" VARCHAR, "initial_default" VARCHAR, "default_value" VARCHAR, "nulls_allowed" BOOLEAN, "parent_column" BIGINT);
CREATE TABLE "public"."ducklake_table_stats"("table_id" BIGINT, "record_count" BIGINT, "next_row_id" BIGINT, "file_size_bytes" BIGINT);
CREATE TABLE "public"."ducklake_table_column_stats"("table_id" BIGINT, "column_id" BIGINT, "contains_null" BOOLEAN, "contains_nan" BOOLEAN, "min_value" VARCHAR, "max_value" VARCHAR);
CREATE TABLE "public"."ducklake_partition_info"("partition_id" BIGINT, "table_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT);
CREATE TABLE "public"."ducklake_partition_column"("partition_id" BIGINT, "table_id" BIGINT, "partition_key_index" BIGINT, "column_id" BIGINT, "transform" VARCHAR);
CREATE TABLE "public"."ducklake_file_partition_value"("data_file_id" BIGINT, "table_id" BIGINT, "partition_key_index" BIGINT, "partition_value" VARCHAR);
CREATE TABLE "public"."ducklake_files_scheduled_for_deletion"("data_file_id" BIGINT, "path" VARCHAR, "path_is_relative" BOOLEAN, "schedule_start" TIMESTAMP WITH TIME ZONE);
CREATE TABLE "public"."ducklake_inlined_data_tables"("table_id" BIGINT, "table_name" VARCHAR, "schema_version" BIGINT);
CREATE TABLE "public"."ducklake_column_mapping"("mapping_id" BIGINT, "table_id" BIGINT, "type" VARCHAR);
CREATE TABLE "public"."ducklake_name_mapping"("mapping_id" BIGINT, "column_id" BIGINT, "source_name" VARCHAR, "target_field_id" BIGINT, "parent_column" BIGINT);
INSERT INTO "public".ducklake_snapshot VALUES (0, '2025-09-01 10:00:00+00', 0, 1, 0);
INSERT INTO "public".ducklake_snapshot_changes VALUES (0, 'created_schema:"main"');
INSERT INTO "public".ducklake_metadata (key, value) VALUES ('version', '0.2'), ('created_by', 'DuckDB v1.4.1'), ('data_path', 'lake_files/'), ('encrypted', 'false');
INSERT INTO "public".ducklake_schema VALUES (0, '1b0e2c7a-6a53-4c1e-9a8e-0d7c2f3b4a51', 0, NULL, 'main', 'main/', true);
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (1, '2025-09-01 10:00:01+00', 1, 2, 0);
INSERT INTO "public".ducklake_snapshot_changes VALUES (1, 'created_table:"main"."t"');
INSERT INTO "public".ducklake_table VALUES (1, '5f0c9d2e-8b1a-4e3f-a6d7-2c9b8e1f0a32', 1, NULL, 0, 't', 't/', true);
INSERT INTO "public".ducklake_column VALUES (1, 1, NULL, 1, 0, 'id', 'int32', NULL, NULL, true, NULL),(2, 1, NULL, 1, 1, 's', 'varchar', NULL, NULL, true, NULL);
INSERT INTO "public".ducklake_inlined_data_tables VALUES (1, 'ducklake_inlined_data_1_1', 1);
CREATE TABLE "public"."ducklake_inlined_data_1_1"("row_id" BIGINT, "begin_snapshot" BIGINT, "end_snapshot" BIGINT, "id" INTEGER, "s" VARCHAR);
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (2, '2025-09-01 10:00:02+00', 1, 2, 0);
INSERT INTO "public".ducklake_snapshot_changes VALUES (2, 'inlined_insert:1');
INSERT INTO "public".ducklake_inlined_data_1_1 VALUES (0, 2, NULL, 1, 'a'),(1, 2, NULL, 2, 'b');
INSERT INTO "public".ducklake_table_stats VALUES (1, 2, 2, 0);
INSERT INTO "public".ducklake_table_column_stats VALUES (1, 1, false, NULL, '1', '2'),(1, 2, false, NULL, 'a', 'b');
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (3, '2025-09-01 10:00:03+00', 1, 2, 1);
INSERT INTO "public".ducklake_snapshot_changes VALUES (3, 'inserted_into_table:1');
INSERT INTO "public".ducklake_data_file VALUES (0, 1, 3, NULL, NULL, 'ducklake-0199.parquet', true, 'parquet', 1000, 8210, 512, 2, NULL, NULL, 'partial_max:3', NULL);
INSERT INTO "public".ducklake_file_column_statistics VALUES (0, 1, 1, 4021, 1000, 0, '3', '1002', NULL),(0, 1, 2, 4011, 1000, 0, 'f10', 'f999', NULL);
UPDATE "public".ducklake_table_stats SET record_count=1002, file_size_bytes=8210, next_row_id=1002 WHERE table_id=1;
UPDATE "public".ducklake_table_column_stats SET contains_null=false, contains_nan=NULL, min_value='1', max_value='1002' WHERE table_id=1 AND column_id=1;
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (4, '2025-09-01 10:00:04+00', 1, 2, 3);
INSERT INTO "public".ducklake_snapshot_changes VALUES (4, 'inserted_into_table:1,deleted_from_table:1');
INSERT INTO "public".ducklake_data_file VALUES (1, 1, 4, NULL, NULL, 'ducklake-019a.parquet', true, 'parquet', 10, 410, 300, 1002, NULL, NULL, NULL, NULL);
INSERT INTO "public".ducklake_file_column_statistics VALUES (1, 1, 1, 90, 10, 0, '2000', '2009', NULL),(1, 1, 2, 80, 10, 2, 'g0', 'g9', NULL);
INSERT INTO "public".ducklake_delete_file VALUES (2, 1, 4, NULL, 0, 'ducklake-019b-delete.parquet', true, 'parquet', 5, 620, 210, NULL);
UPDATE "public".ducklake_table_stats SET record_count=1007, file_size_bytes=8620, next_row_id=1012 WHERE table_id=1;
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (5, '2025-09-01 10:00:05+00', 2, 2, 4);
INSERT INTO "public".ducklake_snapshot_changes VALUES (5, 'altered_table:1');
INSERT INTO "public".ducklake_column VALUES (3, 5, NULL, 1, 2, 'x', 'int64', '7', '7', true, NULL);
INSERT INTO "public".ducklake_files_scheduled_for_deletion VALUES (3, 'ducklake-0198.parquet', true, '2025-09-01 10:00:05+00');
INSERT INTO "public".ducklake_tag VALUES (1, 5, NULL, 'comment', 'the first table');
INSERT INTO "public".ducklake_column_mapping VALUES (0, 1, 'map_by_name');
INSERT INTO "public".ducklake_name_mapping VALUES (0, 1, 'id', 1, NULL),(0, 2, 's', 2, NULL);
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (6, '2025-09-01 10:00:06+00', 3, 3, 4);
INSERT INTO "public".ducklake_snapshot_changes VALUES (6, 'created_table:"main"."u"');
INSERT INTO "public".ducklake_table VALUES (2, '9d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f54', 6, NULL, 0, 'u', 'u/', true);
INSERT INTO "public".ducklake_column VALUES (1, 6, NULL, 2, 0, 'k', 'varchar', NULL, NULL, true, NULL);
-- commit
INSERT INTO "public".ducklake_snapshot VALUES (7, '2025-09-01 10:00:07+00', 4, 3, 4);
INSERT INTO "public".ducklake_snapshot_changes VALUES (7, 'dropped_table:2');
UPDATE "public".ducklake_table SET end_snapshot = 7 WHERE table_id = 2 AND end_snapshot IS NULL;
UPDATE "public".ducklake_column SET end_snapshot = 7 WHERE table_id = 2 AND end_snapshot IS NULL;
