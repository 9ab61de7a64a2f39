package pgcopy

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

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
	f.Add(AppendCopyTrailer(AppendBytesField(AppendTupleStart(AppendCopyHeader(nil), 1), []byte{0, 0, 0, 0, 0, 0, 0, 7})))
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
