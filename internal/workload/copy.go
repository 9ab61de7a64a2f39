package workload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// PostgreSQL's binary COPY format, the encoding DuckDB's postgres extension
// uses both to stream catalog tables out (`COPY (SELECT …) TO STDOUT (FORMAT
// "binary")`) and to load rows in (`COPY "s"."t" FROM STDIN (FORMAT BINARY)`).
//
//	header  = "PGCOPY\n\377\r\n\0" flags:int32 extlen:int32 ext[extlen]
//	tuple   = nfields:int16 { len:int32 (-1 = NULL) bytes[len] }
//	trailer = int16(-1)

var copySignature = []byte("PGCOPY\n\377\r\n\x00")

var errCopyFormat = errors.New("workload: malformed binary COPY stream")

// decodeCopy splits a binary COPY stream into rows of raw field values; a
// NULL field is nil. The rows point into b.
func decodeCopy(b []byte) ([][][]byte, error) {
	rows, _, err := decodeCopyInto(b, nil, nil)
	return rows, err
}

// decodeCopyInto is decodeCopy appending the rows to rows and their fields
// to cells, both reusable buffers, and returning both.
func decodeCopyInto(b []byte, rows [][][]byte, cells [][]byte) ([][][]byte, [][]byte, error) {
	if len(b) < len(copySignature)+8 || !bytes.Equal(b[:len(copySignature)], copySignature) {
		return nil, nil, fmt.Errorf("%w: bad header", errCopyFormat)
	}
	p := len(copySignature) + 4
	ext := int(binary.BigEndian.Uint32(b[p:]))
	p += 4
	if ext < 0 || p+ext > len(b) {
		return nil, nil, fmt.Errorf("%w: bad header extension", errCopyFormat)
	}
	p += ext
	for {
		if p+2 > len(b) {
			return nil, nil, fmt.Errorf("%w: missing trailer", errCopyFormat)
		}
		n := int16(binary.BigEndian.Uint16(b[p:]))
		p += 2
		if n == -1 {
			return rows, cells, nil
		}
		if n < 0 {
			return nil, nil, fmt.Errorf("%w: field count %d", errCopyFormat, n)
		}
		start := len(cells)
		for range n {
			cells = append(cells, nil)
		}
		row := cells[start:len(cells):len(cells)]
		for i := range row {
			if p+4 > len(b) {
				return nil, nil, fmt.Errorf("%w: truncated field length", errCopyFormat)
			}
			l := int32(binary.BigEndian.Uint32(b[p:]))
			p += 4
			if l == -1 {
				continue
			}
			if l < 0 || p+int(l) > len(b) {
				return nil, nil, fmt.Errorf("%w: field length %d", errCopyFormat, l)
			}
			row[i] = b[p : p+int(l)]
			p += int(l)
		}
		rows = append(rows, row)
	}
}

// int8 decodes a binary BIGINT field; ok is false for NULL.
func int8(f []byte) (v int64, ok bool, err error) {
	if f == nil {
		return 0, false, nil
	}
	if len(f) != 8 {
		return 0, false, fmt.Errorf("%w: int8 field of %d bytes", errCopyFormat, len(f))
	}
	return int64(binary.BigEndian.Uint64(f)), true, nil
}

// copyEncoder builds a binary COPY FROM STDIN payload.
type copyEncoder struct{ buf bytes.Buffer }

func newCopyEncoder() *copyEncoder {
	e := &copyEncoder{}
	e.buf.Write(copySignature)
	e.buf.Write(make([]byte, 8)) // flags, header extension length
	return e
}

// cell is one field for copyEncoder.row: nil (NULL), int64, string, bool,
// time.Time (timestamptz) or [16]byte (uuid).
type cell = any

func (e *copyEncoder) row(cells ...cell) {
	var b [8]byte
	binary.BigEndian.PutUint16(b[:2], uint16(len(cells)))
	e.buf.Write(b[:2])
	for _, c := range cells {
		var field []byte
		switch v := c.(type) {
		case nil:
			binary.BigEndian.PutUint32(b[:4], 0xFFFFFFFF)
			e.buf.Write(b[:4])
			continue
		case int64:
			binary.BigEndian.PutUint64(b[:], uint64(v))
			field = b[:]
		case string:
			field = []byte(v)
		case bool:
			field = []byte{0}
			if v {
				field[0] = 1
			}
		case time.Time:
			// Microseconds since 2000-01-01 00:00:00 UTC.
			us := v.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
			binary.BigEndian.PutUint64(b[:], uint64(us))
			field = b[:]
		case [16]byte:
			field = v[:]
		default:
			panic(fmt.Sprintf("workload: copyEncoder: unsupported cell type %T", c)) // programming error
		}
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(field)))
		e.buf.Write(l[:])
		e.buf.Write(field)
	}
}

func (e *copyEncoder) bytes() []byte {
	out := append([]byte(nil), e.buf.Bytes()...)
	return append(out, 0xFF, 0xFF)
}
