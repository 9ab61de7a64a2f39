package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

func TestRegistryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		db, schema := genString(t, "db"), genString(t, "schema")
		id := rapid.Uint32Range(1, 1<<32-1).Draw(t, "id")
		k, v := RegistryKey(db, schema), EncodeRegistryValue(id)
		gdb, gschema, gid, err := DecodeRegistry(k, v)
		if err != nil || gdb != db || gschema != schema || gid != id {
			t.Fatalf("got %q %q %d %v", gdb, gschema, gid, err)
		}
		if !bytes.HasPrefix(k, RegistryPrefix()) || !bytes.HasPrefix(k, CatalogPrefix(StoreCatalogID)) {
			t.Fatalf("registry key %x outside the registry", k)
		}
		// (db, schema) pairs are unambiguous: another pair has another key.
		db2, schema2 := genString(t, "db2"), genString(t, "schema2")
		if (db2 != db || schema2 != schema) && bytes.Equal(RegistryKey(db2, schema2), k) {
			t.Fatalf("registry keys collide")
		}
	})
	if _, _, _, err := DecodeRegistry(RegistryKey("d", "s"), EncodeRegistryValue(0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("catalog id 0 accepted: %v", err)
	}
	if _, _, _, err := DecodeRegistry(HeadKey(1), EncodeRegistryValue(1)); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("head key decoded as registry: %v", err)
	}
	n, err := DecodeNextCatalogID(EncodeNextCatalogID(42))
	if err != nil || n != 42 {
		t.Errorf("next catalog id %d %v", n, err)
	}
	if _, err := DecodeNextCatalogID([]byte{9, 0, 0, 0, 1}); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("newer format: %v", err)
	}
}

func TestHeadRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := Head{
			FormatVersion: rapid.Uint32Range(0, FormatVersion).Draw(t, "fv"),
			Database:      genString(t, "db"),
			Schema:        genString(t, "schema"),
			HasSnapshot:   rapid.Bool().Draw(t, "has"),
			Commits:       rapid.Uint64().Draw(t, "commits"),
		}
		if h.HasSnapshot {
			h.Snapshot = genInt(t, "snap")
		}
		got, err := DecodeHead(EncodeHead(h))
		if err != nil || got != h {
			t.Fatalf("got %+v %v, want %+v", got, err, h)
		}
	})
	newer := EncodeHead(Head{FormatVersion: FormatVersion + 1})
	if _, err := DecodeHead(newer); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("newer keyspace format accepted: %v", err)
	}
	good := EncodeHead(Head{Database: "d", Schema: "s", HasSnapshot: true, Snapshot: 3})
	for i := 1; i < len(good); i++ {
		if _, err := DecodeHead(good[:i]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated head (%d bytes) = %v", i, err)
		}
	}
}

func TestTableDefRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var def TableDef
		switch rapid.IntRange(0, 2).Draw(t, "which") {
		case 0:
			defs, _ := FixedDefs(genString(t, "schema")+"x", rapid.SampledFrom([]string{Version10, Version11}).Draw(t, "v"))
			def = rapid.SampledFrom(defs).Draw(t, "def")
		case 1:
			var user []ColumnDef
			for i, n := 0, rapid.IntRange(0, 6).Draw(t, "n"); i < n; i++ {
				user = append(user, ColumnDef{Name: fmt.Sprintf("u%d_%s", i, genString(t, "name")), Type: rapid.SampledFrom(inlinableTypes).Draw(t, "type")})
			}
			def = InlinedDataDef("public", Version11, rapid.Int64Range(0, 1e9).Draw(t, "t"), rapid.Int64Range(0, 1e9).Draw(t, "v"), user)
		default:
			def = InlinedDeleteDef("public", rapid.Int64Range(0, 1e9).Draw(t, "t"))
		}
		if err := ValidateDef(&def); err != nil {
			t.Fatal(err)
		}
		cat := rapid.Uint32().Draw(t, "cat")
		gotCat, got, err := DecodeTableDef(TableDefKey(cat, def.Name), EncodeTableDef(&def))
		if err != nil {
			t.Fatal(err)
		}
		if gotCat != cat || !reflect.DeepEqual(normDef(got), normDef(def)) {
			t.Fatalf("got %d %s, want %d %s", gotCat, got.String(), cat, def.String())
		}
	})
}

func normDef(d TableDef) TableDef {
	if len(d.PrimaryKey) == 0 {
		d.PrimaryKey = nil
	}
	if len(d.Columns) == 0 {
		d.Columns = nil
	}
	return d
}

func TestTableDefRefuses(t *testing.T) {
	defs, _ := FixedDefs("public", Version11)
	def := defs[0]
	v := EncodeTableDef(&def)
	if _, _, err := DecodeTableDef(TableDefKey(1, "ducklake_snapshot"), v); !errors.Is(err, ErrCorrupt) {
		t.Errorf("definition under another table's key: %v", err)
	}
	bad := def.Clone()
	bad.Columns[0].Type = datum.Int4
	if _, _, err := DecodeTableDef(TableDefKey(1, bad.Name), EncodeTableDef(&bad)); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("stored shape DuckLake does not create: %v", err)
	}
	for i := 1; i < len(v); i++ {
		if _, _, err := DecodeTableDef(TableDefKey(1, def.Name), v[:i]); err == nil {
			t.Errorf("truncated definition (%d bytes) decoded", i)
		}
	}
	huge := []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if _, _, err := DecodeTableDef(TableDefKey(1, ""), huge); !errors.Is(err, ErrCorrupt) {
		t.Errorf("huge column count: %v", err)
	}
}

func TestRanges(t *testing.T) {
	if _, err := SubspacePrefix(1, KindSnapshot, SubCurrent); err == nil {
		t.Error("snapshot kind has subspaces?")
	}
	if _, err := TablePrefix(1, KindSnapshot, SubNone, 3); err == nil {
		t.Error("snapshot kind keyed by table_id?")
	}
	if _, err := TablePrefix(1, KindDataFile, SubNone, 3); err == nil {
		t.Error("versioned kind without a subspace accepted")
	}
	if _, err := TablePrefix(1, KindFileColumnStats, SubCurrent, 3); err == nil {
		t.Error("unversioned kind with a subspace accepted")
	}
	// Catalog metadata sorts before rows, and catalogs do not interleave.
	if !(bytes.Compare(HeadKey(5), TableDefKey(5, "a")) < 0 &&
		bytes.Compare(TableDefKey(5, "zzz"), KindPrefix(5, KindSnapshot)) < 0 &&
		bytes.Compare(PrefixEnd(CatalogPrefix(5)), CatalogPrefix(6)) <= 0 &&
		bytes.Compare(RegistryKey("\xff", "\xff"), CatalogPrefix(1)) < 0) {
		t.Error("catalog layout out of order")
	}
	for k := range kindNames {
		if !k.IsRowKind() {
			continue
		}
		if k.Versioned() != (k == KindSchema || k == KindTable || k == KindView || k == KindTag ||
			k == KindColumnTag || k == KindViewColumnTag || k == KindColumn || k == KindDataFile ||
			k == KindDeleteFile || k == KindPartition || k == KindSort || k == KindInlinedRow || k == KindMacro) {
			t.Errorf("kind %v versioned = %v", k, k.Versioned())
		}
	}
}

func TestFormatKey(t *testing.T) {
	file := mustTable(t, "ducklake_data_file")
	tab := mustTable(t, "ducklake_table")
	gc := mustTable(t, "ducklake_files_scheduled_for_deletion")
	inl, _ := NewTable(InlinedDataDef("public", Version11, 3, 2, nil))
	key := func(tbl *Table, vals ...datum.Value) []byte {
		k, err := tbl.Key(1, encodeVals(tbl, vals...))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{RegistryKey("lake", "public"), `0 registry database="lake" schema="public"`},
		{HeadKey(2), `2 meta name="head"`},
		{TableDefKey(2, "ducklake_tag"), `2 tabledef name="ducklake_tag"`},
		{key(file, ints(10, 3, 5, nil)...), `1 file/current table_id=3 data_file_id=10`},
		{key(tab, ints(4, nil, 2, 6)...), `1 table/history table_id=4 begin_snapshot=2 end_snapshot=6`},
		{key(gc, ints(7, "a\x00b", true)...), `1 gcfile data_file_id=7 path="a\x00b" path_is_relative=1 schedule_start=NULL`},
		{key(inl, ints(9, 4, nil)...), `1 inlrow/current table_id=3 schema_version=2 row_id=9 begin_snapshot=4`},
		{[]byte{0, 0, 0, 1, 0x1a, 9}, `1 file/sub(9) !"" (keyspace: corrupt key or value: key: truncated byte)`},
		{[]byte{0, 0}, `!0000`},
	} {
		if got := FormatKey(c.key); got != c.want {
			t.Errorf("FormatKey(%x) = %s, want %s", c.key, got, c.want)
		}
	}
	if got := FormatKey(append(key(file, ints(10, 3, 5, nil)...)[:10], 0xee)); !strings.Contains(got, "!") {
		t.Errorf("truncated key rendered without a mark: %s", got)
	}
}
