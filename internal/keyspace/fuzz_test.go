package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
)

// fuzzTables is the catalog the fuzz target decodes against: the fixed
// tables at 1.1 plus one inlined data table, so that every kind's decoder is
// reachable.
var fuzzTables = func() map[string]*Table {
	m := map[string]*Table{}
	defs, _ := FixedDefs("public", Version11)
	defs = append(defs, InlinedDataDef("public", Version11, 1, 2, []ColumnDef{
		{Name: "id", Type: datum.Int8}, {Name: "s", Type: datum.Bytea}, {Name: "n", Type: datum.NumericType(10, 2)},
		{Name: "u", Type: datum.UUID}, {Name: "f", Type: datum.Float8}, {Name: "iv", Type: datum.Interval},
	}))
	for _, d := range defs {
		t, err := NewTable(d)
		if err != nil {
			panic(err)
		}
		m[d.Name] = t
	}
	return m
}()

func fuzzLookup(_ uint32, name string) (*Table, bool) {
	t, ok := fuzzTables[name]
	return t, ok
}

// fuzzSeeds are valid records of several kinds.
func fuzzSeeds() [][2][]byte {
	var out [][2][]byte
	add := func(name string, children []datum.Row, vals ...datum.Value) {
		t := fuzzTables[name]
		k, v, err := t.Encode(1, datum.EncodeRow(nil, t.Types()[:len(vals)], vals), children)
		if err != nil {
			panic(err)
		}
		out = append(out, [2][]byte{k, v})
	}
	fpv, _ := StaticTable("ducklake_file_partition_value")
	add("ducklake_data_file", []datum.Row{datum.EncodeRow(nil, fpv.Types(), ints(10, 3, 0, "2024"))}, ints(10, 3, 5, 9, nil, "f.parquet", true, "parquet", 10, 100)...)
	add("ducklake_snapshot", nil, ints(1, nil, 0, 1, 0)...)
	add("ducklake_metadata", nil, ints("version", "1.1-dev1", nil, nil)...)
	add("ducklake_tag", nil, ints(3, 1, nil, "comment", "it's")...)
	add("ducklake_inlined_data_1_2", nil, datum.IntValue(0), datum.IntValue(4), datum.Null, datum.IntValue(-5), datum.BytesValue([]byte{0, 1}), datum.NumericValue("1.50"))
	sexpr, _ := StaticTable("ducklake_sort_expression")
	add("ducklake_sort_info", []datum.Row{datum.EncodeRow(nil, sexpr.Types(), ints(8, 3, 0, `"a" DESC`, "duckdb", "DESC", "NULLS_LAST"))}, ints(8, 3, 2, nil)...)
	return out
}

// FuzzDecodeKV: DecodeKV parses bytes from storage. Whatever the bytes, it
// returns an error or an entity; never panics; and an entity it returns
// re-encodes to exactly the same key and value (so nothing is guessed).
func FuzzDecodeKV(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_ = FormatKey(key) // must not panic on any bytes
		hc, hk, hs, herr := ParseKeyHeader(key)
		e, err := DecodeKV(key, value, fuzzLookup)
		if err == nil && (herr != nil || hc != e.CatalogID || hk != e.Kind || hs != e.Sub) {
			t.Fatalf("ParseKeyHeader = %d %v %v %v, DecodeKV %d %v %v", hc, hk, hs, herr, e.CatalogID, e.Kind, e.Sub)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownShape) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnknownShape", err)
			}
			return
		}
		tbl := fuzzTables[e.Table]
		if tbl == nil {
			t.Fatalf("decoded unknown table %q", e.Table)
		}
		k, v, err := tbl.Encode(e.CatalogID, e.Row, e.Children)
		if err != nil {
			t.Fatalf("decoded entity does not re-encode: %v", err)
		}
		if !bytes.Equal(k, key) || !bytes.Equal(v, value) {
			t.Fatalf("re-encoding differs:\nkey %x\n    %x\nvalue %x\n      %x", key, k, value, v)
		}
	})
}

// FuzzDecodeMeta covers the catalog's own records.
func FuzzDecodeMeta(f *testing.F) {
	defs, _ := FixedDefs("public", Version11)
	f.Add(TableDefKey(1, defs[8].Name), EncodeTableDef(&defs[8]))
	f.Add(RegistryKey("lake", "public"), EncodeRegistryValue(3))
	f.Add(HeadKey(1), EncodeHead(Head{FormatVersion: 1, Database: "d", Schema: "s", HasSnapshot: true, Snapshot: 7, Commits: 9}))
	f.Add(BranchKey("dev"), EncodeBranch(Branch{Parent: "lake", Catalogs: []BranchCatalog{{Schema: "public", ID: 2, Snapshot: 4, HasSnapshot: true}, {Schema: "m", ID: 5}}}))
	f.Add(BranchKey("old"), EncodeBranch(Branch{Parent: "lake", HasAt: true, At: 3, Base: 41, Catalogs: []BranchCatalog{{Schema: "public", ID: 2, Snapshot: 3, HasSnapshot: true, NextFileID: 7}}}))
	f.Add(BranchKey("w"), EncodeBranch(Branch{Parent: "lake", Catalogs: []BranchCatalog{{Schema: "public", ID: 2, Snapshot: 4, HasSnapshot: true, OwnID: 9, NextFileID: 17, DataPath: "s3://b/lake/"}}}))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if name, b, err := DecodeBranch(key, value); err == nil {
			if !bytes.Equal(BranchKey(name), key) || !bytes.Equal(EncodeBranch(b), value) {
				t.Fatalf("branch record does not re-encode")
			}
		}
		if _, def, err := DecodeTableDef(key, value); err == nil {
			if !bytes.Equal(EncodeTableDef(&def), value) {
				t.Fatalf("table definition does not re-encode")
			}
		}
		if db, s, id, err := DecodeRegistry(key, value); err == nil {
			if !bytes.Equal(RegistryKey(db, s), key) || !bytes.Equal(EncodeRegistryValue(id), value) {
				t.Fatalf("registry record does not re-encode")
			}
		}
		if h, err := DecodeHead(value); err == nil {
			if !bytes.Equal(EncodeHead(h), value) {
				t.Fatalf("head does not re-encode")
			}
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzDecodeKV from fuzzSeeds
// when MORAINE_WRITE_CORPUS=1; otherwise it checks that the committed corpus
// still holds valid seeds.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeKV")
	if os.Getenv("MORAINE_WRITE_CORPUS") == "1" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range fuzzSeeds() {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n", s[0], s[1])
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < len(fuzzSeeds()) {
		t.Fatalf("%d corpus files, want at least %d", len(ents), len(fuzzSeeds()))
	}
	for _, s := range fuzzSeeds() {
		if _, err := DecodeKV(s[0], s[1], fuzzLookup); err != nil {
			t.Errorf("seed does not decode: %v", err)
		}
	}
}
