package verbs

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
)

// lakeWithFiles builds, in memory, a lake of n data files with two column
// statistics each.
func lakeWithFiles(t *testing.T, n int) *catalog.Server {
	t.Helper()
	ctx := context.Background()
	srv := catalog.NewServer(catalog.Options{})
	lake, err := Init(ctx, srv.Database("lake"), "public", "s3://bucket/")
	if err != nil {
		t.Fatal(err)
	}
	c := lake.Begin()
	tid, cols := c.CreateTable(0, "main", "t", []Column{{Name: "a", Type: "int64"}, {Name: "b", Type: "varchar"}})
	if _, err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for done := 0; done < n; {
		c := lake.Begin()
		for i := 0; i < 1000 && done < n; i++ {
			c.AddDataFile(DataFile{TableID: tid, RecordCount: 10, FileSize: 1 << 20, FooterSize: 512,
				Path: fmt.Sprintf("f-%09d.parquet", done), Stats: []ColumnStats{
					{ColumnID: cols[0], ValueCount: 10, Min: "0", Max: "9"}, {ColumnID: cols[1], ValueCount: 10, Min: "a", Max: "z"}}})
			done++
		}
		if _, err := c.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// forkAllocs is the bytes a fork of srv's lake allocates: the least of
// five forks, since what else the process allocates meanwhile (the
// runtime, the test framework) only adds to a reading.
func forkAllocs(t *testing.T, srv *catalog.Server) uint64 {
	t.Helper()
	least := uint64(1<<63 - 1)
	for i := range 5 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := srv.ForkDatabase(context.Background(), fmt.Sprintf("dev%d", i), "lake", catalog.ForkOptions{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// TestForkIsConstant: a fork allocates the same whatever the size of the
// catalog it forks (it shares the parent's version), and the branch reads
// every row of it.
func TestForkIsConstant(t *testing.T) {
	small, large := lakeWithFiles(t, 10), lakeWithFiles(t, 20000)
	a, b := forkAllocs(t, small), forkAllocs(t, large)
	t.Logf("a fork allocates %d bytes at 10 data files, %d at 20000", a, b)
	if b > a+a/2 {
		t.Fatalf("a fork of 20000 data files allocates %d bytes, of 10 %d: it grows with the catalog", b, a)
	}
	dev, _ := large.Lookup("dev0")
	f, err := dev.Current().Table("public", "ducklake_data_file")
	if err != nil || f.Len() != 20000 {
		t.Fatalf("the branch reads %v data files (%v)", f.Len(), err)
	}
}
