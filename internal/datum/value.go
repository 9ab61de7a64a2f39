package datum

import (
	"bytes"
	"cmp"
	"math"
	"strings"
)

// Value is one SQL value. The zero Value is NULL. Which fields are used
// depends on the kind (see Kind); a Value does not carry its full Type (the
// column does), only its Kind, so that Values stay small.
type Value struct {
	K Kind
	I int64
	J int64
	S string
}

// Null is the SQL NULL.
var Null = Value{}

// Constructors.
func BoolValue(b bool) Value {
	if b {
		return Value{K: KindBool, I: 1}
	}
	return Value{K: KindBool}
}
func IntValue(i int64) Value              { return Value{K: KindInt, I: i} }
func FloatValue(f float64) Value          { return Value{K: KindFloat, I: int64(math.Float64bits(f))} }
func TextValue(s string) Value            { return Value{K: KindText, S: s} }
func BytesValue(b []byte) Value           { return Value{K: KindBytes, S: string(b)} }
func NumericValue(canonical string) Value { return Value{K: KindNumeric, S: canonical} }
func UUIDValue(u [16]byte) Value          { return Value{K: KindUUID, S: string(u[:])} }
func DateValue(days int32) Value          { return Value{K: KindDate, I: int64(days)} }
func TimeValue(micros int64) Value        { return Value{K: KindTime, I: micros} }
func TimestampValue(micros int64) Value   { return Value{K: KindTimestamp, I: micros} }
func TimestampTZValue(micros int64) Value {
	return Value{K: KindTimestampTZ, I: micros}
}

// TimeTZValue is a time of day with a zone; zoneWest is PostgreSQL's zone:
// seconds WEST of UTC (so +02:00 is -7200).
func TimeTZValue(micros int64, zoneWest int32) Value {
	return Value{K: KindTimeTZ, I: micros, J: int64(zoneWest)}
}
func IntervalValue(months, days int32, micros int64) Value {
	return Value{K: KindInterval, I: micros, J: int64(months)<<32 | int64(uint32(days))}
}
func TIDValue(block uint32, offset uint16) Value {
	return Value{K: KindTID, I: int64(block)<<16 | int64(offset)}
}

// IsNull reports whether v is NULL.
func (v Value) IsNull() bool { return v.K == KindNull }

// Bool, Int, Float, … read the payload; they assume the kind matches.
func (v Value) Bool() bool     { return v.I != 0 }
func (v Value) Int() int64     { return v.I }
func (v Value) Float() float64 { return math.Float64frombits(uint64(v.I)) }
func (v Value) Text() string   { return v.S }
func (v Value) Bytes() []byte  { return []byte(v.S) }
func (v Value) Interval() (months, days int32, micros int64) {
	return int32(v.J >> 32), int32(uint32(v.J)), v.I
}
func (v Value) TID() (block uint32, offset uint16) { return uint32(v.I >> 16), uint16(v.I) }
func (v Value) UUID() (u [16]byte)                 { copy(u[:], v.S); return u }

// PostgreSQL's infinities for date and timestamps.
const (
	DateNegInfinity int32 = math.MinInt32
	DatePosInfinity int32 = math.MaxInt32
	TimeNegInfinity int64 = math.MinInt64
	TimePosInfinity int64 = math.MaxInt64
)

// Compare orders two non-NULL values of the same kind the way PostgreSQL's
// default btree operator class orders them (NaN above every float, numeric
// by value, text bytewise as in the C collation). NULLs sort last, as in
// PostgreSQL's default ASC order. Values of different kinds compare by kind
// so that the order is total.
func Compare(a, b Value) int {
	if a.K == KindNull || b.K == KindNull {
		switch {
		case a.K == b.K:
			return 0
		case a.K == KindNull:
			return 1
		default:
			return -1
		}
	}
	if a.K != b.K {
		if a.K == KindInt && b.K == KindFloat {
			return compareFloat(float64(a.I), b.Float())
		}
		if a.K == KindFloat && b.K == KindInt {
			return compareFloat(a.Float(), float64(b.I))
		}
		if (a.K == KindInt || a.K == KindNumeric) && (b.K == KindInt || b.K == KindNumeric) {
			return CompareNumeric(a.numericText(), b.numericText())
		}
		return cmp.Compare(a.K, b.K)
	}
	switch a.K {
	case KindFloat:
		return compareFloat(a.Float(), b.Float())
	case KindNumeric:
		return CompareNumeric(a.S, b.S)
	case KindInterval:
		return cmp.Compare(intervalSpan(a), intervalSpan(b))
	case KindTimeTZ:
		// PostgreSQL orders by the UTC instant, then by zone.
		if c := cmp.Compare(a.I+a.J*usPerSecond, b.I+b.J*usPerSecond); c != 0 {
			return c
		}
		return cmp.Compare(a.J, b.J)
	case KindText, KindBytes, KindUUID, KindArray:
		return strings.Compare(a.S, b.S)
	}
	return cmp.Compare(a.I, b.I)
}

// Equal reports whether a and b are the same value (NULL equals NULL here,
// unlike SQL's =; callers implementing SQL predicates check NULL first).
func Equal(a, b Value) bool {
	if a.K != b.K {
		return Compare(a, b) == 0 && a.K != KindNull && b.K != KindNull
	}
	return a == b || (a.K != KindNull && Compare(a, b) == 0)
}

func (v Value) numericText() string {
	if v.K == KindInt {
		return formatInt(v.I)
	}
	return v.S
}

func compareFloat(x, y float64) int {
	xn, yn := math.IsNaN(x), math.IsNaN(y)
	switch {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	}
	return cmp.Compare(x, y)
}

// intervalSpan is PostgreSQL's interval comparison key: months count as 30
// days, days as 24 hours.
func intervalSpan(v Value) float64 {
	m, d, us := v.Interval()
	return float64(m)*30*86400e6 + float64(d)*86400e6 + float64(us)
}

// CompareNumeric compares two canonical decimal strings by value. "NaN" is
// above every number, as in PostgreSQL.
func CompareNumeric(a, b string) int {
	an, bn := a == "NaN", b == "NaN"
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	if a == "Infinity" || b == "-Infinity" {
		if a == b {
			return 0
		}
		return 1
	}
	if a == "-Infinity" || b == "Infinity" {
		return -1
	}
	aneg, bneg := strings.HasPrefix(a, "-"), strings.HasPrefix(b, "-")
	if aneg != bneg {
		if isZeroDecimal(a) && isZeroDecimal(b) {
			return 0
		}
		if aneg {
			return -1
		}
		return 1
	}
	c := compareAbsDecimal(strings.TrimPrefix(a, "-"), strings.TrimPrefix(b, "-"))
	if aneg {
		return -c
	}
	return c
}

func isZeroDecimal(s string) bool {
	return strings.Trim(s, "-0.") == ""
}

func compareAbsDecimal(a, b string) int {
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	ai = strings.TrimLeft(ai, "0")
	bi = strings.TrimLeft(bi, "0")
	if len(ai) != len(bi) {
		return cmp.Compare(len(ai), len(bi))
	}
	if c := strings.Compare(ai, bi); c != 0 {
		return c
	}
	af = strings.TrimRight(af, "0")
	bf = strings.TrimRight(bf, "0")
	return bytes.Compare([]byte(af), []byte(bf))
}
