package datum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// Row is the compact encoding of one table row: how the resident catalog
// holds rows in memory and how the keyspace stores them. Layout:
//
//	uvarint  column count n
//	[(n+7)/8]byte  NULL bitmap, bit i set when column i is NULL
//	for each non-NULL column, by kind:
//	  bool                      1 byte
//	  int, date, time, ts, tid  zig-zag varint
//	  float                     8 bytes, IEEE-754 bits, little endian
//	  interval                  zig-zag varint micros, zig-zag varint months<<32|days
//	  timetz                    zig-zag varint micros, zig-zag varint zone (seconds west)
//	  uuid                      16 bytes
//	  text, bytes, numeric, array  uvarint length, then the bytes
//
// The encoding needs the column types to decode (rows of one table share
// them). A row with fewer columns than its table has was written before an
// ALTER TABLE ADD COLUMN; its missing trailing columns read as NULL.
//
// Invariant: a Row's bytes are immutable once encoded. Decoded text values
// alias the row's memory instead of copying it, which is what makes full
// table scans allocation-free.
type Row []byte

// ErrBadRow reports a row encoding that does not match its column types.
var ErrBadRow = errors.New("datum: malformed row encoding")

// EncodeRow appends the encoding of vals (typed by types) to dst.
func EncodeRow(dst []byte, types []Type, vals []Value) []byte {
	n := len(vals)
	dst = binary.AppendUvarint(dst, uint64(n))
	bm := len(dst)
	for i := 0; i < (n+7)/8; i++ {
		dst = append(dst, 0)
	}
	for i, v := range vals {
		if v.IsNull() {
			dst[bm+i/8] |= 1 << (i % 8)
			continue
		}
		switch kindOf(types[i], v) {
		case KindBool:
			dst = append(dst, byte(v.I&1))
		case KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.I))
		case KindInterval, KindTimeTZ:
			dst = binary.AppendVarint(dst, v.I)
			dst = binary.AppendVarint(dst, v.J)
		case KindUUID:
			var u [16]byte
			copy(u[:], v.S)
			dst = append(dst, u[:]...)
		case KindText, KindBytes, KindNumeric, KindArray:
			dst = binary.AppendUvarint(dst, uint64(len(v.S)))
			dst = append(dst, v.S...)
		default:
			dst = binary.AppendVarint(dst, v.I)
		}
	}
	return dst
}

// kindOf is the storage kind of a value in a column: the column's kind, so
// that a row's encoding is determined by its table, not by how a value was
// produced.
func kindOf(t Type, v Value) Kind {
	if k := t.Kind(); k != KindNull {
		return k
	}
	return v.K
}

// Len returns the number of columns encoded in r.
func (r Row) Len() (int, error) {
	n, k := binary.Uvarint(r)
	if k <= 0 || n > math.MaxInt32 {
		return 0, ErrBadRow
	}
	return int(n), nil
}

// Decode decodes r into dst (reused when large enough), one Value per type.
// Text values alias r.
func (r Row) Decode(types []Type, dst []Value) ([]Value, error) {
	if cap(dst) >= len(types) {
		dst = dst[:len(types)]
	} else {
		dst = make([]Value, len(types))
	}
	// A direct loop rather than decode's callback: Decode runs for every
	// row of every scan, and the per-cell indirect call showed in profiles.
	n, p, bm, err := r.header()
	if err != nil {
		return dst, err
	}
	for i := range types {
		if i >= n || bm[i>>3]&(1<<(i&7)) != 0 {
			dst[i] = Null
			continue
		}
		if p, err = r.decodeInto(&dst[i], p, types[i], i); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// Column decodes only column i.
func (r Row) Column(types []Type, i int) (Value, error) {
	var out Value
	err := r.decode(types[:i+1], func(j int, v Value) bool {
		if j == i {
			out = v
			return false
		}
		return true
	})
	return out, err
}

// header parses the column count and the NULL bitmap, returning the count,
// the position of the first value and the bitmap.
func (r Row) header() (n, p int, bm []byte, err error) {
	n64, k := binary.Uvarint(r)
	if k <= 0 {
		return 0, 0, nil, ErrBadRow
	}
	n = int(n64)
	p = k
	bmLen := (n + 7) / 8
	if n64 > math.MaxInt32 || p+bmLen > len(r) {
		return 0, 0, nil, ErrBadRow
	}
	return n, p + bmLen, r[p : p+bmLen], nil
}

// decode calls fn for each column of types in order (missing trailing
// columns as NULL) until fn returns false.
func (r Row) decode(types []Type, fn func(int, Value) bool) error {
	n, p, bm, err := r.header()
	if err != nil {
		return err
	}
	for i := 0; i < len(types); i++ {
		if i >= n || bm[i/8]&(1<<(i%8)) != 0 {
			if !fn(i, Null) {
				return nil
			}
			continue
		}
		var v Value
		if p, err = r.decodeInto(&v, p, types[i], i); err != nil {
			return err
		}
		if !fn(i, v) {
			return nil
		}
	}
	return nil
}

// decodeInto decodes the non-NULL value of column i, of type t, stored at
// r[p:], into *v and returns the position after it. It writes v in place:
// returning a Value (40 bytes) per cell cost more than decoding it.
func (r Row) decodeInto(v *Value, p int, t Type, i int) (int, error) {
	kind := t.Kind()
	*v = Value{K: kind}
	switch kind {
	case KindBool:
		if p >= len(r) {
			return p, ErrBadRow
		}
		v.I = int64(r[p] & 1)
		p++
	case KindFloat:
		if p+8 > len(r) {
			return p, ErrBadRow
		}
		v.I = int64(binary.LittleEndian.Uint64(r[p:]))
		p += 8
	case KindInterval, KindTimeTZ:
		a, k1 := binary.Varint(r[p:])
		if k1 <= 0 {
			return p, ErrBadRow
		}
		b, k2 := binary.Varint(r[p+k1:])
		if k2 <= 0 {
			return p, ErrBadRow
		}
		v.I, v.J = a, b
		p += k1 + k2
	case KindUUID:
		if p+16 > len(r) {
			return p, ErrBadRow
		}
		v.S = unsafe.String(&r[p], 16)
		p += 16
	case KindText, KindBytes, KindNumeric, KindArray:
		l, k1 := binary.Uvarint(r[p:])
		if k1 <= 0 || l > uint64(len(r)-p-k1) {
			return p, ErrBadRow
		}
		p += k1
		if l > 0 {
			v.S = unsafe.String(&r[p], int(l))
		}
		p += int(l)
	case KindNull:
		return p, fmt.Errorf("%w: column %d has unknown type %d", ErrBadRow, i, t.OID)
	default:
		var k1 int
		if p < len(r) && r[p] < 0x80 {
			// One-byte varint, the common case (ids, snapshots, counts).
			u := int64(r[p])
			v.I, k1 = u>>1^-(u&1), 1
		} else if v.I, k1 = binary.Varint(r[p:]); k1 <= 0 {
			return p, ErrBadRow
		}
		p += k1
	}
	return p, nil
}

// Validate checks that r decodes under types and uses exactly its bytes;
// storage readers call it so that a corrupt value is an error, never a
// wrong row.
func (r Row) Validate(types []Type) error {
	_, err := r.DecodeCanonical(types, nil)
	return err
}

// errNonCanonical reports a row that decodes but is not the encoding
// EncodeRow gives its values.
var errNonCanonical = fmt.Errorf("%w: trailing or non-canonical bytes", ErrBadRow)

// DecodeCanonical decodes the columns r stores, at most len(types), into
// dst (reused when large enough), and checks that r is exactly the encoding
// EncodeRow gives those values: a value's bytes are as long as its
// canonical encoding (a varint one byte longer than needed decodes to the
// same value), no bitmap bit is set past the last column, a boolean is 0 or
// 1, and nothing follows the last value. It answers as Decode followed by
// comparing EncodeRow's bytes with r, without encoding. Text values alias r.
func (r Row) DecodeCanonical(types []Type, dst []Value) ([]Value, error) {
	n64, k := binary.Uvarint(r)
	if k <= 0 || n64 > math.MaxInt32 {
		return dst[:0], ErrBadRow
	}
	if n64 > uint64(len(types)) {
		return dst[:0], fmt.Errorf("%w: %d columns stored, table has %d", ErrBadRow, n64, len(types))
	}
	n := int(n64)
	bmLen := (n + 7) / 8
	if k+bmLen > len(r) {
		return dst[:0], ErrBadRow
	}
	if k != uvarintLen(n64) {
		return dst[:0], errNonCanonical
	}
	bm := r[k : k+bmLen]
	if n%8 != 0 && bm[bmLen-1]>>(n%8) != 0 {
		return dst[:0], errNonCanonical
	}
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]Value, n)
	}
	p := k + bmLen
	for i := range n {
		if bm[i>>3]&(1<<(i&7)) != 0 {
			dst[i] = Null
			continue
		}
		start := p
		var err error
		if p, err = r.decodeInto(&dst[i], p, types[i], i); err != nil {
			return dst, err
		}
		if !canonicalLen(r[start], p-start, &dst[i]) {
			return dst, errNonCanonical
		}
	}
	if p != len(r) {
		return dst, errNonCanonical
	}
	return dst, nil
}

// canonicalLen reports whether a value v decoded from size bytes, the
// first of which is first, was stored as EncodeRow stores it.
func canonicalLen(first byte, size int, v *Value) bool {
	switch v.K {
	case KindBool:
		return first <= 1
	case KindFloat, KindUUID:
		return true // fixed sizes, any bits
	case KindInterval, KindTimeTZ:
		return size == varintLen(v.I)+varintLen(v.J)
	case KindText, KindBytes, KindNumeric, KindArray:
		return size == uvarintLen(uint64(len(v.S)))+len(v.S)
	default:
		return size == varintLen(v.I)
	}
}

// uvarintLen is the length of binary.AppendUvarint's encoding of u.
func uvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

// varintLen is the length of binary.AppendVarint's encoding of x.
func varintLen(x int64) int { return uvarintLen(uint64(x)<<1 ^ uint64(x>>63)) }
