package verbs

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

var ctx = context.Background()

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// buildLake writes a small lake through the verbs: a table, files under
// three partition specs, sorting set and cleared, ended and deleted files.
func buildLake(t *testing.T) *Lake {
	db := catalog.NewServer(catalog.Options{}).Database("lake")
	l, err := Init(ctx, db, "public", "s3://b/")
	if err != nil {
		t.Fatal(err)
	}
	l.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	c := l.Begin()
	tid, cols := c.CreateTable(0, "main", "events", []Column{{"ts", "timestamp"}, {"k", "varchar"}})
	must(c.Commit(ctx))
	var files []int64
	addFiles := func(part *int64, vals ...string) {
		c := l.Begin()
		for i := 0; i < 3; i++ {
			files = append(files, c.AddDataFile(DataFile{TableID: tid, RecordCount: 10, FileSize: 1000, FooterSize: 100,
				Path: fmt.Sprintf("f%d.parquet", len(files)), PartitionID: part, PartitionValues: vals,
				Stats: []ColumnStats{{ColumnID: cols[0], ValueCount: 10, Min: "a", Max: "z"}}}))
		}
		must(c.Commit(ctx))
	}
	addFiles(nil)
	c = l.Begin()
	p1 := c.SetPartitioning(tid, []PartitionColumn{{cols[0], "year"}})
	c.SetSorting(tid, []SortExpression{{`"k" COLLATE "it's"`, "ASC", "NULLS_LAST"}})
	must(c.Commit(ctx))
	addFiles(&p1, "2025")
	c = l.Begin()
	p2 := c.SetPartitioning(tid, []PartitionColumn{{cols[1], "bucket(16)"}, {cols[0], "identity"}})
	c.ClearSorting(tid)
	must(c.Commit(ctx))
	addFiles(&p2, "7", "2025-01-01")
	c = l.Begin()
	c.ClearPartitioning(tid)
	c.EndDataFile(tid, files[0])
	c.DeleteDataFile(files[1])
	del1 := c.AddDeleteFile(DeleteFile{TableID: tid, DataFileID: files[2], DeleteCount: 2, FileSize: 50, Path: "d1.parquet"})
	c.AddDeleteFile(DeleteFile{TableID: tid, DataFileID: files[3], DeleteCount: 1, FileSize: 40, Path: "d2.puffin", Format: "puffin"})
	must(c.Commit(ctx))
	c = l.Begin()
	c.EndDeleteFile(tid, del1)
	c.AddDeleteFile(DeleteFile{TableID: tid, DataFileID: files[2], DeleteCount: 3, FileSize: 60, Path: "d3.parquet"})
	must(c.Commit(ctx))
	addFiles(nil)
	// The verbs wrote what was asked: one ended and two live delete files,
	// one ended data file, one hard-deleted with its stats.
	v := l.Database().Current()
	var ended, live int
	for _, r := range rowsOf(t, v, "ducklake_delete_file") {
		if r[3].IsNull() {
			live++
		} else if r[3].Int() == l.Snapshot()-1 {
			ended++
		}
	}
	if ended != 1 || live != 2 {
		t.Fatalf("delete files: %d ended, %d live", ended, live)
	}
	for _, r := range rowsOf(t, v, "ducklake_file_column_stats") {
		if r[0].Int() == files[1] {
			t.Fatalf("stats of hard-deleted file %d remain", files[1])
		}
	}
	return l
}

func tableRows(t *testing.T, v *catalog.Version, schema string) map[string][]string {
	out := map[string][]string{}
	sc, _ := v.Schema(schema)
	for _, tb := range sc.Tables() {
		var rows []string
		tb.Scan(func(_ catalog.CTID, r datum.Row) bool {
			rows = append(rows, string(r))
			return true
		})
		sort.Strings(rows)
		out[tb.Name()] = rows
	}
	return out
}

func TestReloadEqualsMemory(t *testing.T) {
	l := buildLake(t)
	srv := catalog.NewServer(catalog.Options{})
	_ = srv
	var pairs [][2][]byte
	// The lake's server: reach it through the database.
	dbSrv := l.Database()
	_ = dbSrv
	s := serverOf(l)
	if err := s.Pairs(func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(pairs, func(i, j int) bool { return bytes.Compare(pairs[i][0], pairs[j][0]) < 0 })
	for i := 1; i < len(pairs); i++ {
		if bytes.Equal(pairs[i][0], pairs[i-1][0]) {
			t.Fatalf("duplicate key %x", pairs[i][0])
		}
	}
	re, err := catalog.Load(ctx, &catalog.SliceIterator{Pairs: pairs}, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db2, ok := re.Lookup("lake")
	if !ok {
		t.Fatal("database lost")
	}
	want := tableRows(t, l.Database().Current(), "public")
	got := tableRows(t, db2.Current(), "public")
	if len(want) != len(got) || len(want) < 29 {
		t.Fatalf("tables: %d vs %d", len(want), len(got))
	}
	for name, rows := range want {
		if fmt.Sprint(rows) != fmt.Sprint(got[name]) {
			t.Errorf("%s differs after reload: %d rows vs %d", name, len(rows), len(got[name]))
		}
	}
	if d := catalog.Diff(l.Database().Current(), db2.Current(), 10); d != nil {
		t.Fatalf("reloaded catalog differs: %v", d)
	}
	// The reload rebuilt the in-memory indexes, lookup indexes included.
	for _, v := range []*catalog.Version{l.Database().Current(), db2.Current()} {
		sc, _ := v.Schema("public")
		for _, tb := range sc.Tables() {
			if err := tb.CheckIndexes(); err != nil {
				t.Fatal(err)
			}
		}
		for name, n := range map[string]int{"ducklake_table_stats": 1, "ducklake_table": 1, "ducklake_column": 2} {
			tb, err := v.Table("public", name)
			if err != nil || tb.Len() == 0 || len(tb.LookupColumns()) != n {
				t.Fatalf("%s: %v, %d rows, lookup columns %v", name, err, tb.Len(), tb.LookupColumns())
			}
		}
	}
	// Diff sees a change: end one more data file in the reloaded copy.
	tx := db2.Begin()
	df, _ := tx.Table("public", "ducklake_data_file")
	var first catalog.CTID
	var vals []datum.Value
	df.Scan(func(c catalog.CTID, r datum.Row) bool {
		first = c
		vals, _ = r.Decode(df.Types(), nil)
		return false
	})
	vals[3] = datum.IntValue(99)
	if _, err := tx.UpdateRow("public", "ducklake_data_file", first, vals); err != nil {
		t.Fatal(err)
	}
	if d := catalog.Diff(l.Database().Current(), tx.View(), 10); len(d) != 1 || !strings.Contains(d[0], "ducklake_data_file") {
		t.Fatalf("Diff after a change: %v", d)
	}
	tx.Rollback()
	// Pairs of the reloaded server are the same set.
	var again [][2][]byte
	mustOK(t, re.Pairs(func(k, v []byte) error {
		again = append(again, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	}))
	sort.Slice(again, func(i, j int) bool { return bytes.Compare(again[i][0], again[j][0]) < 0 })
	if len(again) != len(pairs) {
		t.Fatalf("pairs %d vs %d", len(again), len(pairs))
	}
	for i := range pairs {
		if !bytes.Equal(pairs[i][0], again[i][0]) || !bytes.Equal(pairs[i][1], again[i][1]) {
			t.Fatalf("pair %d differs: %x", i, pairs[i][0])
		}
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func serverOf(l *Lake) *catalog.Server { return l.Database().Server() }

func TestChangesMade(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, "NULL"},
		{[]string{"inserted_into_table:3", "created_table:" + quoteIdent("main") + "." + quoteIdent(`we"ird,name`), "inserted_into_table:3", "created_schema:" + quoteIdent("s")},
			`created_schema:"s",created_table:"main"."we""ird,name",inserted_into_table:3`},
		{[]string{"altered_table:4", "deleted_from_table:4", "inserted_into_table:5", "inserted_into_table:4"},
			"inserted_into_table:5,inserted_into_table:4,deleted_from_table:4,altered_table:4"},
	} {
		got := changesMade(tc.in)
		s := "NULL"
		if !got.IsNull() {
			s = got.Text()
		}
		if s != tc.want {
			t.Errorf("changesMade(%q) = %s, want %s", tc.in, s, tc.want)
		}
	}
}
