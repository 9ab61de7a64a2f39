// Package pgvalue encodes and decodes PostgreSQL values in the text and
// binary wire formats, and frames rows for COPY.
//
// It is the helper the executor uses to produce cells for pgwire: a Codec
// turns Go values (and pgtype values) into the bytes of one cell, and the
// Append* functions build binary COPY tuples and text COPY lines directly in a
// caller's buffer, so a full-table COPY OUT need not allocate per cell.
//
// Text output follows what PostgreSQL prints with the session settings pgwire
// reports (DateStyle "ISO, MDY", TimeZone UTC, IntervalStyle postgres,
// bytea_output hex, extra_float_digits 1): timestamptz ends in "+00",
// intervals read "1 year 2 mons 3 days 04:05:06", floats use the shortest
// exact digits. Everything else is pgtype's encoding, which already matches.
package pgvalue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Format codes of the wire protocol.
const (
	TextFormat   int16 = 0
	BinaryFormat int16 = 1
)

// Type OIDs moraine serves (the pg_type oids of PostgreSQL; they must not change).
const (
	BoolOID        uint32 = 16
	ByteaOID       uint32 = 17
	CharOID        uint32 = 18 // "char", one byte
	NameOID        uint32 = 19
	Int8OID        uint32 = 20
	Int2OID        uint32 = 21
	Int4OID        uint32 = 23
	TextOID        uint32 = 25
	OIDOID         uint32 = 26
	TIDOID         uint32 = 27
	Float4OID      uint32 = 700
	Float8OID      uint32 = 701
	UnknownOID     uint32 = 705
	Int2ArrayOID   uint32 = 1005
	Int4ArrayOID   uint32 = 1007
	TextArrayOID   uint32 = 1009
	VarcharArrOID  uint32 = 1015
	Int8ArrayOID   uint32 = 1016
	BPCharOID      uint32 = 1042
	VarcharOID     uint32 = 1043
	DateOID        uint32 = 1082
	TimeOID        uint32 = 1083
	TimestampOID   uint32 = 1114
	TimestamptzOID uint32 = 1184
	IntervalOID    uint32 = 1186
	NumericOID     uint32 = 1700
	UUIDOID        uint32 = 2950
)

// ErrUnsupported is returned when a value cannot be encoded or decoded for
// the requested type and format.
var ErrUnsupported = errors.New("pgvalue: unsupported value")

// Codec encodes and decodes cells. It memoizes encode plans, so it is not
// safe for concurrent use: keep one per session (pgwire does).
type Codec struct {
	m *pgtype.Map
}

// NewCodec returns a Codec with PostgreSQL's built-in types registered.
func NewCodec() *Codec { return &Codec{m: pgtype.NewMap()} }

// Map exposes the underlying pgtype.Map, for callers that need pgtype's
// scanning API directly.
func (c *Codec) Map() *pgtype.Map { return c.m }

// Append appends the encoding of v as type oid in format to dst. A nil v
// (or a pgtype value that is not Valid) is NULL: dst is returned unchanged
// and null is true.
func (c *Codec) Append(dst []byte, oid uint32, format int16, v any) (out []byte, null bool, err error) {
	if v == nil {
		return dst, true, nil
	}
	if format == TextFormat {
		if out, ok, err := appendTextSpecial(dst, oid, v); ok || err != nil {
			if err != nil {
				return dst, false, err
			}
			return out, false, nil
		}
	}
	if dst == nil {
		// pgtype signals NULL with a nil result, so an empty value must
		// be appended to a non-nil slice to stay distinguishable.
		dst = make([]byte, 0, 32)
	}
	start := len(dst)
	nb, err := c.m.Encode(oid, format, v, dst)
	if err != nil {
		// A string is taken as the value's text form for any type (e.g.
		// "12345.678" for numeric, "(3,4)" for tid): parse it, then encode.
		s, isString := v.(string)
		if !isString || format != BinaryFormat {
			return dst, false, fmt.Errorf("pgvalue: encode %T as oid %d format %d: %w", v, oid, format, err)
		}
		parsed, perr := c.Decode(oid, TextFormat, []byte(s))
		if perr != nil {
			return dst, false, fmt.Errorf("pgvalue: encode %q as oid %d: %w", s, oid, perr)
		}
		if _, stillString := parsed.(string); stillString {
			return dst, false, fmt.Errorf("pgvalue: encode %T as oid %d format %d: %w", v, oid, format, err)
		}
		return c.Append(dst, oid, format, parsed)
	}
	if nb == nil {
		return dst[:start], true, nil
	}
	if format == TextFormat && oid == TimestamptzOID {
		nb = fixTimestamptzZone(nb, start)
	}
	if format == BinaryFormat {
		nb = canonicalBinary(oid, nb, start)
	}
	return nb, false, nil
}

// canonicalBinary rewrites pgtype's binary output, from offset start, into
// the exact bytes PostgreSQL sends where the two differ but mean the same:
// numeric without leading or trailing zero digit groups, empty arrays with
// zero dimensions, and the canonical NaN.
func canonicalBinary(oid uint32, b []byte, start int) []byte {
	v := b[start:]
	switch {
	case oid == NumericOID && len(v) >= 8:
		ndigits := int(int16(binary.BigEndian.Uint16(v)))
		weight := int16(binary.BigEndian.Uint16(v[2:]))
		if ndigits == 0 && len(v) == 8 {
			binary.BigEndian.PutUint16(v[2:], 0) // zero has weight 0
			return b
		}
		if ndigits < 0 || len(v) != 8+2*ndigits {
			return b
		}
		digits := v[8:]
		lead := 0
		for lead < ndigits && digits[2*lead] == 0 && digits[2*lead+1] == 0 {
			lead++
		}
		trail := ndigits
		for trail > lead && digits[2*trail-2] == 0 && digits[2*trail-1] == 0 {
			trail--
		}
		if lead == 0 && trail == ndigits {
			return b
		}
		n := trail - lead
		weight -= int16(lead)
		if n == 0 {
			weight = 0
		}
		copy(digits, digits[2*lead:2*trail])
		binary.BigEndian.PutUint16(v, uint16(n))
		binary.BigEndian.PutUint16(v[2:], uint16(weight))
		return b[:start+8+2*n]
	case isArrayOID(oid) && len(v) == 20 && binary.BigEndian.Uint32(v) == 1 && binary.BigEndian.Uint32(v[12:]) == 0:
		// One dimension of length 0: PostgreSQL writes an empty array as
		// zero dimensions.
		binary.BigEndian.PutUint32(v, 0)
		return b[:start+12]
	case oid == Float8OID && len(v) == 8 && math.IsNaN(math.Float64frombits(binary.BigEndian.Uint64(v))):
		binary.BigEndian.PutUint64(v, 0x7ff8000000000000)
	case oid == Float4OID && len(v) == 4 && math.IsNaN(float64(math.Float32frombits(binary.BigEndian.Uint32(v)))):
		binary.BigEndian.PutUint32(v, 0x7fc00000)
	}
	return b
}

func isArrayOID(oid uint32) bool {
	switch oid {
	case Int2ArrayOID, Int4ArrayOID, Int8ArrayOID, TextArrayOID, VarcharArrOID,
		1000, 1001, 1002, 1003, 1014, 1021, 1022, 1028, 1115, 1182, 1183, 1185, 1187, 1231, 2951:
		return true
	}
	return false
}

// AppendField appends one length-prefixed cell (int32 length, then the
// bytes; length -1 for NULL), the layout shared by DataRow and binary COPY.
func (c *Codec) AppendField(dst []byte, oid uint32, format int16, v any) ([]byte, error) {
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	out, null, err := c.Append(dst, oid, format, v)
	if err != nil {
		return dst[:lenAt], err
	}
	if null {
		binary.BigEndian.PutUint32(out[lenAt:], math.MaxUint32) // -1
		return out, nil
	}
	binary.BigEndian.PutUint32(out[lenAt:], uint32(len(out)-lenAt-4))
	return out, nil
}

// Decode decodes one cell (src nil = NULL, returned as nil) of type oid
// in format into a Go value: int16/int32/int64, float32/float64, bool,
// string, []byte, time.Time, [16]byte (uuid), pgtype.Numeric,
// pgtype.Interval, pgtype.TID, uint32 (oid), []any (arrays) and so on, as
// pgtype's DecodeValue gives them. An unknown oid decodes as text.
func (c *Codec) Decode(oid uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	t, ok := c.m.TypeForOID(oid)
	if !ok {
		if format == TextFormat {
			return string(src), nil
		}
		return nil, fmt.Errorf("%w: no decoder for oid %d in binary format", ErrUnsupported, oid)
	}
	v, err := t.Codec.DecodeValue(c.m, oid, format, src)
	if err != nil {
		return nil, fmt.Errorf("pgvalue: decode oid %d format %d: %w", oid, format, err)
	}
	return v, nil
}

// appendTextSpecial handles the text encodings where pgtype's output differs
// from PostgreSQL's under pgwire's session settings. ok reports whether it
// handled v.
func appendTextSpecial(dst []byte, oid uint32, v any) (out []byte, ok bool, err error) {
	switch oid {
	case Float8OID, Float4OID:
		var f float64
		bits := 64
		if oid == Float4OID {
			bits = 32
		}
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			return dst, false, nil
		}
		return AppendFloatText(dst, f, bits), true, nil
	case IntervalOID:
		switch x := v.(type) {
		case pgtype.Interval:
			if !x.Valid {
				return dst, false, nil
			}
			return AppendIntervalText(dst, x.Months, x.Days, x.Microseconds), true, nil
		case time.Duration:
			return AppendIntervalText(dst, 0, 0, x.Microseconds()), true, nil
		}
	}
	return dst, false, nil
}

// fixTimestamptzZone rewrites pgtype's "Z" zone suffix (from offset start)
// into PostgreSQL's "+00", which is what TimeZone=UTC prints.
func fixTimestamptzZone(b []byte, start int) []byte {
	s := b[start:]
	switch {
	case len(s) >= 1 && s[len(s)-1] == 'Z':
		return append(b[:len(b)-1], "+00"...)
	case len(s) >= 4 && string(s[len(s)-4:]) == "Z BC":
		return append(b[:len(b)-4], "+00 BC"...)
	}
	return b
}

// AppendFloatText appends f as PostgreSQL (12+) prints a float with the
// default extra_float_digits: the shortest exact digits, plain notation for
// decimal exponents in [-4, 15), exponent notation otherwise; "Infinity",
// "-Infinity" and "NaN" for the non-finite values.
func AppendFloatText(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	// The decimal exponent of the shortest representation decides the
	// notation; PostgreSQL switches at DBL_DIG (15) or FLT_DIG (6).
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
	e := bytes.LastIndexByte(dst[start:], 'e')
	exp, _ := strconv.Atoi(string(dst[start+e+1:]))
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp >= -4 && exp < limit {
		return strconv.AppendFloat(dst[:start], f, 'f', -1, bits)
	}
	return dst
}

// AppendIntervalText appends an interval in IntervalStyle "postgres", as
// PostgreSQL's EncodeInterval prints it: "1 year 2 mons -3 days +04:05:06.5".
func AppendIntervalText(dst []byte, months, days int32, micros int64) []byte {
	isZero, isBefore := true, false
	part := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !isZero {
			dst = append(dst, ' ')
		}
		if isBefore && v > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, v, 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if v != 1 {
			dst = append(dst, 's')
		}
		isBefore = v < 0
		isZero = false
	}
	part(int64(months/12), "year")
	part(int64(months%12), "mon")
	part(int64(days), "day")
	if isZero || micros != 0 {
		if !isZero {
			dst = append(dst, ' ')
		}
		abs := uint64(micros)
		if micros < 0 {
			dst = append(dst, '-')
			abs = -abs
		} else if isBefore {
			dst = append(dst, '+')
		}
		hours := abs / 3_600_000_000
		mins := abs / 60_000_000 % 60
		secs := abs / 1_000_000 % 60
		frac := abs % 1_000_000
		if hours < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendUint(dst, hours, 10)
		dst = append(dst, ':', byte('0'+mins/10), byte('0'+mins%10), ':', byte('0'+secs/10), byte('0'+secs%10))
		if frac != 0 {
			var digits [6]byte
			for i := 5; i >= 0; i-- {
				digits[i] = byte('0' + frac%10)
				frac /= 10
			}
			n := 6
			for n > 0 && digits[n-1] == '0' {
				n--
			}
			dst = append(dst, '.')
			dst = append(dst, digits[:n]...)
		}
	}
	return dst
}
