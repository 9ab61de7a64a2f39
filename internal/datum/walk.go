package datum

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// RowWalker finds where each column's value lies in an encoded Row without
// decoding it: the binary COPY path writes tuples from the stored bytes, and
// scans compare integer columns, without building Values. Not safe for
// concurrent use; Clone gives another goroutine its own.
//
// INVARIANT: Walk fails exactly when Row.Decode fails, and a cell it
// records holds the value Decode would return (walk_test.go checks both by
// property).
type RowWalker struct {
	stored []storedKind // per table column, in table order
	// Cells are the columns' values after a walk, per table column.
	Cells []Cell
}

// Cell is where one stored value lies after a walk: for the varint-encoded
// kinds (int, date, time, timestamp, tid) and bool its value in V, for the
// others its bytes at r[Off:Off+N] (float64 bits little endian, UUID bytes,
// or a text, bytes, numeric or array payload). Interval and timetz are
// stepped over and record nothing.
type Cell struct {
	Null bool
	V    int64
	Off  int32
	N    int32
}

// storedKind is how a column is laid out in the row encoding, which is all
// the walk needs to step past it.
type storedKind uint8

const (
	skBool      storedKind = iota + 1 // 1 byte
	skVarint                          // one zig-zag varint
	skFloat                           // 8 bytes
	skTwoVarint                       // two zig-zag varints (interval, timetz)
	skUUID                            // 16 bytes
	skLen                             // uvarint length, then the bytes
)

func storedKindOf(k Kind) storedKind {
	switch k {
	case KindBool:
		return skBool
	case KindFloat:
		return skFloat
	case KindInterval, KindTimeTZ:
		return skTwoVarint
	case KindUUID:
		return skUUID
	case KindText, KindBytes, KindNumeric, KindArray:
		return skLen
	case KindInt, KindDate, KindTime, KindTimestamp, KindTimestampTZ, KindTID:
		return skVarint
	}
	return 0
}

// NewRowWalker returns a walker for rows encoded with types; ok is false
// when a type has no layout the walk knows.
func NewRowWalker(types []Type) (RowWalker, bool) {
	w := RowWalker{stored: make([]storedKind, len(types)), Cells: make([]Cell, len(types))}
	for i, t := range types {
		if w.stored[i] = storedKindOf(t.Kind()); w.stored[i] == 0 {
			return RowWalker{}, false
		}
	}
	return w, true
}

// Clone returns a walker over the same types with cells of its own.
func (w *RowWalker) Clone() RowWalker {
	return RowWalker{stored: w.stored, Cells: make([]Cell, len(w.stored))}
}

// Walk parses r as Row.Decode does, recording where each value lies in
// Cells. Columns past the row's stored count read as NULL (rows written
// before an ALTER TABLE ADD COLUMN).
func (w *RowWalker) Walk(r Row) error { return w.WalkTo(r, len(w.stored)-1) }

// WalkTo is Walk stopping after column last: the cells after it are left
// as they were (a filter needs only the columns it compares).
func (w *RowWalker) WalkTo(r Row, last int) error {
	n64, k := uvarint(r)
	if k <= 0 || n64 > math.MaxInt32 {
		return ErrBadRow
	}
	n := int(n64)
	pos := k
	bmLen := (n + 7) / 8
	if pos+bmLen > len(r) {
		return ErrBadRow
	}
	bm := r[pos : pos+bmLen]
	pos += bmLen
	cells := w.Cells
	for i, sk := range w.stored[:last+1] {
		if i >= n || bm[i>>3]&(1<<(i&7)) != 0 {
			cells[i].Null = true
			continue
		}
		c := &cells[i]
		c.Null = false
		switch sk {
		case skVarint:
			x, k1 := varint(r[pos:])
			if k1 <= 0 {
				return ErrBadRow
			}
			c.V = x
			pos += k1
		case skBool:
			if pos >= len(r) {
				return ErrBadRow
			}
			c.V = int64(r[pos] & 1)
			pos++
		case skFloat:
			if pos+8 > len(r) {
				return ErrBadRow
			}
			c.Off, c.N = int32(pos), 8
			pos += 8
		case skUUID:
			if pos+16 > len(r) {
				return ErrBadRow
			}
			c.Off, c.N = int32(pos), 16
			pos += 16
		case skLen:
			l, k1 := uvarint(r[pos:])
			if k1 <= 0 || l > uint64(len(r)-pos-k1) {
				return ErrBadRow
			}
			pos += k1
			c.Off, c.N = int32(pos), int32(l)
			pos += int(l)
		case skTwoVarint:
			_, k1 := binary.Varint(r[pos:])
			if k1 <= 0 {
				return ErrBadRow
			}
			_, k2 := binary.Varint(r[pos+k1:])
			if k2 <= 0 {
				return ErrBadRow
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
// A/B interleaved within one process). Anything else — a longer value, the
// last bytes of a row, malformed input — is binary.Uvarint's, errors
// included.
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
