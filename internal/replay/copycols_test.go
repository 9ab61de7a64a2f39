package replay

import (
	"reflect"
	"testing"
)

func TestSchemaBook(t *testing.T) {
	b := schemaBook{}
	for _, sql := range []string{
		`CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "n" DECIMAL(10,2), "tags" VARCHAR[])`,
		`ALTER TABLE "public"."ducklake_snapshot" ADD COLUMN "row_group_count" BIGINT`,
		`CREATE TABLE IF NOT EXISTS "public".ducklake_inlined_data_1_1(row_id BIGINT, begin_snapshot BIGINT)`,
		`ALTER TABLE "public"."ducklake_inlined_data_1_1" RENAME COLUMN "row_id" TO "_ducklake_row_id"`,
		`SELECT 1`,
	} {
		b.learnDDL(sql)
	}
	want := schemaBook{
		"ducklake_snapshot": {
			"snapshot_id": {"int8"}, "snapshot_time": {"timestamptz"}, "n": {"numeric(10,2)"},
			"tags": {"varchar[]"}, "row_group_count": {"int8"},
		},
		"ducklake_inlined_data_1_1": {"row_id": {"int8"}, "begin_snapshot": {"int8"}, "_ducklake_row_id": {"int8"}},
	}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("book = %v\nwant %v", b, want)
	}
}

func TestCopySource(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		rel  string
		cols []string
		ok   bool
	}{
		{`COPY (SELECT "a", "b" FROM "public"."t" ) TO STDOUT (FORMAT "binary")`, "t", []string{"a", "b"}, true},
		{`COPY (SELECT NULL FROM "public"."t" LIMIT 1) TO STDOUT (FORMAT "binary")`, "t", []string{"?column?"}, true},
		{`COPY (SELECT "a" FROM (SELECT a FROM t) AS s) TO STDOUT (FORMAT "binary")`, "", []string{"a"}, true},
		{`COPY "public"."t" FROM STDIN (FORMAT BINARY)`, "", nil, false},
		{`SELECT a FROM t`, "", nil, false},
	} {
		rel, cols, ok := copySource(tc.sql)
		if rel != tc.rel || !reflect.DeepEqual(cols, tc.cols) || ok != tc.ok {
			t.Errorf("copySource(%q) = %q %q %v; want %q %q %v", tc.sql, rel, cols, ok, tc.rel, tc.cols, tc.ok)
		}
	}
}
