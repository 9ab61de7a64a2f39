package pgvalue

import (
	"bytes"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"pgregory.net/rapid"
)

// PostgreSQL 15's own text output for these values (checked with psql
// against a real server: SELECT '<v>'::interval, 1e20::float8, ...).
func TestTextMatchesPostgres(t *testing.T) {
	c := NewCodec()
	cases := []struct {
		oid  uint32
		v    any
		want string
	}{
		{IntervalOID, pgtype.Interval{Months: 14, Days: 3, Microseconds: 4*3600e6 + 5*60e6 + 6e6, Valid: true}, "1 year 2 mons 3 days 04:05:06"},
		{IntervalOID, pgtype.Interval{Months: 1, Days: 1, Valid: true}, "1 mon 1 day"},
		{IntervalOID, pgtype.Interval{Valid: true}, "00:00:00"},
		{IntervalOID, pgtype.Interval{Days: -3, Microseconds: 3600e6, Valid: true}, "-3 days +01:00:00"},
		{IntervalOID, pgtype.Interval{Months: -13, Microseconds: -1500000, Valid: true}, "-1 years -1 mons -00:00:01.5"},
		{IntervalOID, pgtype.Interval{Microseconds: 100 * 3600e6, Valid: true}, "100:00:00"},
		{IntervalOID, 90 * time.Minute, "01:30:00"},
		{Float8OID, 1e20, "1e+20"},
		{Float8OID, 0.1, "0.1"},
		{Float8OID, 123456789012345.0, "123456789012345"},
		{Float8OID, 1e15, "1e+15"},
		{Float8OID, 0.0001, "0.0001"},
		{Float8OID, 0.00001, "1e-05"},
		{Float8OID, math.Inf(-1), "-Infinity"},
		{Float8OID, math.NaN(), "NaN"},
		{Float4OID, float32(1.1), "1.1"},
		{TimestamptzOID, time.Date(2026, 1, 2, 3, 4, 5, 678000000, time.UTC), "2026-01-02 03:04:05.678+00"},
		{TimestamptzOID, time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), "2026-01-02 02:04:05+00"},
		{TimestampOID, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02 03:04:05"},
		{DateOID, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "2026-01-02"},
		{ByteaOID, []byte{0xde, 0xad}, `\xdead`},
		{BoolOID, false, "f"},
		{UUIDOID, [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{NumericOID, "-0.0100", "-0.0100"},
		{TIDOID, pgtype.TID{BlockNumber: 3, OffsetNumber: 4, Valid: true}, "(3,4)"},
		{Int4ArrayOID, []int32{1, 2}, "{1,2}"},
		{TextArrayOID, []string{"a", "b c", ""}, `{a,"b c",""}`},
	}
	for _, tc := range cases {
		got, null, err := c.Append(nil, tc.oid, TextFormat, tc.v)
		if err != nil || null || string(got) != tc.want {
			t.Errorf("%d %v: got %q null=%v err=%v, want %q", tc.oid, tc.v, got, null, err, tc.want)
		}
	}
}

// Binary encodings that DuckDB reads by layout (docs/reference/postgres-scanner-wire.md
// Appendix C).
func TestBinaryLayouts(t *testing.T) {
	c := NewCodec()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678000000, time.UTC)
	cases := []struct {
		oid  uint32
		v    any
		want []byte
	}{
		{TimestamptzOID, ts, []byte{0, 2, 0xea, 0x5d, 0xbb, 0x1f, 0x6b, 0xb0}},
		{Int8OID, int64(0), make([]byte, 8)},
		{BoolOID, true, []byte{1}},
		{TIDOID, "(3,4)", []byte{0, 0, 0, 3, 0, 4}},
		{NumericOID, "12345.678", []byte{0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c}},
	}
	for _, tc := range cases {
		got, _, err := c.Append(nil, tc.oid, BinaryFormat, tc.v)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%d %v: got %x err=%v want %x", tc.oid, tc.v, got, err, tc.want)
		}
	}
	if got := AppendTimestamptzField(nil, ts); !bytes.Equal(got[4:], cases[0].want) || !bytes.Equal(got[:4], []byte{0, 0, 0, 8}) {
		t.Errorf("AppendTimestamptzField %x", got)
	}
	if _, null, _ := c.Append(nil, TextOID, TextFormat, nil); !null {
		t.Error("nil is not NULL")
	}
	if f, _ := c.AppendField(nil, TextOID, BinaryFormat, nil); !bytes.Equal(f, []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("NULL field %x", f)
	}
}

// Every value survives encode → decode in both formats.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := NewCodec()
		format := rapid.SampledFrom([]int16{TextFormat, BinaryFormat}).Draw(t, "format")
		micros := rapid.Int64Range(-200_000_000_000_000_000, 200_000_000_000_000_000).Draw(t, "micros")
		ts := time.UnixMicro(micros).UTC()
		type tc struct {
			oid uint32
			v   any
		}
		cases := []tc{
			{Int2OID, rapid.Int16().Draw(t, "i2")},
			{Int4OID, rapid.Int32().Draw(t, "i4")},
			{Int8OID, rapid.Int64().Draw(t, "i8")},
			{Float8OID, rapid.Float64().Draw(t, "f8")},
			{Float4OID, rapid.Float32().Draw(t, "f4")},
			{BoolOID, rapid.Bool().Draw(t, "b")},
			{TextOID, rapid.StringMatching(`[^\x00]*`).Draw(t, "s")},
			{ByteaOID, rapid.SliceOf(rapid.Byte()).Draw(t, "by")},
			{UUIDOID, [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "u"))},
			{TimestamptzOID, ts},
			{IntervalOID, pgtype.Interval{Months: rapid.Int32Range(-1e6, 1e6).Draw(t, "mon"), Days: rapid.Int32Range(-1e6, 1e6).Draw(t, "day"),
				Microseconds: rapid.Int64Range(-1e15, 1e15).Draw(t, "us"), Valid: true}},
			{Int8ArrayOID, rapid.SliceOf(rapid.Int64()).Draw(t, "ia")},
		}
		for _, k := range cases {
			enc, null, err := c.Append(nil, k.oid, format, k.v)
			if err != nil || null {
				t.Fatalf("encode %d %v: %v null=%v", k.oid, k.v, err, null)
			}
			got, err := c.Decode(k.oid, format, enc)
			if err != nil {
				t.Fatalf("decode %d %q: %v", k.oid, enc, err)
			}
			if !sameValue(k.v, got) {
				t.Fatalf("oid %d format %d: %#v → %q → %#v", k.oid, format, k.v, enc, got)
			}
		}
	})
}

func sameValue(want, got any) bool {
	switch w := want.(type) {
	case float64:
		g := got.(float64)
		return g == w || (math.IsNaN(g) && math.IsNaN(w))
	case float32:
		g := got.(float32)
		return g == w || (math.IsNaN(float64(g)) && math.IsNaN(float64(w)))
	case []byte:
		return bytes.Equal(w, got.([]byte))
	case time.Time:
		return w.Equal(got.(time.Time))
	case []int64:
		g := got.([]any)
		if len(g) != len(w) {
			return false
		}
		for i := range w {
			if g[i].(int64) != w[i] {
				return false
			}
		}
		return true
	}
	return want == got
}

// COPY text and binary rows survive the writer helpers and the readers,
// including every byte that text format must escape.
func TestCopyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ncols := rapid.IntRange(1, 5).Draw(t, "ncols")
		rows := rapid.SliceOfN(rapid.SliceOfN(rapid.Ptr(rapid.SliceOf(rapid.Byte()), true), ncols, ncols), 0, 20).Draw(t, "rows")
		var text, bin []byte
		bin = AppendCopyHeader(bin)
		for _, r := range rows {
			bin = AppendTupleStart(bin, len(r))
			for i, cell := range r {
				if i > 0 {
					text = append(text, '\t')
				}
				if cell == nil {
					text = append(text, `\N`...)
					bin = AppendNullField(bin)
					continue
				}
				text = AppendCopyTextValue(text, *cell)
				bin = AppendBytesField(bin, *cell)
			}
			text = append(text, '\n')
		}
		bin = AppendCopyTrailer(bin)
		if rapid.Bool().Draw(t, "endmarker") {
			text = append(text, "\\.\n"...)
		}
		chunk := rapid.IntRange(1, 64).Draw(t, "chunk")
		for name, next := range map[string]func() ([][]byte, error){
			"text":   NewTextCopyReader(&chunkReader{b: text, n: chunk}).Next,
			"binary": NewBinaryCopyReader(&chunkReader{b: bin, n: chunk}).Next,
		} {
			for i, want := range rows {
				got, err := next()
				if err != nil {
					t.Fatalf("%s row %d: %v", name, i, err)
				}
				if !slices.EqualFunc(got, want, func(g []byte, w *[]byte) bool {
					return (g == nil) == (w == nil) && (w == nil || bytes.Equal(g, *w))
				}) {
					t.Fatalf("%s row %d: got %q want %v", name, i, got, want)
				}
			}
			if _, err := next(); err != io.EOF {
				t.Fatalf("%s: end: %v", name, err)
			}
		}
	})
}

// chunkReader returns at most n bytes per Read, like CopyData messages
// that split rows arbitrarily.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n, len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

func TestCopyReaderErrors(t *testing.T) {
	bad := map[string][]byte{
		"short header":  []byte("PGCOPY\n"),
		"bad signature": append([]byte("PGCOPX\n\xff\r\n\x00"), make([]byte, 8)...),
		"huge field":    append(AppendTupleStart(AppendCopyHeader(nil), 1), 0x7f, 0xff, 0xff, 0xff),
		"cut field":     append(AppendTupleStart(AppendCopyHeader(nil), 1), 0, 0, 0, 9, 1),
		"negative len":  append(AppendTupleStart(AppendCopyHeader(nil), 1), 0xff, 0xff, 0xff, 0xfe),
		"critical flag": append([]byte(CopyBinarySignature), 0, 1, 0, 0, 0, 0, 0, 0),
	}
	for name, b := range bad {
		r := NewBinaryCopyReader(bytes.NewReader(b))
		if _, err := r.Next(); err == nil || err == io.EOF {
			t.Errorf("%s: err %v", name, err)
		}
	}
	tr := NewTextCopyReader(bytes.NewReader([]byte("a\\")))
	if _, err := tr.Next(); err == nil {
		t.Error("trailing backslash accepted")
	}
	// Custom NULL marker (DuckDB sends NULL '\b' as a raw 0x08 byte).
	tr = NewTextCopyReader(bytes.NewReader([]byte("1\t\b\n\\x41\\101\\q\n")))
	tr.Null = "\b"
	row, err := tr.Next()
	if err != nil || string(row[0]) != "1" || row[1] != nil {
		t.Errorf("null marker row %q %v", row, err)
	}
	row, err = tr.Next()
	if err != nil || string(row[0]) != "AAq" {
		t.Errorf("escapes row %q %v", row, err)
	}
}

func FuzzBinaryCopyReader(f *testing.F) {
	f.Add(AppendCopyTrailer(AppendCopyHeader(nil)))
	f.Add(AppendCopyTrailer(AppendInt8Field(AppendTupleStart(AppendCopyHeader(nil), 1), 7)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewBinaryCopyReader(bytes.NewReader(b))
		r.MaxFieldLen = 1 << 16
		for range 10000 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}

func FuzzTextCopyReader(f *testing.F) {
	f.Add([]byte("1\ta\\tb\n2\t\\N\n\\.\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewTextCopyReader(bytes.NewReader(b))
		for range 10000 {
			row, err := r.Next()
			if err != nil {
				return
			}
			// Whatever was read re-encodes to a line that reads back the same.
			var line []byte
			for i, c := range row {
				if i > 0 {
					line = append(line, '\t')
				}
				if c == nil {
					line = append(line, `\N`...)
				} else {
					line = AppendCopyTextValue(line, c)
				}
			}
			again, err := NewTextCopyReader(bytes.NewReader(append(line, '\n'))).Next()
			if err != nil || !slices.EqualFunc(again, row, func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }) {
				t.Fatalf("re-read %q as %q (%v)", row, again, err)
			}
		}
	})
}

// Decoding untrusted parameter bytes never panics.
func FuzzDecode(f *testing.F) {
	oids := []uint32{BoolOID, ByteaOID, Int2OID, Int4OID, Int8OID, TextOID, OIDOID, TIDOID, Float4OID, Float8OID,
		Int4ArrayOID, TextArrayOID, DateOID, TimeOID, TimestampOID, TimestamptzOID, IntervalOID, NumericOID, UUIDOID}
	f.Add(uint8(0), false, []byte{1})
	f.Add(uint8(17), true, []byte{0, 1, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, which uint8, binary bool, b []byte) {
		c := NewCodec()
		format := TextFormat
		if binary {
			format = BinaryFormat
		}
		oid := oids[int(which)%len(oids)]
		v, err := c.Decode(oid, format, b)
		if err != nil || v == nil {
			return
		}
		if _, _, err := c.Append(nil, oid, format, v); err != nil {
			t.Logf("re-encode of %#v failed: %v", v, err)
		}
	})
}
