package datum

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// AppendBinary appends PostgreSQL's binary send form of v as type t (the
// bytes of one field in a binary DataRow or binary COPY tuple, without the
// length word). v must not be NULL.
func AppendBinary(dst []byte, t Type, v Value) ([]byte, error) {
	switch t.OID {
	case OIDBool:
		return append(dst, byte(v.I&1)), nil
	case OIDInt2:
		return binary.BigEndian.AppendUint16(dst, uint16(v.I)), nil
	case OIDInt4:
		return binary.BigEndian.AppendUint32(dst, uint32(v.I)), nil
	case OIDOID, OIDXID, OIDRegproc, OIDRegclass:
		return binary.BigEndian.AppendUint32(dst, uint32(v.I)), nil
	case OIDInt8:
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)), nil
	case OIDFloat4:
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(v.Float()))), nil
	case OIDFloat8:
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)), nil
	case OIDText, OIDVarchar, OIDName, OIDBPChar, OIDJSON, OIDBytea:
		return append(dst, v.S...), nil
	case OIDChar:
		if v.S == "" {
			return append(dst, 0), nil
		}
		return append(dst, v.S[0]), nil
	case OIDJSONB:
		return append(append(dst, 1), v.S...), nil
	case OIDUUID:
		if len(v.S) != 16 {
			return dst, fmt.Errorf("bad uuid value")
		}
		return append(dst, v.S...), nil
	case OIDDate:
		return binary.BigEndian.AppendUint32(dst, uint32(int32(v.I))), nil
	case OIDTime, OIDTimestamp, OIDTimestampTZ:
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)), nil
	case OIDTimeTZ:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.I))
		return binary.BigEndian.AppendUint32(dst, uint32(int32(v.J))), nil
	case OIDInterval:
		months, days, us := v.Interval()
		dst = binary.BigEndian.AppendUint64(dst, uint64(us))
		dst = binary.BigEndian.AppendUint32(dst, uint32(days))
		return binary.BigEndian.AppendUint32(dst, uint32(months)), nil
	case OIDTID:
		b, o := v.TID()
		dst = binary.BigEndian.AppendUint32(dst, b)
		return binary.BigEndian.AppendUint16(dst, o), nil
	case OIDNumeric:
		return appendNumericBinary(dst, v.S)
	}
	if t.Kind() == KindArray {
		return appendArrayBinary(dst, t, v)
	}
	return dst, fmt.Errorf("no binary output for type %s", t)
}

// DecodeBinary parses PostgreSQL's binary receive form of a value of type t.
func DecodeBinary(t Type, b []byte) (Value, error) {
	need := func(n int) error {
		if len(b) != n {
			return &SyntaxError{Code: pgcode.InvalidBinaryRepresentation, Msg: fmt.Sprintf("incorrect binary data format for type %s", t)}
		}
		return nil
	}
	switch t.OID {
	case OIDBool:
		if err := need(1); err != nil {
			return Null, err
		}
		return BoolValue(b[0] != 0), nil
	case OIDInt2:
		if err := need(2); err != nil {
			return Null, err
		}
		return IntValue(int64(int16(binary.BigEndian.Uint16(b)))), nil
	case OIDInt4:
		if err := need(4); err != nil {
			return Null, err
		}
		return IntValue(int64(int32(binary.BigEndian.Uint32(b)))), nil
	case OIDOID, OIDXID, OIDRegproc, OIDRegclass:
		if err := need(4); err != nil {
			return Null, err
		}
		return IntValue(int64(binary.BigEndian.Uint32(b))), nil
	case OIDInt8:
		if err := need(8); err != nil {
			return Null, err
		}
		return IntValue(int64(binary.BigEndian.Uint64(b))), nil
	case OIDFloat4:
		if err := need(4); err != nil {
			return Null, err
		}
		return FloatValue(float64(math.Float32frombits(binary.BigEndian.Uint32(b)))), nil
	case OIDFloat8:
		if err := need(8); err != nil {
			return Null, err
		}
		return Value{K: KindFloat, I: int64(binary.BigEndian.Uint64(b))}, nil
	case OIDText, OIDVarchar, OIDName, OIDBPChar, OIDJSON:
		return ParseText(t, string(b))
	case OIDChar:
		// PostgreSQL's charrecv reads exactly one byte; 0 is the empty
		// "char".
		if err := need(1); err != nil {
			return Null, err
		}
		if b[0] == 0 {
			return TextValue(""), nil
		}
		return TextValue(string(b)), nil
	case OIDBytea:
		return BytesValue(b), nil
	case OIDUUID:
		if err := need(16); err != nil {
			return Null, err
		}
		return Value{K: KindUUID, S: string(b)}, nil
	case OIDDate:
		if err := need(4); err != nil {
			return Null, err
		}
		d := int32(binary.BigEndian.Uint32(b))
		if d != DateNegInfinity && d != DatePosInfinity && (d < minDate || d >= endDate) {
			return Null, &SyntaxError{Code: pgcode.DatetimeFieldOverflow, Msg: "date out of range"}
		}
		return DateValue(d), nil
	case OIDTime:
		if err := need(8); err != nil {
			return Null, err
		}
		us := int64(binary.BigEndian.Uint64(b))
		if us < 0 || us > usecsPerDay {
			return Null, &SyntaxError{Code: pgcode.DatetimeFieldOverflow, Msg: "time out of range"}
		}
		return TimeValue(us), nil
	case OIDTimestamp, OIDTimestampTZ:
		if err := need(8); err != nil {
			return Null, err
		}
		us := int64(binary.BigEndian.Uint64(b))
		if !validTimestamp(us) {
			return Null, &SyntaxError{Code: pgcode.DatetimeFieldOverflow, Msg: "timestamp out of range"}
		}
		return Value{K: t.Kind(), I: us}, nil
	case OIDTimeTZ:
		if err := need(12); err != nil {
			return Null, err
		}
		us, zone := int64(binary.BigEndian.Uint64(b)), int32(binary.BigEndian.Uint32(b[8:]))
		if us < 0 || us > usecsPerDay {
			return Null, &SyntaxError{Code: pgcode.DatetimeFieldOverflow, Msg: "time out of range"}
		}
		if zone <= -tzDispLimit || zone >= tzDispLimit {
			return Null, &SyntaxError{Code: pgcode.InvalidTimeZoneDisplacementValue, Msg: "time zone displacement out of range"}
		}
		return TimeTZValue(us, zone), nil
	case OIDInterval:
		if err := need(16); err != nil {
			return Null, err
		}
		us := int64(binary.BigEndian.Uint64(b))
		days := int32(binary.BigEndian.Uint32(b[8:]))
		months := int32(binary.BigEndian.Uint32(b[12:]))
		return IntervalValue(months, days, us), nil
	case OIDTID:
		if err := need(6); err != nil {
			return Null, err
		}
		return TIDValue(binary.BigEndian.Uint32(b), binary.BigEndian.Uint16(b[4:])), nil
	case OIDNumeric:
		s, err := decodeNumericBinary(b)
		if err != nil {
			return Null, &SyntaxError{Code: pgcode.InvalidBinaryRepresentation, Msg: "invalid numeric binary data: " + err.Error()}
		}
		if _, _, ok := t.NumericPrecisionScale(); ok {
			s, err = ParseNumeric(s, t)
			if err != nil {
				return Null, err
			}
		}
		return NumericValue(s), nil
	}
	if t.Kind() == KindArray {
		return decodeArrayBinary(t, b)
	}
	return Null, fmt.Errorf("no binary input for type %s", t)
}

// PostgreSQL's ranges for the date and time types (datatype/timestamp.h),
// which its binary receive functions enforce: days and microseconds since
// 2000-01-01, end bounds exclusive; a time zone displacement in seconds.
const (
	minDate      = -2451545             // 4714-11-24 BC
	endDate      = 2147483494 - 2451545 // 5874898-01-01
	minTimestamp = -211813488000000000  // 4714-11-24 00:00 BC
	endTimestamp = 9223371331200000000  // 294277-01-01 00:00
	usecsPerDay  = 86400000000
	tzDispLimit  = (15*60 + 59) * 60
)

// validTimestamp reports whether us is a timestamp PostgreSQL can hold:
// ±infinity or within its range. Its text and binary input both refuse
// the rest, and so do ours.
func validTimestamp(us int64) bool {
	return us == TimeNegInfinity || us == TimePosInfinity || minTimestamp <= us && us < endTimestamp
}

const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

// appendNumericBinary encodes a canonical decimal string in PostgreSQL's
// numeric wire format: ndigits, weight, sign, dscale, then base-10000 digits.
func appendNumericBinary(dst []byte, s string) ([]byte, error) {
	header := func(ndigits, weight int16, sign uint16, dscale int16) {
		dst = binary.BigEndian.AppendUint16(dst, uint16(ndigits))
		dst = binary.BigEndian.AppendUint16(dst, uint16(weight))
		dst = binary.BigEndian.AppendUint16(dst, sign)
		dst = binary.BigEndian.AppendUint16(dst, uint16(dscale))
	}
	switch s {
	case "NaN":
		header(0, 0, numericNaN, 0)
		return dst, nil
	case "Infinity":
		header(0, 0, numericPInf, 0)
		return dst, nil
	case "-Infinity":
		header(0, 0, numericNInf, 0)
		return dst, nil
	}
	sign := uint16(numericPos)
	if strings.HasPrefix(s, "-") {
		sign, s = numericNeg, s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	dscale := len(fp)
	ip = strings.TrimLeft(ip, "0")
	// Pad the integer part on the left and the fraction on the right to
	// whole base-10000 groups.
	if r := len(ip) % 4; r != 0 {
		ip = strings.Repeat("0", 4-r) + ip
	}
	frac := fp
	if r := len(frac) % 4; r != 0 {
		frac += strings.Repeat("0", 4-r)
	}
	all := ip + frac
	groups := make([]int16, 0, len(all)/4)
	for i := 0; i < len(all); i += 4 {
		g, err := strconv.Atoi(all[i : i+4])
		if err != nil {
			return dst, fmt.Errorf("bad numeric %q", s)
		}
		groups = append(groups, int16(g))
	}
	weight := len(ip)/4 - 1
	// Strip leading and trailing zero groups (PostgreSQL's normal form).
	for len(groups) > 0 && groups[0] == 0 {
		groups = groups[1:]
		weight--
	}
	for len(groups) > 0 && groups[len(groups)-1] == 0 {
		groups = groups[:len(groups)-1]
	}
	if len(groups) == 0 {
		weight = 0
		sign = numericPos
	}
	header(int16(len(groups)), int16(weight), sign, int16(dscale))
	for _, g := range groups {
		dst = binary.BigEndian.AppendUint16(dst, uint16(g))
	}
	return dst, nil
}

func decodeNumericBinary(b []byte) (string, error) {
	if len(b) < 8 {
		return "", fmt.Errorf("short header")
	}
	ndigits := int(int16(binary.BigEndian.Uint16(b)))
	weight := int(int16(binary.BigEndian.Uint16(b[2:])))
	sign := binary.BigEndian.Uint16(b[4:])
	dscale := int(int16(binary.BigEndian.Uint16(b[6:])))
	switch sign {
	case numericNaN:
		return "NaN", nil
	case numericPInf:
		return "Infinity", nil
	case numericNInf:
		return "-Infinity", nil
	case numericPos, numericNeg:
	default:
		return "", fmt.Errorf("bad sign 0x%x", sign)
	}
	if ndigits < 0 || dscale < 0 || dscale > 0x3fff || len(b) != 8+2*ndigits {
		return "", fmt.Errorf("bad length")
	}
	var ip, fp strings.Builder
	for i := 0; i < ndigits; i++ {
		d := int(binary.BigEndian.Uint16(b[8+2*i:]))
		if d > 9999 {
			return "", fmt.Errorf("bad digit")
		}
		g := fmt.Sprintf("%04d", d)
		pos := weight - i // power of 10000 of this group
		if pos >= 0 {
			ip.WriteString(g)
		} else {
			fp.WriteString(g)
		}
	}
	intPart := ip.String()
	if weight >= ndigits { // trailing zero groups of the integer part
		intPart += strings.Repeat("0000", weight-ndigits+1)
	}
	fracPart := fp.String()
	if weight < -1 && ndigits > 0 { // leading zero groups of the fraction
		fracPart = strings.Repeat("0000", -weight-1) + fracPart
	}
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	if len(fracPart) > dscale {
		fracPart = fracPart[:dscale]
	} else {
		fracPart += strings.Repeat("0", dscale-len(fracPart))
	}
	out := intPart
	if dscale > 0 {
		out += "." + fracPart
	}
	if sign == numericNeg && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, nil
}

func appendArrayBinary(dst []byte, t Type, v Value) ([]byte, error) {
	elems, err := ArrayElems(t, v)
	if err != nil {
		return dst, err
	}
	hasNull := uint32(0)
	for _, e := range elems {
		if e.IsNull() {
			hasNull = 1
		}
	}
	ndim := uint32(1)
	if len(elems) == 0 {
		ndim = 0
	}
	dst = binary.BigEndian.AppendUint32(dst, ndim)
	dst = binary.BigEndian.AppendUint32(dst, hasNull)
	dst = binary.BigEndian.AppendUint32(dst, t.Elem().OID)
	if ndim == 0 {
		return dst, nil
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(elems)))
	lbound := uint32(1)
	if t.OID == OIDInt2Vector || t.OID == OIDOIDVector {
		lbound = 0
	}
	dst = binary.BigEndian.AppendUint32(dst, lbound)
	for _, e := range elems {
		if e.IsNull() {
			dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32)
			continue
		}
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst, err = AppendBinary(dst, t.Elem(), e)
		if err != nil {
			return dst, err
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst, nil
}

func decodeArrayBinary(t Type, b []byte) (Value, error) {
	bad := &SyntaxError{Code: pgcode.InvalidBinaryRepresentation, Msg: fmt.Sprintf("incorrect binary data format for type %s", t)}
	if len(b) < 12 {
		return Null, bad
	}
	ndim := binary.BigEndian.Uint32(b)
	elemOID := binary.BigEndian.Uint32(b[8:])
	if elemOID != t.Elem().OID || ndim > 1 {
		return Null, bad
	}
	if ndim == 0 {
		return ArrayValue(t.Elem(), nil), nil
	}
	if len(b) < 20 {
		return Null, bad
	}
	n := binary.BigEndian.Uint32(b[12:])
	p := 20
	var elems []Value
	for i := uint32(0); i < n; i++ {
		if p+4 > len(b) {
			return Null, bad
		}
		l := int32(binary.BigEndian.Uint32(b[p:]))
		p += 4
		if l < 0 {
			elems = append(elems, Null)
			continue
		}
		if p+int(l) > len(b) {
			return Null, bad
		}
		e, err := DecodeBinary(t.Elem(), b[p:p+int(l)])
		if err != nil {
			return Null, err
		}
		elems = append(elems, e)
		p += int(l)
	}
	if p != len(b) {
		return Null, bad
	}
	return ArrayValue(t.Elem(), elems), nil
}
