package bench_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
)

// BenchmarkScatteredRows times DuckLake's whole-table attach reads of two
// tables with the same 10 000 rows on a built catalog (10 000 tables,
// 100 000 data files, `bench catalog`'s shape): ducklake_table, whose rows
// were written once, in bulk, and lie packed; and ducklake_table_stats,
// whose rows were rewritten by every commit into their table (ten each)
// between that commit's other allocations, so that the live rows lie
// scattered over a heap of hundreds of megabytes. The figure is ns per
// row through pgwire. Measured on a 2-vCPU VM: before
// catalog.Table.Scan loaded a leaf's rows together, table_stats took
// 197–254 ns a row against table's 137–146; since, 122–123 against 135.
func BenchmarkScatteredRows(b *testing.B) {
	ctx := context.Background()
	srv := catalog.NewServer(catalog.Options{})
	shape := bench.LakeShape{Tables: 10_000, Files: 100_000, Stats: 8, FilesPerCommit: 10}
	if err := bench.BuildLake(ctx, srv.Database("lake"), shape, nil); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	addr := wiretest.Serve(b, sql.New(memcat.On(srv)), nil)
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/lake?sslmode=disable", addr))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, r := range bench.Reads {
		if r.Name != "table" && r.Name != "table_stats" {
			continue
		}
		b.Run(r.Name, func(b *testing.B) {
			var rows int64
			for b.Loop() {
				tag, err := conn.CopyTo(ctx, io.Discard, r.SQL)
				if err != nil {
					b.Fatal(err)
				}
				rows = tag.RowsAffected()
			}
			if rows != int64(shape.Tables) {
				b.Fatalf("%s: %d rows, want %d", r.Name, rows, shape.Tables)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*rows), "ns/row")
		})
	}
}
