package sql

import (
	"encoding/binary"
	"fmt"
	"math"
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

// outCol is one output column of the plan.
type outCol struct {
	src int // table column position; -1 for ctid
	op  copyOp
	typ datum.Type
}

// copyPlan writes binary COPY tuples straight from stored rows. It is
// built per statement and is not safe for concurrent use.
type copyPlan struct {
	datum.RowWalker
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
	q := p.clone()
	q.tmpl = p
	return q
}

// clone returns a copy of p with its own cells, for another goroutine.
func (p *copyPlan) clone() *copyPlan {
	q := *p
	q.RowWalker = p.RowWalker.Clone()
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
	w, ok := datum.NewRowWalker(stored)
	if !ok {
		return nil, false
	}
	p := &copyPlan{RowWalker: w, name: name}
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
		c := &p.Cells[oc.src]
		if c.Null {
			dst = append(dst, 0xff, 0xff, 0xff, 0xff)
			continue
		}
		switch oc.op {
		case opInt8:
			dst = append(dst, 0, 0, 0, 8)
			dst = binary.BigEndian.AppendUint64(dst, uint64(c.V))
		case opBytes:
			dst = binary.BigEndian.AppendUint32(dst, uint32(c.N))
			dst = append(dst, r[c.Off:c.Off+c.N]...)
		case opInt4:
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, uint32(c.V))
		case opBool:
			dst = append(dst, 0, 0, 0, 1, byte(c.V))
		case opInt2:
			dst = append(dst, 0, 0, 0, 2)
			dst = binary.BigEndian.AppendUint16(dst, uint16(c.V))
		case opDate:
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, uint32(int32(c.V)))
		case opFloat8:
			dst = append(dst, 0, 0, 0, 8)
			dst = binary.BigEndian.AppendUint64(dst, binary.LittleEndian.Uint64(r[c.Off:]))
		case opFloat4:
			f := math.Float64frombits(binary.LittleEndian.Uint64(r[c.Off:]))
			dst = append(dst, 0, 0, 0, 4)
			dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(f)))
		case opUUID:
			dst = append(dst, 0, 0, 0, 16)
			dst = append(dst, r[c.Off:c.Off+16]...)
		case opNumeric:
			// Numeric is rare in the catalog; its text-to-binary
			// conversion is datum's own, over the stored text (aliased,
			// not copied: row bytes are immutable).
			at := len(dst)
			dst = append(dst, 0, 0, 0, 0)
			var s string
			if c.N > 0 {
				s = unsafe.String(&r[c.Off], int(c.N))
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
	if err := p.Walk(r); err != nil {
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
