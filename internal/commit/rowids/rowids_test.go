package rowids_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/objstore"
)

// Rows as DuckDB writes them: user columns, then the embedded row id as an
// OPTIONAL BIGINT with field id 2147483540 (and, for merges, the snapshot
// id with field id 2147483539).
type embeddedRow struct {
	V     int64  `parquet:"v"`
	RowID *int64 `parquet:"_ducklake_internal_row_id,optional,id(2147483540)"`
	Snap  *int64 `parquet:"_ducklake_internal_snapshot_id,optional,id(2147483539)"`
}

// The same column written REQUIRED (another writer's choice).
type requiredRow struct {
	V     int64 `parquet:"v"`
	RowID int64 `parquet:"_ducklake_internal_row_id,id(2147483540)"`
}

// A plain insert's file: no row-id column.
type plainRow struct {
	V int64  `parquet:"v"`
	S string `parquet:"s"`
}

// A column named like the row id but without the field id: not the row id.
type impostorRow struct {
	V     int64 `parquet:"v"`
	RowID int64 `parquet:"_ducklake_internal_row_id"`
}

type deleteRow struct {
	FilePath string `parquet:"file_path"`
	Pos      int64  `parquet:"pos"`
}

func writeParquet[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows, parquet.MaxRowsPerRowGroup(4)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func embedded(ids ...int64) []embeddedRow {
	rows := make([]embeddedRow, len(ids))
	for i, id := range ids {
		id, snap := id, int64(3)
		rows[i] = embeddedRow{V: id * 10, RowID: &id, Snap: &snap}
	}
	return rows
}

func plain(n int) []plainRow {
	rows := make([]plainRow, n)
	for i := range rows {
		rows[i] = plainRow{V: int64(i), S: "x"}
	}
	return rows
}

func rng(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

type lake struct {
	t   *testing.T
	dir string
}

func newLake(t *testing.T) *lake { return &lake{t: t, dir: t.TempDir()} }

func (l *lake) embedded(name string, ids ...int64) rowids.File {
	p := filepath.Join(l.dir, name)
	writeParquet(l.t, p, embedded(ids...))
	return rowids.File{Path: p, RecordCount: int64(len(ids))}
}

// embeddedWithStart is a flush output: ids embedded, row_id_start = min id.
func (l *lake) embeddedWithStart(name string, ids ...int64) rowids.File {
	f := l.embedded(name, ids...)
	f.RowIDStart, f.HasRowIDStart = ids[0], true
	return f
}

func (l *lake) required(name string, ids ...int64) rowids.File {
	p := filepath.Join(l.dir, name)
	rows := make([]requiredRow, len(ids))
	for i, id := range ids {
		rows[i] = requiredRow{V: id, RowID: id}
	}
	writeParquet(l.t, p, rows)
	return rowids.File{Path: p, RecordCount: int64(len(ids))}
}

func (l *lake) plain(name string, start int64, n int) rowids.File {
	p := filepath.Join(l.dir, name)
	writeParquet(l.t, p, plain(n))
	return rowids.File{Path: p, RowIDStart: start, HasRowIDStart: true, RecordCount: int64(n)}
}

func (l *lake) deletes(name, dataPath string, positions ...int64) string {
	p := filepath.Join(l.dir, name)
	rows := make([]deleteRow, len(positions))
	for i, pos := range positions {
		rows[i] = deleteRow{FilePath: dataPath, Pos: pos}
	}
	writeParquet(l.t, p, rows)
	return p
}

func TestHold(t *testing.T) {
	l := newLake(t)
	// A dense predecessor [0,10) and a flush output whose batch straddled two
	// partitions: it holds {10,12,14}, row_id_start 10. DuckLake's adjacency
	// test (0+10 == 10) chains them.
	dense := l.plain("dense.parquet", 0, 10)
	sparse := l.embeddedWithStart("sparse.parquet", 10, 12, 14)
	// The old merge numbers the output by position: ids [0,13).
	renumbered := l.plain("renumbered.parquet", 0, 13)
	// The bundled DuckLake's merge carries the ids.
	carried := l.embedded("carried.parquet", append(rng(0, 10), 10, 12, 14)...)
	carriedRequired := l.required("carried-req.parquet", append(rng(0, 10), 14, 12, 10)...)
	dropped := l.embedded("dropped.parquet", rng(0, 10)...)
	doubled := l.embedded("doubled.parquet", append(rng(0, 10), 10, 12, 14, 14)...)
	// Two adjacent plain files merged into one plain file: no decoding at all.
	p1, p2 := l.plain("p1.parquet", 100, 5), l.plain("p2.parquet", 105, 7)
	pMerged := l.plain("pmerged.parquet", 100, 12)
	pMergedEmb := l.embedded("pmerged-emb.parquet", rng(100, 112)...)
	// A rewrite source with ids [200,210) and a delete file removing
	// positions 2 and 5 (ids 202 and 205).
	src := l.plain("src.parquet", 200, 10)
	src.Deletes = []rowids.DeleteFile{{Path: l.deletes("src-delete.parquet", src.Path, 2, 5)}}
	survivors := l.embedded("survivors.parquet", 200, 201, 203, 204, 206, 207, 208, 209)
	fewer := l.embedded("fewer.parquet", 200, 209)
	foreign := l.embedded("foreign.parquet", 200, 201, 999)
	resurrected := l.embedded("resurrected.parquet", 200, 201, 202)
	// An embedded source: positions map through its embedded ids.
	srcEmb := l.embedded("src-emb.parquet", 50, 52, 54, 56)
	srcEmb.Deletes = []rowids.DeleteFile{{Path: l.deletes("src-emb-delete.parquet", srcEmb.Path, 1)}}
	embSurvivors := l.embedded("emb-survivors.parquet", 50, 54, 56)
	embResurrected := l.embedded("emb-resurrected.parquet", 50, 52)
	impostorPath := filepath.Join(l.dir, "impostor.parquet")
	writeParquet(t, impostorPath, []impostorRow{{1, 500}, {2, 501}})
	impostor := rowids.File{Path: impostorPath, RowIDStart: 0, HasRowIDStart: true, RecordCount: 2}

	tests := []struct {
		name     string
		c        rowids.Compaction
		file     string // offending file, "" when the hold passes
		id       int64
		contains string
	}{
		{"merge numbering a sparse source by position is refused",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{dense, sparse}, Outputs: []rowids.File{renumbered}},
			renumbered.Path, 11, "not held by any source"},
		{"merge carrying its sources' ids passes",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{dense, sparse}, Outputs: []rowids.File{carried}}, "", 0, ""},
		{"merge carrying ids in a REQUIRED column, any order, passes",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{dense, sparse}, Outputs: []rowids.File{carriedRequired}}, "", 0, ""},
		{"merge losing rows is refused, naming the source",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{dense, sparse}, Outputs: []rowids.File{dropped}},
			sparse.Path, 10, "missing from the merged output"},
		{"merge duplicating a row is refused",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{dense, sparse}, Outputs: []rowids.File{doubled}},
			doubled.Path, 14, "held 2 times"},
		{"merge of adjacent plain files into a plain file passes",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{p1, p2}, Outputs: []rowids.File{pMerged}}, "", 0, ""},
		{"merge of plain files into an embedded file passes",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{p1, p2}, Outputs: []rowids.File{pMergedEmb}}, "", 0, ""},
		{"merge with an output split in two passes",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{p1, p2}, Outputs: []rowids.File{l.plain("a.parquet", 100, 5), l.embedded("b.parquet", rng(105, 112)...)}}, "", 0, ""},
		{"rewrite dropping the deleted rows passes",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src}, Outputs: []rowids.File{survivors}}, "", 0, ""},
		{"rewrite dropping more rows passes",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src}, Outputs: []rowids.File{fewer}}, "", 0, ""},
		{"rewrite naming an id its source lacked is refused",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src}, Outputs: []rowids.File{foreign}},
			foreign.Path, 999, "not held by any source"},
		{"rewrite resurrecting a deleted row is refused",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src}, Outputs: []rowids.File{resurrected}},
			resurrected.Path, 202, "deleted by the source's delete file"},
		{"rewrite of an embedded source maps delete positions through its ids",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{srcEmb}, Outputs: []rowids.File{embSurvivors}}, "", 0, ""},
		{"rewrite of an embedded source refuses the deleted id",
			rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{srcEmb}, Outputs: []rowids.File{embResurrected}},
			embResurrected.Path, 52, "deleted"},
		{"a column without the field id is not the row id",
			rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{l.plain("i-src.parquet", 0, 2)}, Outputs: []rowids.File{impostor}}, "", 0, ""},
	}
	ch := &rowids.Checker{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ch.Check(context.Background(), tc.c)
			if tc.file == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var m *rowids.MismatchError
			if !errors.As(err, &m) || !errors.Is(err, rowids.ErrCorrupt) {
				t.Fatalf("Check = %v, want a *MismatchError", err)
			}
			if m.File != tc.file || m.RowID != tc.id || !strings.Contains(m.Error(), tc.contains) {
				t.Fatalf("Check = %v; want file %s, id %d, %q", err, tc.file, tc.id, tc.contains)
			}
		})
	}
}

func TestInvalidFiles(t *testing.T) {
	l := newLake(t)
	good := l.plain("good.parquet", 0, 3)
	countMismatch := l.plain("count.parquet", 0, 3)
	countMismatch.RecordCount = 4
	noStart := l.plain("nostart.parquet", 0, 3)
	noStart.HasRowIDStart = false
	garbage := filepath.Join(l.dir, "garbage.parquet")
	if err := os.WriteFile(garbage, []byte("not parquet at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	nullIDs := filepath.Join(l.dir, "null.parquet")
	one := int64(1)
	writeParquet(t, nullIDs, []embeddedRow{{V: 1, RowID: &one}, {V: 2}})
	for name, f := range map[string]rowids.File{
		"record count":     countMismatch,
		"no row_id_start":  noStart,
		"not parquet":      {Path: garbage, RecordCount: 1},
		"NULL embedded id": {Path: nullIDs, RecordCount: 2},
		"missing file":     {Path: filepath.Join(l.dir, "absent.parquet"), RecordCount: 1},
	} {
		err := (&rowids.Checker{}).Check(context.Background(), rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{good}, Outputs: []rowids.File{f}})
		if err == nil || errors.Is(err, rowids.ErrCorrupt) {
			t.Errorf("%s: Check = %v, want a read error that is not a corruption verdict", name, err)
		}
	}
}

func TestStoreOpener(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	put := func(key string, data []byte) string {
		if err := store.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		return "s3://lake/" + key
	}
	var a, b bytes.Buffer
	if err := parquet.Write(&a, plain(6)); err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(&b, embedded(rng(0, 6)...)); err != nil {
		t.Fatal(err)
	}
	src := rowids.File{Path: put("main/t/a.parquet", a.Bytes()), RowIDStart: 0, HasRowIDStart: true, RecordCount: 6}
	out := rowids.File{Path: put("main/t/b.parquet", b.Bytes()), RecordCount: 6}
	ch := &rowids.Checker{Open: rowids.StoreOpener{Store: store, Prefix: "s3://lake/"}}
	if err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{src}, Outputs: []rowids.File{out}}); err != nil {
		t.Fatal(err)
	}
	out.Path = put("main/t/c.parquet", b.Bytes())
	src.RowIDStart = 1
	if err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{src}, Outputs: []rowids.File{out}}); !errors.Is(err, rowids.ErrCorrupt) {
		t.Fatalf("Check = %v, want ErrCorrupt", err)
	}
}

// TestHoldModel compares the checker with a map-based multiset model on
// random merges and rewrites of small embedded files.
func TestHoldModel(t *testing.T) {
	dir := t.TempDir()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		write := func(ids []int64) rowids.File {
			n++
			p := filepath.Join(dir, "f"+strconv.Itoa(n)+".parquet")
			writeParquet(t, p, embedded(ids...))
			return rowids.File{Path: p, RecordCount: int64(len(ids))}
		}
		idGen := rapid.SliceOfN(rapid.Int64Range(0, 30), 1, 12)
		kind := rapid.SampledFrom([]rowids.Kind{rowids.Merge, rowids.Rewrite}).Draw(rt, "kind")
		srcIDs := idGen.Draw(rt, "src")
		outIDs := idGen.Draw(rt, "out")
		if rapid.Bool().Draw(rt, "derive") {
			// Often the output is a permutation or a subset of the source.
			outIDs = rapid.Permutation(srcIDs).Draw(rt, "perm")
			if kind == rowids.Rewrite {
				outIDs = outIDs[:rapid.IntRange(1, len(outIDs)).Draw(rt, "keep")]
			}
		}
		c := rowids.Compaction{Kind: kind, Sources: []rowids.File{write(srcIDs)}, Outputs: []rowids.File{write(outIDs)}}
		err := (&rowids.Checker{}).Check(context.Background(), c)
		count := map[int64]int{}
		for _, id := range srcIDs {
			count[id]++
		}
		for _, id := range outIDs {
			count[id]--
		}
		want := true
		for _, v := range count {
			if v < 0 || (kind == rowids.Merge && v != 0) {
				want = false
			}
		}
		if got := err == nil; got != want {
			rt.Fatalf("%v src %v out %v: Check = %v, model says ok=%v", kind, srcIDs, outIDs, err, want)
		}
		if err != nil && !errors.Is(err, rowids.ErrCorrupt) {
			rt.Fatalf("unexpected error %v", err)
		}
	})
}
