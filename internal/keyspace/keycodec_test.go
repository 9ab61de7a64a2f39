package keyspace

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// field is a reference key field: NULL, an int or a string.
type field struct {
	null bool
	str  bool
	i    int64
	s    string
}

// compareFields is the reference order: NULL first, ints numerically,
// strings bytewise, field by field, a shorter tuple before its extensions.
func compareFields(a, b []field) int {
	for k := 0; k < len(a) && k < len(b); k++ {
		x, y := a[k], b[k]
		switch {
		case x.null && y.null:
			continue
		case x.null:
			return -1
		case y.null:
			return 1
		}
		var c int
		if x.str {
			c = strings.Compare(x.s, y.s)
		} else {
			c = cmp.Compare(x.i, y.i)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func appendFields(dst []byte, fs []field) []byte {
	for _, f := range fs {
		switch {
		case f.null:
			dst = AppendNull(dst)
		case f.str:
			dst = AppendString(dst, f.s)
		default:
			dst = AppendInt(dst, f.i)
		}
	}
	return dst
}

func drawFields(t *rapid.T, shape []bool, label string) []field {
	fs := make([]field, len(shape))
	for i, str := range shape {
		fs[i].str = str
		if rapid.IntRange(0, 6).Draw(t, label+"null") == 0 {
			fs[i].null = true
			continue
		}
		if str {
			fs[i].s = genString(t, label+"s")
		} else {
			fs[i].i = genInt(t, label+"i")
		}
	}
	return fs
}

// TestKeyOrder: encoded keys compare exactly as their fields do, and decode
// back to them.
func TestKeyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shape := rapid.SliceOfN(rapid.Bool(), 1, 5).Draw(t, "shape")
		a := drawFields(t, shape, "a")
		b := drawFields(t, shape, "b")
		if rapid.Bool().Draw(t, "share") {
			// Often share a prefix so later fields decide.
			n := rapid.IntRange(0, len(a)).Draw(t, "shared")
			copy(b[:n], a[:n])
		}
		ka, kb := appendFields(nil, a), appendFields(nil, b)
		if got, want := bytes.Compare(ka, kb), compareFields(a, b); got != want {
			t.Fatalf("compare(%x, %x) = %d, fields compare %d: %+v vs %+v", ka, kb, got, want, a, b)
		}
		r := NewKeyReader(ka)
		for i, f := range a {
			var g field
			g.str = f.str
			if f.str {
				g.s, g.null = r.String()
			} else {
				g.i, g.null = r.Int()
			}
			if g != f {
				t.Fatalf("field %d decoded %+v, want %+v", i, g, f)
			}
		}
		if err := r.Done(); err != nil {
			t.Fatal(err)
		}
		// A key is never a prefix of a different key of the same shape.
		if !bytes.Equal(ka, kb) && (bytes.HasPrefix(ka, kb) || bytes.HasPrefix(kb, ka)) {
			t.Fatalf("%x and %x: one is a prefix of the other", ka, kb)
		}
	})
}

func TestKeyCodecExamples(t *testing.T) {
	order := [][]byte{
		AppendNull(nil),
		AppendInt(nil, -1<<63),
		AppendInt(nil, -1),
		AppendInt(nil, 0),
		AppendInt(nil, 1),
		AppendInt(nil, 1<<63-1),
	}
	for i := 1; i < len(order); i++ {
		if bytes.Compare(order[i-1], order[i]) >= 0 {
			t.Errorf("int keys out of order at %d: %x %x", i, order[i-1], order[i])
		}
	}
	strs := []string{"", "\x00", "\x00\x00", "\x00\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\xff\xff"}
	for i := 1; i < len(strs); i++ {
		a, b := AppendString(nil, strs[i-1]), AppendString(nil, strs[i])
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("%q (%x) !< %q (%x)", strs[i-1], a, strs[i], b)
		}
	}
	if got := AppendString(nil, "a\x00b"); !bytes.Equal(got, []byte{1, 'a', 0, 0xff, 'b', 0, 1}) {
		t.Errorf("escaped string %x", got)
	}
	if got := AppendInt(nil, 1); !bytes.Equal(got, []byte{1, 0x80, 0, 0, 0, 0, 0, 0, 1}) {
		t.Errorf("int 1 encodes %x", got)
	}
	for _, c := range []struct{ p, end []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	} {
		if got := PrefixEnd(c.p); !bytes.Equal(got, c.end) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.p, got, c.end)
		}
	}
	for _, bad := range [][]byte{{2}, {1, 'a'}, {1, 'a', 0}, {1, 'a', 0, 7}, {1, 0, 0, 0}} {
		r := NewKeyReader(bad)
		r.String()
		if r.Err() == nil {
			t.Errorf("string field %x decoded without error", bad)
		}
	}
}

// rowKeyFields is the reference key of a row: subspace, name fields, entity
// key columns, begin (when a key field), end (history).
func rowKeyFields(tbl *Table, row datum.Row) []field {
	vals, _ := row.Decode(tbl.Types(), nil)
	var fs []field
	if tbl.Spec.Versioned() {
		sub := int64(SubCurrent)
		if !vals[tbl.Spec.End].IsNull() {
			sub = int64(SubHistory)
		}
		fs = append(fs, field{i: sub})
	}
	if tbl.Spec.Dynamic {
		fs = append(fs, field{i: tbl.Spec.TableID})
		if tbl.Spec.Kind == KindInlinedRow {
			fs = append(fs, field{i: tbl.Spec.SchemaVersion})
		}
	}
	cols := append([]int(nil), tbl.Spec.EntityKey...)
	if tbl.Spec.Versioned() && len(tbl.Spec.PrimaryKey) == 0 {
		cols = append(cols, tbl.Spec.Begin)
	}
	if tbl.Spec.Versioned() && !vals[tbl.Spec.End].IsNull() {
		cols = append(cols, tbl.Spec.End)
	}
	for _, c := range cols {
		v := vals[c]
		f := field{null: v.IsNull(), str: v.K == datum.KindText || tbl.Types()[c].Kind() == datum.KindText}
		if f.str {
			f.s = v.S
		} else {
			f.i = v.I
		}
		fs = append(fs, f)
	}
	return fs
}

// TestRowKeyOrder: for two rows of one table, their keys compare as their
// key fields do: distinct entities get distinct keys, and key order is field
// order (so a per-table range holds exactly that table's rows in order).
func TestRowKeyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := rapid.SampledFrom(parentSpecs()).Draw(t, "table")
		tbl, _ := StaticTable(spec.Name)
		a := genRow(t, tbl.Def.Columns, "a")
		b := genRow(t, tbl.Def.Columns, "b")
		for i := range b {
			if rapid.IntRange(0, 2).Draw(t, "same") > 0 {
				b[i] = a[i]
			}
		}
		ra := datum.Row(datum.EncodeRow(nil, tbl.Types(), a))
		rb := datum.Row(datum.EncodeRow(nil, tbl.Types(), b))
		ka, err := tbl.Key(3, ra)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := tbl.Key(3, rb)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytes.Compare(ka, kb), compareFields(rowKeyFields(tbl, ra), rowKeyFields(tbl, rb)); got != want {
			t.Fatalf("%s: key compare %d, field compare %d\n%x\n%x", tbl.Def.Name, got, want, ka, kb)
		}
	})
}
