package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// parentSpecs are the fixed tables that own keys (every fixed table except
// the three embedded ones).
func parentSpecs() []*TableSpec {
	var out []*TableSpec
	for _, s := range fixedOrder {
		if !s.Embedded() {
			out = append(out, s)
		}
	}
	return out
}

// drawFixedEntity draws a table at a column set it may have (1.0 or newer),
// a row and, for parent kinds, children belonging to it.
func drawFixedEntity(t *rapid.T) (*Table, datum.Row, []datum.Row) {
	spec := rapid.SampledFrom(parentSpecs()).Draw(t, "table")
	n := rapid.IntRange(spec.MinColumns, len(spec.Columns)).Draw(t, "ncols")
	tbl, err := NewTable(TableDef{Schema: "public", Name: spec.Name, Columns: spec.Columns[:n], PrimaryKey: spec.PrimaryKey})
	if err != nil {
		t.Fatal(err)
	}
	vals := genRow(t, tbl.Def.Columns, "row")
	// A stored row may be shorter than its table: written before a
	// migration appended columns.
	stored := rapid.IntRange(0, len(vals)).Draw(t, "stored")
	if stored < spec.MinColumns {
		stored = len(vals)
	}
	row := datum.Row(datum.EncodeRow(nil, tbl.Types()[:stored], vals[:stored]))
	var children []datum.Row
	if ct := tbl.ChildTable(); ct != nil {
		nc := rapid.IntRange(0, 4).Draw(t, "nchildren")
		for i := 0; i < nc; i++ {
			cv := genRow(t, ct.Def.Columns, fmt.Sprintf("child%d", i))
			for _, l := range ct.Spec.ParentLink {
				if l[1] < stored {
					cv[l[0]] = vals[l[1]]
				} else {
					cv[l[0]] = datum.Null
				}
			}
			children = append(children, datum.EncodeRow(nil, ct.Types(), cv))
		}
	}
	return tbl, row, children
}

// TestEntityRoundTrip: every row of every fixed kind, with its embedded
// children, decodes byte-for-byte to what was encoded, under its own key.
func TestEntityRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tbl, row, children := drawFixedEntity(t)
		cat := rapid.Uint32Range(1, 1<<32-1).Draw(t, "catalog")
		key, value, err := tbl.Encode(cat, row, children)
		if err != nil {
			t.Fatalf("encode %s: %v", tbl.Def.Name, err)
		}
		lookup := func(c uint32, name string) (*Table, bool) {
			if c != cat || name != tbl.Def.Name {
				t.Fatalf("lookup(%d, %s)", c, name)
			}
			return tbl, true
		}
		for _, defs := range []DefLookup{nil, lookup} {
			e, err := DecodeKV(key, value, defs)
			if err != nil {
				t.Fatalf("decode %s: %v", tbl.Def.Name, err)
			}
			checkEntity(t, e, cat, tbl, row, children)
		}
		// The key begins with the catalog, kind and (for per-table kinds)
		// table prefixes.
		if !bytes.HasPrefix(key, KindPrefix(cat, tbl.Spec.Kind)) {
			t.Fatalf("key %x lacks its kind prefix", key)
		}
		sub, err := tbl.Subspace(row)
		if err != nil {
			t.Fatal(err)
		}
		hc, hk, hs, err := ParseKeyHeader(key)
		if err != nil || hc != cat || hk != tbl.Spec.Kind || hs != sub {
			t.Fatalf("ParseKeyHeader = %d %v %v %v, want %d %v %v", hc, hk, hs, err, cat, tbl.Spec.Kind, sub)
		}
		if tbl.Spec.Kind.TableFirst() {
			tid, _ := row.Column(tbl.Types(), tbl.Def.ColumnIndex("table_id"))
			if !tid.IsNull() {
				p, err := TablePrefix(cat, tbl.Spec.Kind, sub, tid.I)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(key, p) || bytes.Compare(key, PrefixEnd(p)) >= 0 {
					t.Fatalf("key %x not in its table range %x", key, p)
				}
			}
		}
	})
}

func checkEntity(t *rapid.T, e Entity, cat uint32, tbl *Table, row datum.Row, children []datum.Row) {
	t.Helper()
	if e.CatalogID != cat || e.Kind != tbl.Spec.Kind || e.Table != tbl.Def.Name {
		t.Fatalf("decoded catalog %d kind %v table %s, want %d %v %s", e.CatalogID, e.Kind, e.Table, cat, tbl.Spec.Kind, tbl.Def.Name)
	}
	if !bytes.Equal(e.Row, row) {
		t.Fatalf("%s row: got %x want %x", tbl.Def.Name, []byte(e.Row), []byte(row))
	}
	if len(e.Children) != len(children) {
		t.Fatalf("%s: %d children, want %d", tbl.Def.Name, len(e.Children), len(children))
	}
	for i := range children {
		if !bytes.Equal(e.Children[i], children[i]) {
			t.Fatalf("%s child %d differs", tbl.Def.Name, i)
		}
	}
	if tbl.child != nil && e.ChildTable != tbl.child.Def.Name {
		t.Fatalf("child table %q", e.ChildTable)
	}
}

// TestInlinedRoundTrip: rows of dynamic inlined data tables with any column
// types datum supports, and inlined deletes, round-trip.
func TestInlinedRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tid := rapid.Int64Range(0, 1<<40).Draw(t, "tid")
		var tbl *Table
		var err error
		if rapid.Bool().Draw(t, "delete") {
			tbl, err = NewTable(InlinedDeleteDef("lake", tid))
		} else {
			sv := rapid.Int64Range(0, 1<<40).Draw(t, "sv")
			version := rapid.SampledFrom([]string{Version10, Version11}).Draw(t, "version")
			var user []ColumnDef
			for i, n := 0, rapid.IntRange(0, 8).Draw(t, "nuser"); i < n; i++ {
				user = append(user, ColumnDef{Name: fmt.Sprintf("c%d", i), Type: rapid.SampledFrom(inlinableTypes).Draw(t, "type")})
			}
			tbl, err = NewTable(InlinedDataDef("lake", version, tid, sv, user))
		}
		if err != nil {
			t.Fatal(err)
		}
		row := datum.Row(datum.EncodeRow(nil, tbl.Types(), genRow(t, tbl.Def.Columns, "row")))
		key, value, err := tbl.Encode(7, row, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := DecodeKV(key, value, func(c uint32, name string) (*Table, bool) {
			if name != tbl.Def.Name {
				return nil, false
			}
			return tbl, true
		})
		if err != nil {
			t.Fatalf("decode %s: %v", tbl.Def.Name, err)
		}
		checkEntity(t, e, 7, tbl, row, nil)
		p, _ := TablePrefix(7, tbl.Spec.Kind, e.Sub, tid)
		if !bytes.HasPrefix(key, p) {
			t.Fatalf("key outside its table range")
		}
		if tbl.Spec.Kind == KindInlinedRow {
			p, _ := InlinedDataPrefixKey(7, e.Sub, tid, tbl.Spec.SchemaVersion)
			if !bytes.HasPrefix(key, p) {
				t.Fatalf("key outside its inlined table range")
			}
			// Without the catalog's definition the row cannot be typed.
			if _, err := DecodeKV(key, value, nil); !errors.Is(err, ErrUnknownShape) {
				t.Fatalf("decode without definition: %v", err)
			}
		}
	})
}

func mustTable(t testing.TB, name string) *Table {
	tbl, ok := StaticTable(name)
	if !ok {
		t.Fatalf("no table %s", name)
	}
	return tbl
}

func encodeVals(tbl *Table, vals ...datum.Value) datum.Row {
	return datum.EncodeRow(nil, tbl.Types()[:len(vals)], vals)
}

func ints(xs ...any) []datum.Value {
	out := make([]datum.Value, len(xs))
	for i, x := range xs {
		switch x := x.(type) {
		case nil:
			out[i] = datum.Null
		case int:
			out[i] = datum.IntValue(int64(x))
		case string:
			out[i] = datum.TextValue(x)
		case bool:
			out[i] = datum.BoolValue(x)
		}
	}
	return out
}

// TestHistoryMove: ending a row moves it from its current key to a history
// key that also carries end_snapshot; a begin_snapshot rebase of a keyed
// (primary key) data file keeps its key.
func TestHistoryMove(t *testing.T) {
	file := mustTable(t, "ducklake_data_file")
	live := ints(10, 3, 5, nil, nil, "a.parquet", true, "parquet", 100, 2000, 300, 0, nil, nil, nil, nil, 1)
	ended := append([]datum.Value(nil), live...)
	ended[3] = datum.IntValue(9)
	rebased := append([]datum.Value(nil), live...)
	rebased[2] = datum.IntValue(7)
	kLive, _ := file.Key(1, encodeVals(file, live...))
	kEnded, _ := file.Key(1, encodeVals(file, ended...))
	kRebased, _ := file.Key(1, encodeVals(file, rebased...))
	cur, _ := TablePrefix(1, KindDataFile, SubCurrent, 3)
	hist, _ := TablePrefix(1, KindDataFile, SubHistory, 3)
	if !bytes.HasPrefix(kLive, cur) || !bytes.HasPrefix(kEnded, hist) {
		t.Fatalf("live %x ended %x", kLive, kEnded)
	}
	if !bytes.Equal(kLive, kRebased) {
		t.Errorf("begin_snapshot rebase changed a data file's key")
	}
	if want := AppendInt(AppendInt(hist, 10), 9); !bytes.Equal(kEnded, want) {
		t.Errorf("history key %x, want %x", kEnded, want)
	}

	// A renamed table: two rows of table_id 4 with different begins have
	// distinct current keys (both may be current within one commit), and
	// the ended one carries its end.
	tab := mustTable(t, "ducklake_table")
	uuid := datum.UUIDValue([16]byte{1})
	r1 := []datum.Value{datum.IntValue(4), uuid, datum.IntValue(2), datum.Null, datum.IntValue(0), datum.TextValue("a"), datum.TextValue("a/"), datum.BoolValue(true)}
	r2 := append([]datum.Value(nil), r1...)
	r2[2], r2[5] = datum.IntValue(6), datum.TextValue("b")
	k1, _ := tab.Key(1, encodeVals(tab, r1...))
	k2, _ := tab.Key(1, encodeVals(tab, r2...))
	if bytes.Equal(k1, k2) || bytes.Compare(k1, k2) >= 0 {
		t.Errorf("renamed table rows: %x vs %x", k1, k2)
	}
	r1[3] = datum.IntValue(6)
	k1e, _ := tab.Key(1, encodeVals(tab, r1...))
	hist, _ = TablePrefix(1, KindTable, SubHistory, 4)
	if !bytes.HasPrefix(k1e, hist) {
		t.Errorf("ended table row not under history")
	}
}

// TestEncodeRefuses: shapes the codec must not store.
func TestEncodeRefuses(t *testing.T) {
	file := mustTable(t, "ducklake_data_file")
	part := mustTable(t, "ducklake_partition_info")
	pcol := part.ChildTable()
	row := encodeVals(file, ints(10, 3, 5, nil)...)
	fpv, _ := StaticTable("ducklake_file_partition_value")
	good := encodeVals(fpv, ints(10, 3, 0, "2024")...)
	wrongFile := encodeVals(fpv, ints(11, 3, 0, "2024")...)
	wrongTable := encodeVals(fpv, ints(10, 4, 0, "2024")...)
	snap := mustTable(t, "ducklake_snapshot")
	tooLong := datum.EncodeRow(nil, append(snap.Types(), datum.Int8), ints(1, nil, 0, 1, 0, 7))
	cases := []struct {
		name     string
		tbl      *Table
		row      datum.Row
		children []datum.Row
		mention  string
	}{
		{"child of another file", file, row, []datum.Row{good, wrongFile}, "data_file_id"},
		{"child of another table", file, row, []datum.Row{wrongTable}, "table_id"},
		{"children on a childless kind", snap, encodeVals(snap, ints(1)...), []datum.Row{good}, "no embedded rows"},
		{"row longer than its table", snap, tooLong, nil, "6 columns stored"},
		{"garbage row", snap, datum.Row{0x05, 0x00, 0xff}, nil, "malformed"},
		{"child with wrong types", part, encodeVals(part, ints(1, 2, 3, nil)...), []datum.Row{datum.EncodeRow(nil, []datum.Type{datum.Int8, datum.Int8, datum.Int8, datum.Int8, datum.Bool}, ints(1, 2, 0, 5, true))}, "ducklake_partition_column"},
	}
	_ = pcol
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.tbl.Encode(1, c.row, c.children)
			if err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("Encode = %v, want an error mentioning %q", err, c.mention)
			}
		})
	}
	if _, err := pcol.Key(1, encodeVals(pcol, ints(1, 2, 0, 5, "identity")...)); err == nil {
		t.Error("an embedded row got a key of its own")
	}
	if _, _, err := file.Encode(StoreCatalogID, row, nil); err == nil {
		t.Error("a row was encoded into the reserved catalog 0")
	}
	if _, _, err := EncodeEntity(1, TableDef{Schema: "public", Name: "users"}, row); !errors.Is(err, ErrUnknownTable) {
		t.Errorf("EncodeEntity(users) = %v", err)
	}
}

// TestDecodeRefuses: corrupt and unknown records are errors, never rows.
func TestDecodeRefuses(t *testing.T) {
	file := mustTable(t, "ducklake_data_file")
	fpv, _ := StaticTable("ducklake_file_partition_value")
	row := encodeVals(file, ints(10, 3, 5, nil, nil, "x")...)
	key, value, err := file.Encode(1, row, []datum.Row{encodeVals(fpv, ints(10, 3, 0, "v")...)})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := file.Key(1, encodeVals(file, ints(11, 3, 5, nil)...))
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0x40; return c }
	newer := bytes.Clone(value)
	newer[0] = 2
	cases := []struct {
		name       string
		key, value []byte
		want       error
	}{
		{"empty key", nil, value, ErrCorrupt},
		{"short key", key[:3], value, ErrCorrupt},
		{"unknown kind", append(CatalogPrefix(1), 0x7f), value, ErrUnknownShape},
		{"catalog 0", append(CatalogPrefix(0), key[4:]...), value, ErrCorrupt},
		{"meta kind", HeadKey(1), value, ErrUnknownShape},
		{"bad subspace", flip(key, 5), value, ErrCorrupt},
		{"key of another row", otherKey, value, ErrCorrupt},
		{"truncated key", key[:len(key)-1], value, ErrCorrupt},
		{"empty value", key, nil, ErrCorrupt},
		{"newer value format", key, newer, ErrUnknownShape},
		{"truncated value", key, value[:len(value)-1], ErrCorrupt},
		{"trailing bytes", key, append(bytes.Clone(value), 0), ErrCorrupt},
		{"flipped child link", key, flip(value, len(value)-5), ErrCorrupt},
		{"inlined table without definition", mustKey(t, InlinedDataDef("p", Version11, 1, 1, nil)), []byte{1, 3, 0}, ErrUnknownShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := DecodeKV(c.key, c.value, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("DecodeKV = %+v, %v; want %v", e, err, c.want)
			}
		})
	}
}

func mustKey(t *testing.T, def TableDef) []byte {
	tbl, err := NewTable(def)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]datum.Value, len(def.Columns))
	k, err := tbl.Key(1, datum.EncodeRow(nil, tbl.Types(), vals))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPartitionSpecRoundTrip is RFC 0013's obligation spelled out: a spec
// with its columns and transforms, a sort spec with expressions, dialects,
// directions and null orders, and a file with its partition values decode
// verbatim.
func TestPartitionSpecRoundTrip(t *testing.T) {
	part := mustTable(t, "ducklake_partition_info")
	sort := mustTable(t, "ducklake_sort_info")
	spec := encodeVals(part, ints(20, 3, 5, nil)...)
	pcols := []datum.Row{
		encodeVals(part.ChildTable(), ints(20, 3, 0, 7, "bucket(16)")...),
		encodeVals(part.ChildTable(), ints(20, 3, 1, 8, "year")...),
		encodeVals(part.ChildTable(), ints(20, 3, 2, 9, "identity")...),
	}
	sspec := encodeVals(sort, ints(21, 3, 5, 9)...)
	sexprs := []datum.Row{
		encodeVals(sort.ChildTable(), ints(21, 3, 0, `"Weird ""col"""`, "duckdb", "DESC", "NULLS_FIRST")...),
		encodeVals(sort.ChildTable(), ints(21, 3, 1, `lower(name) || 'x'`, "duckdb", "ASC", "NULLS_LAST")...),
	}
	for _, c := range []struct {
		tbl      *Table
		row      datum.Row
		children []datum.Row
		sub      Subspace
	}{{part, spec, pcols, SubCurrent}, {sort, sspec, sexprs, SubHistory}, {part, encodeVals(part, ints(22, 3, 9, nil)...), nil, SubCurrent}} {
		k, v, err := c.tbl.Encode(2, c.row, c.children)
		if err != nil {
			t.Fatal(err)
		}
		e, err := DecodeKV(k, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Sub != c.sub || !bytes.Equal(e.Row, c.row) || len(e.Children) != len(c.children) {
			t.Fatalf("%s: got %+v", c.tbl.Def.Name, e)
		}
		for i := range c.children {
			got, _ := e.Children[i].Decode(c.tbl.ChildTable().Types(), nil)
			want, _ := c.children[i].Decode(c.tbl.ChildTable().Types(), nil)
			for j := range want {
				if !datum.Equal(got[j], want[j]) {
					t.Fatalf("%s child %d col %d: %v want %v", c.tbl.Def.Name, i, j, got[j], want[j])
				}
			}
		}
	}
}

// TestKeyValues: the values KeyValues reads back from a row's key are the
// row's own in every column the key holds, for every keyed table.
func TestKeyValues(t *testing.T) {
	var tables []*Table
	for _, tb := range staticTables {
		if tb != nil && !tb.Spec.Embedded() {
			tables = append(tables, tb)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		tbl := rapid.SampledFrom(tables).Draw(t, "table")
		vals := genRow(t, tbl.Def.Columns, "row")
		row := datum.Row(datum.EncodeRow(nil, tbl.Types(), vals))
		key, err := tbl.Key(3, row)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tbl.KeyValues(3, key)
		if err != nil {
			t.Fatalf("%s: %v", tbl.Def.Name, err)
		}
		held := append(tbl.KeyColumns(), tbl.Spec.End)
		for _, c := range held {
			if c < 0 || (c == tbl.Spec.End && !tbl.Spec.Versioned()) {
				continue
			}
			if datum.Compare(got[c], vals[c]) != 0 || got[c].IsNull() != vals[c].IsNull() {
				t.Fatalf("%s column %s: key gives %+v, row has %+v", tbl.Def.Name, tbl.Def.Columns[c].Name, got[c], vals[c])
			}
		}
		if _, err := tbl.KeyValues(4, key); err == nil {
			t.Fatal("a key read as another catalog's")
		}
	})
}
