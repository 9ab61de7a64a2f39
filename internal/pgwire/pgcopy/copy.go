// Package pgcopy frames rows for PostgreSQL's COPY protocol: the binary
// COPY header, tuples and trailer, the text format's escaping, and readers
// that split a client's COPY FROM STDIN stream into cells. Cells are bytes
// already encoded in their type's text or binary form (datum encodes
// values); this package never interprets them.
package pgcopy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// CopyBinarySignature is the 11-byte signature that opens a binary COPY
// stream. The full header adds int32 flags and an int32 extension length,
// both zero here: DuckDB's reader skips exactly 8 bytes after the signature,
// so the extension length must stay 0.
const CopyBinarySignature = "PGCOPY\n\xff\r\n\x00"

// CopyBinaryHeaderLen is the length of the header AppendCopyHeader writes.
const CopyBinaryHeaderLen = len(CopyBinarySignature) + 8

// ErrCopyFormat reports a malformed COPY stream from the client.
var ErrCopyFormat = errors.New("pgcopy: malformed COPY data")

// AppendCopyHeader appends the binary COPY header (signature, flags 0,
// extension length 0).
func AppendCopyHeader(dst []byte) []byte {
	dst = append(dst, CopyBinarySignature...)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
}

// AppendCopyTrailer appends the binary COPY trailer (int16 -1).
func AppendCopyTrailer(dst []byte) []byte { return append(dst, 0xff, 0xff) }

// AppendTupleStart appends the int16 field count that starts a binary tuple.
func AppendTupleStart(dst []byte, fields int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(fields))
}

// AppendNullField appends a NULL cell (length -1).
func AppendNullField(dst []byte) []byte { return append(dst, 0xff, 0xff, 0xff, 0xff) }

// AppendBytesField appends a cell holding b verbatim (text, varchar, bytea,
// and any pre-encoded value).
func AppendBytesField(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// AppendStringField appends a cell holding s verbatim.
func AppendStringField(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// textEscapes maps the bytes COPY text format escapes to their escape letter.
var textEscapes = [256]byte{'\\': '\\', '\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f', '\v': 'v'}

// AppendCopyTextValue appends v escaped for a COPY text-format field
// (backslash, tab, newline and the other control escapes). NULL is written
// by the caller as `\N` (or the COPY's NULL string).
func AppendCopyTextValue(dst, v []byte) []byte {
	for _, c := range v {
		if e := textEscapes[c]; e != 0 {
			dst = append(dst, '\\', e)
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// BinaryCopyReader reads tuples from a binary COPY FROM stream.
type BinaryCopyReader struct {
	r      *bufio.Reader
	header bool
	cells  [][]byte
	buf    []byte
	done   bool
	// MaxFieldLen bounds one cell, so a hostile length cannot make the
	// reader allocate gigabytes. Zero means 64 MiB.
	MaxFieldLen int
}

// NewBinaryCopyReader returns a reader over r, which yields the
// concatenated CopyData payloads (pgwire's CopyIn is such a reader).
func NewBinaryCopyReader(r io.Reader) *BinaryCopyReader {
	return &BinaryCopyReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the cells of the next tuple (nil = NULL). The slices are only
// valid until the next call. It returns io.EOF after the trailer (or at a
// clean end of stream between tuples).
func (b *BinaryCopyReader) Next() ([][]byte, error) {
	if b.done {
		return nil, io.EOF
	}
	if !b.header {
		var h [19]byte
		if _, err := io.ReadFull(b.r, h[:]); err != nil {
			return nil, fmt.Errorf("%w: reading header: %v", ErrCopyFormat, err)
		}
		if string(h[:11]) != CopyBinarySignature {
			return nil, fmt.Errorf("%w: bad binary COPY signature", ErrCopyFormat)
		}
		if flags := binary.BigEndian.Uint32(h[11:]); flags&0xffff0000 != 0 {
			return nil, fmt.Errorf("%w: unrecognized critical flags in COPY file header", ErrCopyFormat)
		}
		ext := binary.BigEndian.Uint32(h[15:])
		if ext > 1<<20 {
			return nil, fmt.Errorf("%w: header extension too long", ErrCopyFormat)
		}
		if _, err := b.r.Discard(int(ext)); err != nil {
			return nil, fmt.Errorf("%w: reading header extension: %v", ErrCopyFormat, err)
		}
		b.header = true
	}
	var n [2]byte
	if _, err := io.ReadFull(b.r, n[:]); err != nil {
		if err == io.EOF {
			b.done = true
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: reading field count: %v", ErrCopyFormat, err)
	}
	count := int16(binary.BigEndian.Uint16(n[:]))
	if count == -1 {
		b.done = true
		return nil, io.EOF
	}
	if count < 0 {
		return nil, fmt.Errorf("%w: negative field count %d", ErrCopyFormat, count)
	}
	maxField := b.MaxFieldLen
	if maxField <= 0 {
		maxField = 64 << 20
	}
	b.cells = b.cells[:0]
	b.buf = b.buf[:0]
	type span struct{ off, n int }
	var spans [64]span
	sp := spans[:0]
	for i := 0; i < int(count); i++ {
		var l [4]byte
		if _, err := io.ReadFull(b.r, l[:]); err != nil {
			return nil, fmt.Errorf("%w: reading field length: %v", ErrCopyFormat, err)
		}
		ln := int32(binary.BigEndian.Uint32(l[:]))
		if ln == -1 {
			sp = append(sp, span{-1, 0})
			continue
		}
		if ln < 0 || int(ln) > maxField {
			return nil, fmt.Errorf("%w: field length %d out of range", ErrCopyFormat, ln)
		}
		off := len(b.buf)
		b.buf = slices.Grow(b.buf, int(ln))[:off+int(ln)]
		if _, err := io.ReadFull(b.r, b.buf[off:]); err != nil {
			return nil, fmt.Errorf("%w: reading field: %v", ErrCopyFormat, err)
		}
		sp = append(sp, span{off, int(ln)})
	}
	for _, s := range sp {
		b.cells = append(b.cells, cell(b.buf, s.off, s.n))
	}
	return b.cells, nil
}

// TextCopyReader reads rows of a text-format COPY FROM stream: fields split
// by Delimiter, backslash escapes decoded, the Null string (unescaped, as
// PostgreSQL compares it before de-escaping) read as NULL, and `\.` alone on
// a line ending the data.
type TextCopyReader struct {
	r         *bufio.Reader
	Delimiter byte
	Null      string
	cells     [][]byte
	buf       []byte
	done      bool
	// MaxLineLen bounds one line. Zero means 64 MiB.
	MaxLineLen int
}

// NewTextCopyReader returns a reader with PostgreSQL's defaults: tab
// delimiter and `\N` for NULL.
func NewTextCopyReader(r io.Reader) *TextCopyReader {
	return &TextCopyReader{r: bufio.NewReaderSize(r, 64<<10), Delimiter: '\t', Null: `\N`}
}

// Next returns the cells of the next row (nil = NULL), valid until the
// next call, or io.EOF at the end of the data.
func (t *TextCopyReader) Next() ([][]byte, error) {
	if t.done {
		return nil, io.EOF
	}
	maxLine := t.MaxLineLen
	if maxLine <= 0 {
		maxLine = 64 << 20
	}
	var line []byte
	for {
		chunk, err := t.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrCopyFormat, maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if len(line) == 0 {
				t.done = true
				return nil, io.EOF
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("pgcopy: reading COPY text: %w", err)
		}
		break
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if string(line) == `\.` {
		t.done = true
		return nil, io.EOF
	}
	t.cells = t.cells[:0]
	t.buf = t.buf[:0]
	type span struct{ off, n int }
	var spans [64]span
	sp := spans[:0]
	for field := range bytes.SplitSeq(line, []byte{t.Delimiter}) {
		if string(field) == t.Null {
			sp = append(sp, span{-1, 0})
			continue
		}
		off := len(t.buf)
		var err error
		t.buf, err = unescapeCopyText(t.buf, field)
		if err != nil {
			return nil, err
		}
		sp = append(sp, span{off, len(t.buf) - off})
	}
	for _, s := range sp {
		t.cells = append(t.cells, cell(t.buf, s.off, s.n))
	}
	return t.cells, nil
}

// unescapeCopyText decodes COPY text escapes: \b \f \n \r \t \v, \digits
// (octal, up to 3), \xhh (hex, up to 2), and \c for any other c.
func unescapeCopyText(dst, f []byte) ([]byte, error) {
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(f) {
			return dst, fmt.Errorf("%w: trailing backslash", ErrCopyFormat)
		}
		c = f[i]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'v':
			dst = append(dst, '\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(c - '0')
			for k := 0; k < 2 && i+1 < len(f) && f[i+1] >= '0' && f[i+1] <= '7'; k++ {
				i++
				v = v*8 + int(f[i]-'0')
			}
			dst = append(dst, byte(v))
		case 'x':
			v, n := 0, 0
			for n < 2 && i+1 < len(f) && isHex(f[i+1]) {
				i++
				v = v*16 + hexVal(f[i])
				n++
			}
			if n == 0 {
				dst = append(dst, 'x')
			} else {
				dst = append(dst, byte(v))
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	default:
		return int(c-'A') + 10
	}
}

// emptyCell is a non-NULL empty value: a zero-length slice of a nil
// buffer would be nil, which means NULL.
var emptyCell = []byte{}

// cell returns buf[off:off+n], nil for off < 0 (NULL).
func cell(buf []byte, off, n int) []byte {
	switch {
	case off < 0:
		return nil
	case n == 0:
		return emptyCell
	}
	return buf[off : off+n : off+n]
}
