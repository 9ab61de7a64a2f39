package sql

import (
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

const benchBatch = `INSERT INTO "public".ducklake_snapshot VALUES (5, NOW(), 1, 2, 4);UPDATE "public".ducklake_table_stats SET record_count=4, file_size_bytes=0, next_row_id=4 WHERE table_id=1;UPDATE "public".ducklake_table_column_stats SET contains_null=CAST(false AS BOOLEAN), contains_nan=CAST(NULL AS BOOLEAN), min_value='0', max_value='3', extra_stats=NULL WHERE table_id=1 AND column_id=1;INSERT INTO "public".ducklake_data_file VALUES (1, 1, 3, NULL, NULL, 'ducklake-01a228fa-c9df-7015-815e-060f72e.parquet', true, 'parquet', 5000, 93279, 1024, 0, NULL, NULL, NULL);INSERT INTO "public".ducklake_snapshot_changes VALUES (5, 'inserted_into_table:1', NULL, NULL, NULL)`

func BenchmarkParse(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := pg.Parse(benchBatch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := pg.Scan(benchBatch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClone(b *testing.B) {
	r, _ := pg.Parse(benchBatch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = proto.Clone(r)
	}
}

// BenchmarkTemplateHit is a commit batch whose shape was seen before with
// other literals: lexed and bound, not parsed.
func BenchmarkTemplateHit(b *testing.B) {
	c := newParseCache(1024)
	if _, err := c.parse(benchBatch); err != nil {
		b.Fatal(err)
	}
	other := strings.ReplaceAll(benchBatch, "(5, NOW()", "(6, NOW()")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.mu.Lock()
		clear(c.exact)
		c.mu.Unlock()
		if _, err := c.parse(other); err != nil {
			b.Fatal(err)
		}
	}
	if c.stats.shapeHits == 0 {
		b.Fatal("no template hit")
	}
}
