package datum

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// Cast converts v to type to with PostgreSQL's assignment/explicit cast
// rules for the types moraine serves: text parses through the target's
// input function, numbers convert between each other (rounding half away
// from zero into integers, range-checked), and anything formats to text.
// from is v's type where it matters (float4 vs float8 text output); pass
// the zero Type when it is not known.
func Cast(v Value, from, to Type) (Value, error) {
	if v.IsNull() {
		return Null, nil
	}
	tk := to.Kind()
	if tk == KindNull {
		return Null, fmt.Errorf("cannot cast to unknown type %d", to.OID)
	}
	if v.K == tk && tk != KindInt && tk != KindText && tk != KindNumeric && tk != KindFloat {
		return v, nil
	}
	switch v.K {
	case KindText:
		return ParseText(to, v.S)
	}
	switch tk {
	case KindText:
		if v.K == KindBool {
			// PostgreSQL's bool-to-text cast spells the value out
			// (booltext), unlike boolean output ('t'/'f').
			if v.I != 0 {
				return ParseText(to, "true")
			}
			return ParseText(to, "false")
		}
		if from.OID == 0 {
			from = defaultType(v.K)
		}
		return ParseText(to, FormatText(from, v))
	case KindInt:
		switch v.K {
		case KindInt, KindBool:
			return CheckIntRange(to, v.I)
		case KindFloat:
			f := v.Float()
			if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 9.3e18 {
				return Null, IntRangeError(to)
			}
			return CheckIntRange(to, int64(math.RoundToEven(f)))
		case KindNumeric:
			r, err := ParseNumeric(v.S, NumericType(1000, 0))
			if err != nil {
				return Null, err
			}
			if r == "NaN" {
				return Null, &SyntaxError{Code: pgcode.FeatureNotSupported, Msg: "cannot convert NaN to " + strings.TrimSuffix(to.String(), " ")}
			}
			i, err := strconv.ParseInt(r, 10, 64)
			if err != nil {
				return Null, IntRangeError(to)
			}
			return CheckIntRange(to, i)
		}
	case KindFloat:
		switch v.K {
		case KindInt:
			return FloatValue(float64(v.I)), nil
		case KindFloat:
			if to.OID == OIDFloat4 {
				return FloatValue(float64(float32(v.Float()))), nil
			}
			return v, nil
		case KindNumeric:
			return parseFloat(to, v.S)
		}
	case KindNumeric:
		switch v.K {
		case KindInt:
			s, err := ParseNumeric(strconv.FormatInt(v.I, 10), to)
			return NumericValue(s), err
		case KindFloat:
			f := v.Float()
			if math.IsNaN(f) {
				return NumericValue("NaN"), nil
			}
			s, err := ParseNumeric(strconv.FormatFloat(f, 'f', -1, 64), to)
			return NumericValue(s), err
		case KindNumeric:
			if _, _, ok := to.NumericPrecisionScale(); !ok {
				return v, nil
			}
			s, err := ParseNumeric(v.S, to)
			return NumericValue(s), err
		}
	case KindBool:
		if v.K == KindInt && to.OID == OIDBool {
			return BoolValue(v.I != 0), nil
		}
	case KindTimestamp, KindTimestampTZ:
		if v.K == KindTimestamp || v.K == KindTimestampTZ {
			return Value{K: tk, I: v.I}, nil
		}
		if v.K == KindDate {
			d := int32(v.I)
			switch d {
			case DatePosInfinity:
				return Value{K: tk, I: TimePosInfinity}, nil
			case DateNegInfinity:
				return Value{K: tk, I: TimeNegInfinity}, nil
			}
			return Value{K: tk, I: int64(d) * usPerDay}, nil
		}
	case KindDate:
		if v.K == KindTimestamp || v.K == KindTimestampTZ {
			switch v.I {
			case TimePosInfinity:
				return DateValue(DatePosInfinity), nil
			case TimeNegInfinity:
				return DateValue(DateNegInfinity), nil
			}
			return DateValue(int32(floorDiv(v.I, usPerDay))), nil
		}
	case KindBytes:
		if v.K == KindBytes {
			return v, nil
		}
	}
	return Null, &SyntaxError{Code: pgcode.CannotCoerce, Msg: fmt.Sprintf("cannot cast type %s to %s", defaultType(v.K), to)}
}

// CheckIntRange is i as a value of integer type t, or PostgreSQL's 22003
// error (IntRangeError) if it does not fit t.
func CheckIntRange(t Type, i int64) (Value, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	switch t.OID {
	case OIDInt2:
		lo, hi = math.MinInt16, math.MaxInt16
	case OIDInt4:
		lo, hi = math.MinInt32, math.MaxInt32
	case OIDOID, OIDXID, OIDRegclass, OIDRegproc:
		lo, hi = 0, math.MaxUint32
	}
	if i < lo || i > hi {
		return Null, IntRangeError(t)
	}
	return IntValue(i), nil
}

// IntRangeError is PostgreSQL's error for a value outside integer type t
// ("integer out of range").
func IntRangeError(t Type) error {
	return &SyntaxError{Code: pgcode.NumericValueOutOfRange, Msg: strings.TrimSuffix(t.String(), " ") + " out of range"}
}

// defaultType is the type a value of kind k has when nothing else says:
// what PostgreSQL would infer for a literal of that kind.
func defaultType(k Kind) Type {
	switch k {
	case KindBool:
		return Bool
	case KindInt:
		return Int8
	case KindFloat:
		return Float8
	case KindText:
		return Text
	case KindBytes:
		return Bytea
	case KindNumeric:
		return Numeric
	case KindUUID:
		return UUID
	case KindDate:
		return Date
	case KindTime:
		return Time
	case KindTimeTZ:
		return TimeTZ
	case KindTimestamp:
		return Timestamp
	case KindTimestampTZ:
		return TimestampTZ
	case KindInterval:
		return Interval
	case KindTID:
		return TID
	}
	return Text
}
