package verbs

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

func lakePairs(t *testing.T) [][2][]byte {
	l := buildLake(t)
	var pairs [][2][]byte
	if err := l.Database().Server().Pairs(func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(pairs, func(i, j int) bool { return bytes.Compare(pairs[i][0], pairs[j][0]) < 0 })
	return pairs
}

// TestLoadRefusesBadPairs: a store that yields damaged or inconsistent
// pairs gets a clear error, never a partial catalog.
func TestLoadRefusesBadPairs(t *testing.T) {
	base := lakePairs(t)
	find := func(pairs [][2][]byte, kind keyspace.Kind) int {
		for i, p := range pairs {
			if len(p[0]) > 4 && keyspace.Kind(p[0][4]) == kind && p[0][3] != 0 {
				return i
			}
		}
		t.Fatalf("no pair of kind %v", kind)
		return -1
	}
	clone := func() [][2][]byte {
		out := make([][2][]byte, len(base))
		for i, p := range base {
			out[i] = [2][]byte{append([]byte(nil), p[0]...), append([]byte(nil), p[1]...)}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		damage func(p [][2][]byte) [][2][]byte
		want   []error // any of
		text   string  // in the message, when set
	}{
		{"truncated row value", func(p [][2][]byte) [][2][]byte {
			i := find(p, keyspace.KindDataFile)
			p[i][1] = p[i][1][:len(p[i][1])-3]
			return p
		}, []error{keyspace.ErrCorrupt, catalog.ErrCorrupt}, ""},
		{"unknown value format", func(p [][2][]byte) [][2][]byte {
			i := find(p, keyspace.KindSnapshot)
			p[i][1][0] = 0x7f
			return p
		}, []error{keyspace.ErrUnknownShape}, ""},
		{"duplicate primary key", func(p [][2][]byte) [][2][]byte {
			// The same snapshot row twice under two keys cannot happen with
			// a faithful key; a copied pair with a patched key can.
			i := find(p, keyspace.KindSnapshot)
			dup := [2][]byte{append([]byte(nil), p[i][0]...), append([]byte(nil), p[i][1]...)}
			dup[0] = append(dup[0], 0)
			return append(p[:i+1], append([][2][]byte{dup}, p[i+1:]...)...)
		}, []error{keyspace.ErrCorrupt, catalog.ErrCorrupt}, ""},
		{"same data_file_id under two table ids", func(p [][2][]byte) [][2][]byte {
			i := find(p, keyspace.KindDataFile)
			e, err := keyspace.DecodeKV(p[i][0], p[i][1], nil)
			if err != nil {
				t.Fatal(err)
			}
			kt, _ := keyspace.StaticTable("ducklake_data_file")
			vals, err := e.Row.Decode(kt.Types(), nil)
			if err != nil {
				t.Fatal(err)
			}
			vals[1] = datum.IntValue(vals[1].Int() + 1000) // table_id: another key, same primary key
			k, v, err := kt.Encode(e.CatalogID, datum.Row(datum.EncodeRow(nil, kt.Types(), vals)), nil)
			if err != nil {
				t.Fatal(err)
			}
			p = append(p, [2][]byte{k, v})
			sort.Slice(p, func(i, j int) bool { return bytes.Compare(p[i][0], p[j][0]) < 0 })
			return p
		}, []error{catalog.ErrCorrupt}, "ducklake_data_file_pkey"},
		{"row of an unregistered catalog", func(p [][2][]byte) [][2][]byte {
			i := find(p, keyspace.KindSnapshot)
			p[i][0][3] = 0x77
			return p
		}, []error{catalog.ErrCorrupt}, ""},
		{"missing table definition", func(p [][2][]byte) [][2][]byte {
			i := find(p, keyspace.KindTableDef)
			for keyspace.Kind(p[i][0][4]) == keyspace.KindTableDef {
				p = append(p[:i], p[i+1:]...)
			}
			return p
		}, []error{catalog.ErrCorrupt}, ""},
		{"short key", func(p [][2][]byte) [][2][]byte {
			return append(p, [2][]byte{{1, 2}, {1}})
		}, []error{catalog.ErrCorrupt}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := catalog.Load(ctx, &catalog.SliceIterator{Pairs: tc.damage(clone())}, catalog.Options{})
			if err == nil || srv != nil {
				t.Fatalf("loaded a damaged store (err %v)", err)
			}
			ok := false
			for _, w := range tc.want {
				ok = ok || errors.Is(err, w)
			}
			if !ok {
				t.Fatalf("error %v is none of %v", err, tc.want)
			}
			if tc.text != "" && !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q does not mention %q", err, tc.text)
			}
		})
	}
	if _, err := catalog.Load(ctx, &catalog.SliceIterator{Pairs: clone()}, catalog.Options{}); err != nil {
		t.Fatalf("undamaged pairs: %v", err)
	}
}
