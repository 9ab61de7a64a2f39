package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// countSink counts what a statement produces and keeps nothing: the
// benchmarks below time the executor, not result encoding.
type countSink struct{ n int }

func (c *countSink) rows(_ []colInfo, rows [][]datum.Value, _ string) error {
	c.n += len(rows)
	return nil
}
func (c *countSink) complete(string) error    { return nil }
func (c *countSink) notice(*pgwire.Error)     {}
func (c *countSink) parameter(string, string) {}
func (c *countSink) copyIn(int16, int, string) (copySource, error) {
	return nil, unsupported("COPY FROM in a benchmark")
}
func (c *countSink) copyOut(_ int16, _ []colInfo, src rowSource) error {
	return src(func([]datum.Value) error { c.n++; return nil })
}

// duckLakeCommitSetup is the part of DuckLake's catalog one data-file
// commit touches (column order as DuckLake creates it), with stats for
// four tables of eight columns. Names are schema-qualified, as DuckLake
// sends them.
const duckLakeCommitSetup = `CREATE SCHEMA lake;
CREATE TABLE lake.ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMP WITH TIME ZONE, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT);
CREATE TABLE lake.ducklake_snapshot_changes(snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR, author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR);
CREATE TABLE lake.ducklake_data_file(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR, record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT, partition_id BIGINT, encryption_key VARCHAR, mapping_id BIGINT, partial_max BIGINT, row_group_count BIGINT);
CREATE TABLE lake.ducklake_file_column_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR);
CREATE TABLE lake.ducklake_table_stats(table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT);
CREATE TABLE lake.ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR);
INSERT INTO lake.ducklake_snapshot VALUES (0, NOW(), 0, 5, 0)`

// duckLakeCommit is one DuckLake data-file commit as the workload driver
// sends it (internal/workload): the three reads, then the batch, then COMMIT.
func duckLakeCommit(i int) []string {
	table := 1 + i%4
	q := []string{
		"BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		`COPY (SELECT "snapshot_id", "schema_version", "next_catalog_id", "next_file_id" FROM (SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM lake.ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM lake.ducklake_snapshot)) AS __unnamed_subquery ) TO STDOUT (FORMAT "binary")`,
		`COPY (SELECT "table_id", "record_count", "file_size_bytes", "next_row_id" FROM lake."ducklake_table_stats" ) TO STDOUT (FORMAT "binary")`,
		`COPY (SELECT "table_id", "column_id", "contains_null", "contains_nan", "min_value", "max_value", "extra_stats" FROM lake."ducklake_table_column_stats" ) TO STDOUT (FORMAT "binary")`,
	}
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO lake.ducklake_snapshot VALUES (%d, NOW(), 0, 5, %d);", i+1, i+1)
	if i < 4 {
		fmt.Fprintf(&b, "INSERT INTO lake.ducklake_table_stats VALUES (%d, 100, 100, 6800);", table)
		b.WriteString("INSERT INTO lake.ducklake_table_column_stats VALUES ")
		for c := 1; c <= 8; c++ {
			if c > 1 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, %d, false, NULL, 'v%012d', 'v%012d', NULL)", table, c, 0, 99)
		}
		b.WriteString(";")
	} else {
		fmt.Fprintf(&b, "UPDATE lake.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d;", i*100, i*6800, i*100, table)
		for c := 1; c <= 8; c++ {
			fmt.Fprintf(&b, "UPDATE lake.ducklake_table_column_stats SET contains_null=CAST(false AS BOOLEAN), contains_nan=CAST(NULL AS BOOLEAN), min_value='v%012d', max_value='v%012d', extra_stats=NULL WHERE table_id=%d AND column_id=%d;", 0, i*100, table, c)
		}
	}
	fmt.Fprintf(&b, "INSERT INTO lake.ducklake_data_file VALUES (%d, %d, %d, NULL, NULL, 'f%d.parquet', true, 'parquet', 100, 6800, 520, %d, NULL, NULL, NULL, NULL, 1);", i, table, i+1, i, i*100)
	b.WriteString("INSERT INTO lake.ducklake_file_column_stats VALUES ")
	for c := 1; c <= 8; c++ {
		if c > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "(%d, %d, %d, 116, 100, 0, 'v%012d', 'v%012d', NULL, NULL)", i, table, c, i*100, i*100+99)
	}
	fmt.Fprintf(&b, ";INSERT INTO lake.ducklake_snapshot_changes VALUES (%d, 'inserted_into_table:%d', NULL, 'bench', NULL);", i+1, table)
	return append(q, b.String(), "COMMIT")
}

// BenchmarkDuckLakeCommit times the executor's share of one DuckLake
// data-file commit (parse, the reads, the batch, the commit into the
// resident catalog; no store). The catalog grows by one file per
// iteration, as it does under the commit benchmark.
func BenchmarkDuckLakeCommit(b *testing.B) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	if out := runSQL(ctx, s, duckLakeCommitSetup, ""); strings.Contains(out, "ERROR") {
		b.Fatal(out)
	}
	sink := &countSink{}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, q := range duckLakeCommit(i) {
			if err := s.query(ctx, q, sink); err != nil {
				b.Fatalf("commit %d: %s: %v", i, q, err)
			}
		}
		i++
	}
	if sink.n < 3*i {
		b.Fatalf("%d commits read %d rows", i, sink.n)
	}
}
