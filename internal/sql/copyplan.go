package sql

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// The binary COPY fast path. DuckDB reads the whole of each catalog table
// with COPY (SELECT "c1", … FROM t) TO STDOUT (FORMAT binary); at the
// target size that is millions of rows. The general path decodes every
// stored datum.Row into []datum.Value and re-encodes each value into
// PostgreSQL's binary form. A copyPlan instead goes from the stored bytes to
// the tuple bytes directly: it is built once per statement (per selected
// column: its table position and an output op chosen from its type) and
// per row it walks the row encoding once, noting where each selected value
// lies, then writes the tuple.
//
// INVARIANT: for every row, the plan's bytes equal what copyValues writes
// for the same row decoded with datum.Row.Decode (copyplan_test.go checks
// this by property over random tables and rows). Anything the plan does not
// reproduce exactly — a type without an op here, a table whose stored
// types differ from its definition — makes newCopyPlan refuse, and the
// statement takes the general path.

// encodedScan is a scan over a table's rows in their stored encoding, in
// ctid order, until fn returns false. Row bytes are valid only during fn.
type encodedScan func(fn func(ctid int64, r datum.Row) bool)

// encodedTable is a table whose rows are held in datum.Row encoding (a lake
// table backed by the catalog). EncodedRows returns the types the rows are
// encoded with and a scan over them; ok is false for a table that does not
// hold encoded rows (a temp table).
//
// NB: *memcat.Table is checked for this method at run time; until memcat
// provides it, every COPY takes the general path.
type encodedTable interface {
	EncodedRows() (types []datum.Type, scan func(fn func(ctid int64, r datum.Row) bool), ok bool)
	// EncodedChunks is EncodedRows a B-tree node at a time, for a table
	// that can no longer change (the COPY cache's; copycache.go).
	EncodedChunks() (types []datum.Type, chunks func(fn func(memcat.Chunk) bool), ok bool)
}

// copyOp is how one output column is written.
type copyOp uint8

const (
	opBool    copyOp = iota + 1 // 1 byte, 0 or 1
	opInt2                      // stored zig-zag varint, sent as 2 bytes big endian
	opInt4                      // … 4 bytes (int4, oid)
	opInt8                      // … 8 bytes (int8, time, timestamp, timestamptz)
	opDate                      // … 4 bytes (days since 2000-01-01)
	opFloat4                    // stored float64 bits little endian, sent as float4 big endian
	opFloat8                    // stored float64 bits little endian, sent big endian
	opBytes                     // stored uvarint length + bytes, sent verbatim
	opUUID                      // 16 bytes verbatim
	opNumeric                   // stored canonical decimal text, sent in numeric's binary form
	opCTID                      // the row's ctid, sent as tid (uint32 block, uint16 offset)
)

// opFor is the op that writes a stored value of type t exactly as
// datum.AppendBinary does, or 0 when the plan has none.
func opFor(t datum.Type) copyOp {
	switch t.OID {
	case datum.OIDBool:
		return opBool
	case datum.OIDInt2:
		return opInt2
	case datum.OIDInt4, datum.OIDOID:
		return opInt4
	case datum.OIDInt8, datum.OIDTime, datum.OIDTimestamp, datum.OIDTimestampTZ:
		return opInt8
	case datum.OIDDate:
		return opDate
	case datum.OIDFloat4:
		return opFloat4
	case datum.OIDFloat8:
		return opFloat8
	case datum.OIDText, datum.OIDVarchar, datum.OIDName, datum.OIDBPChar, datum.OIDJSON, datum.OIDBytea:
		return opBytes
	case datum.OIDUUID:
		return opUUID
	case datum.OIDNumeric:
		return opNumeric
	}
	return 0
}

// storedKind is how a table column is laid out in the row encoding (see
// datum.Row), which is all the walk over a row needs to step past it.
type storedKind uint8

const (
	skBool     storedKind = iota + 1 // 1 byte
	skVarint                         // one zig-zag varint
	skFloat                          // 8 bytes
	skTwoVarin                       // two zig-zag varints (interval, timetz)
	skUUID                           // 16 bytes
	skLen                            // uvarint length, then the bytes
)

func storedKindOf(k datum.Kind) storedKind {
	switch k {
	case datum.KindBool:
		return skBool
	case datum.KindFloat:
		return skFloat
	case datum.KindInterval, datum.KindTimeTZ:
		return skTwoVarin
	case datum.KindUUID:
		return skUUID
	case datum.KindText, datum.KindBytes, datum.KindNumeric, datum.KindArray:
		return skLen
	case datum.KindInt, datum.KindDate, datum.KindTime, datum.KindTimestamp, datum.KindTimestampTZ, datum.KindTID:
		return skVarint
	}
	return 0
}

// cellRef is where one stored value lies after a walk over a row: for
// varint kinds its value in v, for the others its bytes at r[off:off+n].
type cellRef struct {
	null bool
	v    int64
	off  int32
	n    int32
}

// outCol is one output column of the plan.
type outCol struct {
	src int // table column position; -1 for ctid
	op  copyOp
	typ datum.Type
}

// rowWalker finds where each column's value lies in a stored row without
// decoding it (walk). Not safe for concurrent use.
type rowWalker struct {
	stored []storedKind // per table column, in table order
	cells  []cellRef    // per table column, filled by walk
}

// newRowWalker returns a walker for rows encoded with types; ok is false
// when a type has no stored kind the walk knows.
func newRowWalker(types []datum.Type) (rowWalker, bool) {
	w := rowWalker{stored: make([]storedKind, len(types)), cells: make([]cellRef, len(types))}
	for i, t := range types {
		if w.stored[i] = storedKindOf(t.Kind()); w.stored[i] == 0 {
			return rowWalker{}, false
		}
	}
	return w, true
}

// copyPlan writes binary COPY tuples straight from stored rows. It is
// built per statement and is not safe for concurrent use.
type copyPlan struct {
	rowWalker
	name   string // the table, for errors
	out    []outCol
	fields [2]byte // the tuple's field count, big endian
	// tmpl is the memoized plan this one was copied from (forUse), which
	// names it in the COPY cache; nil for a plan not memoized.
	tmpl *copyPlan
}

// forUse returns a copy of a memoized plan with its own cells (the scratch
// walk fills); everything else is read-only and shared.
func (p *copyPlan) forUse() *copyPlan {
	q := *p
	q.cells = make([]cellRef, len(p.stored))
	q.tmpl = p
	return &q
}

// newCopyPlan returns a plan for the output columns cols of a table whose
// definition has defTypes and whose rows are encoded with stored; idx[j]
// is output column j's position in the table, len(defTypes) for ctid. ok is
// false when the plan would not reproduce the general path exactly.
func newCopyPlan(name string, defTypes, stored []datum.Type, cols []colInfo, idx []int) (*copyPlan, bool) {
	if len(stored) != len(defTypes) || len(cols) != len(idx) || len(cols) > math.MaxInt16 {
		return nil, false
	}
	for i, t := range stored {
		if t != defTypes[i] {
			return nil, false
		}
	}
	// Every column is walked, selected or not, because a row the general
	// path rejects (an unknown type, bad bytes) must be rejected here too.
	w, ok := newRowWalker(stored)
	if !ok {
		return nil, false
	}
	p := &copyPlan{rowWalker: w, name: name}
	binary.BigEndian.PutUint16(p.fields[:], uint16(len(cols)))
	for j, i := range idx {
		t := outType(cols[j].typ)
		if i == len(stored) {
			if t != datum.TID {
				return nil, false
			}
			p.out = append(p.out, outCol{src: -1, op: opCTID, typ: t})
			continue
		}
		if i < 0 || i > len(stored) || t != stored[i] {
			return nil, false
		}
		op := opFor(t)
		if op == 0 {
			return nil, false
		}
		p.out = append(p.out, outCol{src: i, op: op, typ: t})
	}
	return p, true
}

// walk parses r as datum.Row.Decode does, recording where each value lies
// in w.cells. It fails exactly when Decode fails. Columns past the row's
// stored count read as NULL (rows written before an ALTER TABLE ADD
// COLUMN).
func (w *rowWalker) walk(r datum.Row) error { return w.walkTo(r, len(w.stored)-1) }

// walkTo is walk stopping after column last: the cells after it are left
// as they were (a prefilter needs only the columns it compares).
func (w *rowWalker) walkTo(r datum.Row, last int) error {
	n64, k := uvarint(r)
	if k <= 0 || n64 > math.MaxInt32 {
		return datum.ErrBadRow
	}
	n := int(n64)
	pos := k
	bmLen := (n + 7) / 8
	if pos+bmLen > len(r) {
		return datum.ErrBadRow
	}
	bm := r[pos : pos+bmLen]
	pos += bmLen
	cells := w.cells
	for i, sk := range w.stored[:last+1] {
		if i >= n || bm[i>>3]&(1<<(i&7)) != 0 {
			cells[i].null = true
			continue
		}
		c := &cells[i]
		c.null = false
		switch sk {
		case skVarint:
			x, k1 := varint(r[pos:])
			if k1 <= 0 {
				return datum.ErrBadRow
			}
			c.v = x
			pos += k1
		case skBool:
			if pos >= len(r) {
				return datum.ErrBadRow
			}
			c.v = int64(r[pos] & 1)
			pos++
		case skFloat:
			if pos+8 > len(r) {
				return datum.ErrBadRow
			}
			c.off, c.n = int32(pos), 8
			pos += 8
		case skUUID:
			if pos+16 > len(r) {
				return datum.ErrBadRow
			}
			c.off, c.n = int32(pos), 16
			pos += 16
		case skLen:
			l, k1 := uvarint(r[pos:])
			if k1 <= 0 || l > uint64(len(r)-pos-k1) {
				return datum.ErrBadRow
			}
			pos += k1
			c.off, c.n = int32(pos), int32(l)
			pos += int(l)
		case skTwoVarin:
			_, k1 := binary.Varint(r[pos:])
			if k1 <= 0 {
				return datum.ErrBadRow
			}
			_, k2 := binary.Varint(r[pos+k1:])
			if k2 <= 0 {
				return datum.ErrBadRow
			}
			pos += k1 + k2
		}
	}
	return nil
}

// varint is binary.Varint (zig-zag) over uvarint.
func varint(b []byte) (int64, int) {
	u, k := uvarint(b)
	return int64(u>>1) ^ -int64(u&1), k
}

// uvarint is binary.Uvarint, fast for what a catalog stores: a one-byte
// value is read directly, and one of up to eight bytes, when eight bytes
// are there to load, without a loop — ids, sizes and row ids take two to
// five bytes, a different number from row to row, on which the loop's exit
// branch mispredicts (walking DuckLake's data-file rows ≈ 4 % faster in an
// A/B interleaved within one process). Anything else — a longer value, the last bytes of a row,
// malformed input — is binary.Uvarint's, errors included.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		// The value's last byte is the first without its top bit.
		if stop := ^x & 0x8080808080808080; stop != 0 {
			k := bits.TrailingZeros64(stop)/8 + 1
			x &= ^uint64(0) >> (64 - 8*k) // the value's k bytes
			// Gather the seven low bits of each byte.
			v := x&0x7f | x>>1&(0x7f<<7) | x>>2&(0x7f<<14) | x>>3&(0x7f<<21) |
				x>>4&(0x7f<<28) | x>>5&(0x7f<<35) | x>>6&(0x7f<<42) | x>>7&(0x7f<<49)
			return v, k
		}
	}
	return binary.Uvarint(b)
}

// appendTuple appends the binary tuple of the row last walked (r, at
// ctid). Like appendBinaryTuple, on an encoding error the tuple is still
// complete and the first error is returned with it.
func (p *copyPlan) appendTuple(dst []byte, r datum.Row, ctid int64) ([]byte, error) {
	var encErr error
	dst = append(dst, p.fields[0], p.fields[1])
	for _, oc := range p.out {
		if oc.op == opCTID {
			dst = append(dst, 0, 0, 0, 6)
			dst = binary.BigEndian.AppendUint32(dst, uint32(ctid>>16))
			dst = binary.BigEndian.AppendUint16(dst, uint16(ctid))
			continue
		}
		c := &p.cells[oc.src]
		if c.null {
			dst = append(dst, 0xff, 0xff, 0xff, 0xff)
			continue
		}
		switch oc.op {
		case opInt8:
			dst = append(dst, 0, 0, 0, 8)
			dst = binary.BigEndian.AppendUint64(dst, uint64(c.v))
		case opBytes:
			dst = binary.BigEndian.AppendUint32(dst, uint32(c.n))
			dst = append(dst, r[c.off:c.off+c.n]...)
		case opInt4:
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, uint32(c.v))
		case opBool:
			dst = append(dst, 0, 0, 0, 1, byte(c.v))
		case opInt2:
			dst = append(dst, 0, 0, 0, 2)
			dst = binary.BigEndian.AppendUint16(dst, uint16(c.v))
		case opDate:
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, uint32(int32(c.v)))
		case opFloat8:
			dst = append(dst, 0, 0, 0, 8)
			dst = binary.BigEndian.AppendUint64(dst, binary.LittleEndian.Uint64(r[c.off:]))
		case opFloat4:
			f := math.Float64frombits(binary.LittleEndian.Uint64(r[c.off:]))
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(f)))
		case opUUID:
			dst = append(dst, 0, 0, 0, 16)
			dst = append(dst, r[c.off:c.off+16]...)
		case opNumeric:
			// Numeric is rare in the catalog; its text-to-binary
			// conversion is datum's own, over the stored text (aliased,
			// not copied: row bytes are immutable).
			at := len(dst)
			dst = append(dst, 0, 0, 0, 0)
			var s string
			if c.n > 0 {
				s = unsafe.String(&r[c.off], int(c.n))
			}
			var e error
			dst, e = datum.AppendBinary(dst, oc.typ, datum.Value{K: datum.KindNumeric, S: s})
			if e != nil && encErr == nil {
				encErr = e
			}
			binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		}
	}
	return dst, encErr
}

// copyRows writes every row of scan to co as a binary tuple. A row that
// does not decode ends the COPY with an error before any of its bytes are
// written, as in the general path.
func (p *copyPlan) copyRows(co rowAppender, scan encodedScan) error {
	// One tupleWriter and one method value for the whole COPY: a closure
	// per row would escape through the rowAppender interface and cost an
	// allocation per row.
	w := &tupleWriter{p: p}
	appendFn := w.append
	var err error
	scan(func(ctid int64, r datum.Row) bool {
		err = p.sendRow(co, w, appendFn, ctid, r)
		return err == nil
	})
	return err
}

// sendRow writes row r at ctid to co as a binary tuple through w, whose
// append method appendFn is. A row that does not decode is not written.
func (p *copyPlan) sendRow(co rowAppender, w *tupleWriter, appendFn func([]byte) []byte, ctid int64, r datum.Row) error {
	if err := p.walk(r); err != nil {
		return rowError(p.name, ctid, err)
	}
	w.r, w.ctid, w.err = r, ctid, nil
	aerr := co.AppendRow(appendFn)
	if w.err != nil {
		return w.err
	}
	return aerr
}

// rowError is the error of a stored row of table name that does not decode.
func rowError(name string, ctid int64, err error) error {
	return fmt.Errorf("%s row (%d,%d): %w", name, uint64(ctid)>>16, uint16(ctid), err)
}

// tupleWriter appends the tuple of the row last walked.
type tupleWriter struct {
	p    *copyPlan
	r    datum.Row
	ctid int64
	err  error // the tuple's encoding error, if any
}

func (w *tupleWriter) append(dst []byte) []byte {
	dst, w.err = w.p.appendTuple(dst, w.r, w.ctid)
	return dst
}
