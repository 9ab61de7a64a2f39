package sql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// copyRecorder is a rowAppender that keeps each COPY row payload, framed
// as pgwire frames it (a CopyData message per row), so that two paths'
// whole streams can be compared byte for byte.
type copyRecorder struct {
	buf  []byte
	rows int
	// flushAt > 0 drops the buffer when it grows past flushAt, as a
	// connection's send buffer does (benchmarks).
	flushAt int
}

func (c *copyRecorder) AppendRow(fn func(dst []byte) []byte) error {
	c.buf = pgwire.AppendCopyData(c.buf, fn)
	c.rows++
	if c.flushAt > 0 && len(c.buf) > c.flushAt {
		c.buf = c.buf[:0]
	}
	return nil
}

// decodedSource is the general path's row source over stored rows, as
// streamRead.source runs it over memcat's Scan: each row decoded with the
// table's types, then projected onto idx (len(types) = ctid).
func decodedSource(types []datum.Type, rows []datum.Row, idx []int) rowSource {
	return func(emit func([]datum.Value) error) error {
		out := make([]datum.Value, len(idx))
		var vals []datum.Value
		for k, r := range rows {
			var err error
			if vals, err = r.Decode(types, vals[:0]); err != nil {
				return fmt.Errorf("row %d: %w", k, err)
			}
			for j, i := range idx {
				if i == len(types) {
					out[j] = datum.Value{K: datum.KindTID, I: ctidOf(k)}
				} else {
					out[j] = vals[i]
				}
			}
			if err := emit(out); err != nil {
				return err
			}
		}
		return nil
	}
}

// ctidOf is the ctid the tests give the k-th row: (k/7, k%7+1), so that
// blocks other than 0 are exercised.
func ctidOf(k int) int64 { return int64(k/7)<<16 | int64(k%7+1) }

func scanOf(rows []datum.Row) encodedScan {
	return func(fn func(int64, datum.Row) bool) {
		for k, r := range rows {
			if !fn(ctidOf(k), r) {
				return
			}
		}
	}
}

// planTypes are the column types the property test draws from: every type
// the DuckLake catalog uses, plus types the plan has no op for (it must
// refuse them when selected, and step over them when not).
var planTypes = []datum.Type{
	datum.Int8, datum.Int4, datum.Int2, datum.Varchar, datum.Text, datum.Bool, datum.UUID,
	datum.TimestampTZ, datum.Timestamp, datum.Float8, datum.Float4, datum.Date, datum.Time,
	datum.Numeric, datum.NumericType(18, 3), datum.Bytea, datum.OID, datum.Name,
	{OID: datum.OIDVarchar, Mod: 20}, datum.JSON,
	// No op: refused when selected.
	datum.Interval, datum.TimeTZ, datum.Int8Array, datum.TextArray, datum.Char, datum.TID,
	{OID: datum.OIDJSONB, Mod: -1},
}

// genStored draws a non-NULL value stored in a column of type t. Values
// range over everything the encoding can hold (an int2 column's varint is
// not range-checked when read), so both paths see the same odd inputs.
func genStored(rt *rapid.T, t datum.Type) datum.Value {
	switch t.Kind() {
	case datum.KindBool:
		return datum.BoolValue(rapid.Bool().Draw(rt, "b"))
	case datum.KindInt, datum.KindDate, datum.KindTime, datum.KindTimestamp, datum.KindTimestampTZ, datum.KindTID:
		var i int64
		switch rapid.IntRange(0, 3).Draw(rt, "ikind") {
		case 0:
			i = rapid.Int64Range(-64, 63).Draw(rt, "small")
		case 1:
			i = rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, math.MinInt32, math.MaxInt32, -1, 0, 1 << 16}).Draw(rt, "edge")
		default:
			i = rapid.Int64().Draw(rt, "i")
		}
		return datum.Value{K: t.Kind(), I: i}
	case datum.KindFloat:
		if rapid.Bool().Draw(rt, "rawbits") {
			return datum.Value{K: datum.KindFloat, I: int64(rapid.Uint64().Draw(rt, "bits"))}
		}
		return datum.FloatValue(rapid.Float64().Draw(rt, "f"))
	case datum.KindText, datum.KindBytes:
		return datum.Value{K: t.Kind(), S: rapid.StringOfN(rapid.Rune(), 0, 40, -1).Draw(rt, "s")}
	case datum.KindNumeric:
		// Mostly canonical decimals; sometimes junk, which both paths must
		// refuse alike.
		s := rapid.StringMatching(`-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,6})?|NaN|Infinity|-Infinity|[0-9a-z.\-]{0,6}`).Draw(rt, "num")
		return datum.NumericValue(s)
	case datum.KindUUID:
		return datum.Value{K: datum.KindUUID, S: string(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "u"))}
	case datum.KindInterval, datum.KindTimeTZ:
		return datum.Value{K: t.Kind(), I: rapid.Int64().Draw(rt, "i"), J: rapid.Int64().Draw(rt, "j")}
	case datum.KindArray:
		elems := rapid.SliceOfN(rapid.Int64Range(-5, 5), 0, 3).Draw(rt, "a")
		ev := make([]datum.Value, len(elems))
		for i, e := range elems {
			if t.Elem() == datum.Text {
				ev[i] = datum.TextValue(strconv.FormatInt(e, 10))
			} else {
				ev[i] = datum.IntValue(e)
			}
		}
		return datum.ArrayValue(t.Elem(), ev)
	}
	rt.Fatalf("no generator for %s", t)
	return datum.Null
}

// genTable draws column types and stored rows, some shorter than the
// table (written before an ADD COLUMN), some corrupted when corrupt.
func genTable(rt *rapid.T, corrupt bool) ([]datum.Type, []datum.Row) {
	ncols := rapid.IntRange(0, 12).Draw(rt, "ncols")
	types := make([]datum.Type, ncols)
	for i := range types {
		types[i] = rapid.SampledFrom(planTypes).Draw(rt, "type")
	}
	nrows := rapid.IntRange(0, 20).Draw(rt, "nrows")
	rows := make([]datum.Row, nrows)
	for k := range rows {
		stored := ncols
		if ncols > 0 && rapid.IntRange(0, 4).Draw(rt, "short") == 0 {
			stored = rapid.IntRange(0, ncols-1).Draw(rt, "stored")
		}
		vals := make([]datum.Value, stored)
		for i := range vals {
			if rapid.IntRange(0, 3).Draw(rt, "null") > 0 {
				vals[i] = genStored(rt, types[i])
			}
		}
		r := datum.EncodeRow(nil, types[:stored], vals)
		if corrupt && len(r) > 0 {
			switch rapid.IntRange(0, 3).Draw(rt, "corrupt") {
			case 1:
				r = r[:rapid.IntRange(0, len(r)-1).Draw(rt, "cut")]
			case 2:
				r[rapid.IntRange(0, len(r)-1).Draw(rt, "at")] = rapid.Byte().Draw(rt, "byte")
			}
		}
		rows[k] = r
	}
	return types, rows
}

// genSelection draws output columns: table positions (len(types) = ctid),
// repeats and any order allowed.
func genSelection(rt *rapid.T, types []datum.Type) ([]colInfo, []int) {
	m := rapid.IntRange(0, 10).Draw(rt, "m")
	cols := make([]colInfo, m)
	idx := make([]int, m)
	for j := range idx {
		i := rapid.IntRange(0, len(types)).Draw(rt, "col")
		idx[j] = i
		if i == len(types) {
			cols[j] = colInfo{name: "ctid", typ: datum.TID}
		} else {
			cols[j] = colInfo{name: "c" + strconv.Itoa(i), typ: types[i]}
		}
	}
	return cols, idx
}

// TestCopyPlanMatchesDecodedPath: over random tables, rows (NULLs, short
// rows, corrupt rows) and selections, the plan either refuses — exactly
// when a selected column has a type it has no op for — or writes the same
// COPY stream, byte for byte, as the general path, and fails on the same
// row.
func TestCopyPlanMatchesDecodedPath(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		corrupt := rapid.IntRange(0, 4).Draw(rt, "corruptTable") == 0
		types, rows := genTable(rt, corrupt)
		cols, idx := genSelection(rt, types)

		p, ok := newCopyPlan("t", types, types, cols, idx)
		wantOK := true
		for j, i := range idx {
			if i < len(types) && opFor(cols[j].typ) == 0 {
				wantOK = false
			}
		}
		if ok != wantOK {
			rt.Fatalf("plan ok=%v, want %v (types %v, idx %v)", ok, wantOK, types, idx)
		}
		if !ok {
			return
		}
		var want, got copyRecorder
		wantErr := copyValues(&want, 1, cols, decodedSource(types, rows, idx))
		gotErr := p.copyRows(&got, scanOf(rows))
		if (wantErr == nil) != (gotErr == nil) {
			rt.Fatalf("errors differ: general path %v, plan %v", wantErr, gotErr)
		}
		if wantErr != nil && errors.Is(wantErr, datum.ErrBadRow) != errors.Is(gotErr, datum.ErrBadRow) {
			rt.Fatalf("error kinds differ: general path %v, plan %v", wantErr, gotErr)
		}
		if want.rows != got.rows || !bytes.Equal(want.buf, got.buf) {
			rt.Fatalf("streams differ (%d vs %d rows)\ngeneral %x\nplan    %x", want.rows, got.rows, want.buf, got.buf)
		}
	})
}

// TestCopyPlanRefuses: the plan takes the general path for whatever it
// cannot reproduce exactly.
func TestCopyPlanRefuses(t *testing.T) {
	def := []datum.Type{datum.Int8, datum.Varchar}
	tid := colInfo{name: "ctid", typ: datum.TID}
	c0 := colInfo{name: "a", typ: datum.Int8}
	for _, tc := range []struct {
		name   string
		stored []datum.Type
		cols   []colInfo
		idx    []int
		ok     bool
	}{
		{"plain", def, []colInfo{c0, tid}, []int{0, 2}, true},
		{"stored types differ", []datum.Type{datum.Int4, datum.Varchar}, []colInfo{c0}, []int{0}, false},
		{"stored varchar(n) differs", []datum.Type{datum.Int8, {OID: datum.OIDVarchar, Mod: 9}}, []colInfo{c0}, []int{0}, false},
		{"fewer stored types", def[:1], []colInfo{c0}, []int{0}, false},
		{"output type differs", def, []colInfo{{name: "a", typ: datum.Int4}}, []int{0}, false},
		{"unknown-typed output", def, []colInfo{{name: "a", typ: unknownType}}, []int{1}, false},
		{"ctid not tid", def, []colInfo{{name: "ctid", typ: datum.Int8}}, []int{2}, false},
		{"position out of range", def, []colInfo{c0}, []int{3}, false},
		{"interval", []datum.Type{datum.Interval}, []colInfo{{typ: datum.Interval}}, []int{0}, false},
		{"unselected interval", []datum.Type{datum.Interval, datum.Int8}, []colInfo{c0}, []int{1}, true},
		{"unknown stored type", []datum.Type{{OID: 999999, Mod: -1}, datum.Int8}, []colInfo{c0}, []int{1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := def
			if tc.name == "interval" || tc.name == "unselected interval" || tc.name == "unknown stored type" {
				d = tc.stored
			}
			if _, ok := newCopyPlan("t", d, tc.stored, tc.cols, tc.idx); ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// TestCopyPlanShortRow: a row stored before ADD COLUMN reads its missing
// trailing columns as NULL (length -1).
func TestCopyPlanShortRow(t *testing.T) {
	types := []datum.Type{datum.Int8, datum.Varchar, datum.Bool}
	r := datum.Row(datum.EncodeRow(nil, types[:1], []datum.Value{datum.IntValue(-2)}))
	cols := []colInfo{{typ: datum.Int8}, {typ: datum.Varchar}, {typ: datum.Bool}, {name: "ctid", typ: datum.TID}}
	p, ok := newCopyPlan("t", types, types, cols, []int{0, 1, 2, 3})
	if !ok {
		t.Fatal("no plan")
	}
	var rec copyRecorder
	if err := p.copyRows(&rec, scanOf([]datum.Row{r})); err != nil {
		t.Fatal(err)
	}
	want := "d\x00\x00\x00\x24" + "\x00\x04" +
		"\x00\x00\x00\x08\xff\xff\xff\xff\xff\xff\xff\xfe" +
		"\xff\xff\xff\xff" + "\xff\xff\xff\xff" +
		"\x00\x00\x00\x06\x00\x00\x00\x00\x00\x01"
	if string(rec.buf) != want {
		t.Fatalf("got %q\nwant %q", rec.buf, want)
	}
}

// dataFileTypes is ducklake_data_file's shape (DuckLake 0.3).
var dataFileTypes = []datum.Type{datum.Int8, datum.Int8, datum.Int8, datum.Int8, datum.Int8, datum.Varchar,
	datum.Bool, datum.Varchar, datum.Int8, datum.Int8, datum.Int8, datum.Int8, datum.Int8, datum.Varchar, datum.Int8}

// dataFileRows returns n rows shaped like a catalog's data files: growing
// ids, a uuid-named relative path, most end snapshots and optional fields
// NULL.
func dataFileRows(n int) []datum.Row {
	rows := make([]datum.Row, n)
	var buf []byte
	for k := range rows {
		end := datum.Null
		if k%5 == 0 {
			end = datum.IntValue(int64(k/10 + 7))
		}
		path := fmt.Sprintf("ducklake-0193%04x-%04x-7%03x-8%03x-%012x.parquet", k%65536, k%9973, k%4096, k%3001, k*7919)
		vals := []datum.Value{
			datum.IntValue(int64(k)), datum.IntValue(int64(k % 100)), datum.IntValue(int64(k/100 + 1)), end, datum.Null,
			datum.TextValue(path), datum.BoolValue(true), datum.TextValue("parquet"),
			datum.IntValue(int64(1000 + k%5000)), datum.IntValue(int64(50000 + k%100000)), datum.IntValue(int64(800 + k%300)),
			datum.IntValue(int64(k) * 1000), datum.Null, datum.Null, datum.Null,
		}
		buf = datum.EncodeRow(buf[:0], dataFileTypes, vals)
		rows[k] = datum.Row(bytes.Clone(buf))
	}
	return rows
}

// BenchmarkCopyDataFile: binary COPY of a 100k-row ducklake_data_file,
// every column selected in table order (DuckDB's read), by the general
// path (decode to values, re-encode) and by the plan.
func BenchmarkCopyDataFile(b *testing.B) {
	rows := dataFileRows(100_000)
	cols := make([]colInfo, len(dataFileTypes))
	idx := make([]int, len(dataFileTypes))
	for i, t := range dataFileTypes {
		cols[i], idx[i] = colInfo{name: "c" + strconv.Itoa(i), typ: t}, i
	}
	b.Run("decoded", func(b *testing.B) {
		rec := &copyRecorder{flushAt: 64 << 10}
		src := decodedSource(dataFileTypes, rows, idx)
		b.ReportAllocs()
		for b.Loop() {
			if err := copyValues(rec, 1, cols, src); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("plan", func(b *testing.B) {
		rec := &copyRecorder{flushAt: 64 << 10}
		b.ReportAllocs()
		for b.Loop() {
			p, ok := newCopyPlan("ducklake_data_file", dataFileTypes, dataFileTypes, cols, idx)
			if !ok {
				b.Fatal("no plan")
			}
			if err := p.copyRows(rec, scanOf(rows)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// FuzzCopyPlanRow: on arbitrary row bytes the plan fails exactly when
// datum.Row.Decode does, and otherwise writes the general path's tuple.
func FuzzCopyPlanRow(f *testing.F) {
	types := []datum.Type{datum.Int8, datum.Varchar, datum.Bool, datum.UUID, datum.Float8, datum.Interval,
		datum.Numeric, datum.Date, datum.Float4, datum.TimestampTZ, datum.Int2}
	var u [16]byte
	f.Add(datum.EncodeRow(nil, types, []datum.Value{datum.IntValue(-3), datum.TextValue("x"), datum.BoolValue(true),
		datum.UUIDValue(u), datum.FloatValue(1.5), datum.IntervalValue(1, 2, 3), datum.NumericValue("-1.25"),
		datum.DateValue(-1), datum.FloatValue(0.5), datum.TimestampTZValue(1 << 40), datum.IntValue(7)}))
	f.Add(datum.EncodeRow(nil, types[:3], []datum.Value{datum.Null, datum.TextValue(""), datum.Null}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	idx := []int{9, 0, 1, 2, 3, 4, 6, 7, 8, 10, len(types), 1}
	cols := make([]colInfo, len(idx))
	for j, i := range idx {
		if i == len(types) {
			cols[j] = colInfo{name: "ctid", typ: datum.TID}
		} else {
			cols[j] = colInfo{name: "c", typ: types[i]}
		}
	}
	p, ok := newCopyPlan("t", types, types, cols, idx)
	if !ok {
		f.Fatal("no plan")
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rows := []datum.Row{b}
		var want, got copyRecorder
		wantErr := copyValues(&want, 1, cols, decodedSource(types, rows, idx))
		gotErr := p.copyRows(&got, scanOf(rows))
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("errors differ: general path %v, plan %v", wantErr, gotErr)
		}
		if !bytes.Equal(want.buf, got.buf) {
			t.Fatalf("tuples differ\ngeneral %x\nplan    %x", want.buf, got.buf)
		}
	})
}

// TestCopyPlanMemo: a lake table's definition memo keeps one binary COPY
// plan per column list. A second COPY of the same columns shares the plan's
// read-only parts and gets its own cells; another column list gets its own
// plan; and every plan writes what the general path writes.
func TestCopyPlanMemo(t *testing.T) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	if out := runSQL(ctx, s, `CREATE TABLE ducklake_memo(id BIGINT PRIMARY KEY, name VARCHAR, n BIGINT);
INSERT INTO ducklake_memo VALUES (1, 'a', 10), (2, NULL, 20), (3, 'c', NULL)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	plan := func(sql string) (*copyPlan, *streamRead, encodedScan) {
		t.Helper()
		p, sr, src := encodedPlanOf(t, ctx, ex, s, sql)
		return p, sr, src.scan
	}
	check := func(p *copyPlan, sr *streamRead, scan encodedScan) {
		t.Helper()
		var want, got copyRecorder
		if err := copyValues(&want, 1, sr.cols, sr.source()); err != nil {
			t.Fatal(err)
		}
		if err := p.copyRows(&got, scan); err != nil {
			t.Fatal(err)
		}
		if want.rows != 3 || got.rows != 3 || !bytes.Equal(want.buf, got.buf) {
			t.Fatalf("streams differ (%d vs %d rows)", want.rows, got.rows)
		}
	}
	p1, sr1, scan1 := plan(`SELECT id, name, n FROM ducklake_memo`)
	p2, sr2, scan2 := plan(`SELECT id, name, n FROM ducklake_memo`)
	if &p1.out[0] != &p2.out[0] {
		t.Error("a second COPY of the same columns built its plan again")
	}
	if &p1.Cells[0] == &p2.Cells[0] {
		t.Error("two COPYs share one plan's cells")
	}
	p3, sr3, scan3 := plan(`SELECT n, ctid, id FROM ducklake_memo`)
	if len(p3.out) != 3 || p3.out[0].src != 2 || p3.out[1].src != -1 || p3.out[2].src != 0 {
		t.Fatalf("another column list got plan %+v", p3.out)
	}
	check(p1, sr1, scan1)
	check(p2, sr2, scan2)
	check(p3, sr3, scan3)
}
