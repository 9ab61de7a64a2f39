package keyspace

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden.txt")

// TestFormatGolden pins the storage format: the exact bytes of one record of
// every kind (and the catalog records) are in testdata/golden.txt. A change
// to any encoding, kind number or key choice shows up here; such a change
// must bump a format version instead. Regenerate with -rewrite only for new
// records, and review the diff.
func TestFormatGolden(t *testing.T) {
	var b strings.Builder
	rec := func(what string, key, value []byte) {
		fmt.Fprintf(&b, "%s\n  key   %s\n  value %s\n", what, hex.EncodeToString(key), hex.EncodeToString(value))
	}
	rec("registry (lake, public) -> 1", RegistryKey("lake", "public"), EncodeRegistryValue(1))
	rec("next catalog id 2", NextCatalogIDKey(), EncodeNextCatalogID(2))
	rec("head", HeadKey(1), EncodeHead(Head{FormatVersion: 1, Database: "lake", Schema: "public", HasSnapshot: true, Snapshot: 5, Commits: 6}))
	defs, _ := FixedDefs("public", Version11)
	rec("tabledef ducklake_snapshot", TableDefKey(1, "ducklake_snapshot"), EncodeTableDef(&defs[1]))
	inl := InlinedDataDef("public", Version11, 3, 2, []ColumnDef{{Name: "id", Type: datum.Int8}, {Name: "s", Type: datum.Bytea}})
	rec("tabledef "+inl.Name, TableDefKey(1, inl.Name), EncodeTableDef(&inl))

	// One row per parent table: column i holds i+1 (ints), "v<i>" (strings),
	// true (booleans), a fixed uuid and timestamp; end_snapshot is set on
	// every other versioned table so both subspaces appear.
	for n, s := range fixedOrder {
		if s.Embedded() {
			continue
		}
		tbl, _ := StaticTable(s.Name)
		vals := goldenRow(tbl.Def.Columns)
		if s.Versioned() && n%2 == 0 {
			vals[s.End] = datum.Null
		}
		var kids []datum.Row
		if ct := tbl.ChildTable(); ct != nil {
			cv := goldenRow(ct.Def.Columns)
			for _, l := range ct.Spec.ParentLink {
				cv[l[0]] = vals[l[1]]
			}
			kids = append(kids, datum.EncodeRow(nil, ct.Types(), cv))
		}
		k, v, err := tbl.Encode(1, datum.EncodeRow(nil, tbl.Types(), vals), kids)
		if err != nil {
			t.Fatal(err)
		}
		rec(s.Name, k, v)
	}
	for _, def := range []TableDef{inl, InlinedDeleteDef("public", 3)} {
		tbl, err := NewTable(def)
		if err != nil {
			t.Fatal(err)
		}
		k, v, err := tbl.Encode(1, datum.EncodeRow(nil, tbl.Types(), goldenRow(def.Columns)), nil)
		if err != nil {
			t.Fatal(err)
		}
		rec(def.Name, k, v)
	}
	path := filepath.Join("testdata", "golden.txt")
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("storage format changed at line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("storage format changed: %d lines, want %d", len(gl), len(wl))
	}
}

func goldenRow(cols []ColumnDef) []datum.Value {
	vals := make([]datum.Value, len(cols))
	for i, c := range cols {
		switch c.Type.Kind() {
		case datum.KindInt:
			vals[i] = datum.IntValue(int64(i + 1))
		case datum.KindText:
			vals[i] = datum.TextValue(fmt.Sprintf("v%d", i))
		case datum.KindBytes:
			vals[i] = datum.BytesValue([]byte{0, byte(i)})
		case datum.KindBool:
			vals[i] = datum.BoolValue(true)
		case datum.KindUUID:
			vals[i] = datum.UUIDValue([16]byte{0xa0, 0xee, 15: byte(i)})
		case datum.KindTimestampTZ:
			vals[i] = datum.TimestampTZValue(817_000_000_000_000)
		}
	}
	return vals
}
