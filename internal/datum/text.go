package datum

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// pgEpoch is PostgreSQL's epoch for dates and timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	usPerSecond = int64(1_000_000)
	usPerDay    = 86400 * usPerSecond
	// pgEpochUnixSeconds is 2000-01-01 in Unix seconds.
	pgEpochUnixSeconds = 946684800
)

func formatInt(i int64) string { return strconv.FormatInt(i, 10) }

// AppendText appends PostgreSQL's text output form of v (as type t would
// print it with DateStyle ISO, IntervalStyle postgres, TimeZone UTC,
// bytea_output hex and extra_float_digits 1). NULL appends nothing; callers
// encode NULL out of band.
func AppendText(dst []byte, t Type, v Value) []byte {
	switch v.K {
	case KindNull:
		return dst
	case KindBool:
		if v.I != 0 {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case KindInt:
		return strconv.AppendInt(dst, v.I, 10)
	case KindFloat:
		return appendFloat(dst, v.Float(), t.OID == OIDFloat4)
	case KindText, KindNumeric:
		if t.OID == OIDChar && len(v.S) == 1 && v.S[0] >= 0x80 {
			// charout: a byte with the high bit set prints as \ooo.
			c := v.S[0]
			return append(dst, '\\', '0'+c>>6, '0'+c>>3&7, '0'+c&7)
		}
		return append(dst, v.S...)
	case KindBytes:
		dst = append(dst, '\\', 'x')
		return hex.AppendEncode(dst, []byte(v.S))
	case KindUUID:
		return appendUUID(dst, v.S)
	case KindDate:
		return appendDate(dst, int32(v.I))
	case KindTime:
		return appendClock(dst, v.I)
	case KindTimeTZ:
		return appendZone(appendClock(dst, v.I), -v.J)
	case KindTimestamp:
		return appendTimestamp(dst, v.I, false)
	case KindTimestampTZ:
		return appendTimestamp(dst, v.I, true)
	case KindInterval:
		return appendInterval(dst, v)
	case KindTID:
		b, o := v.TID()
		dst = append(dst, '(')
		dst = strconv.AppendUint(dst, uint64(b), 10)
		dst = append(dst, ',')
		dst = strconv.AppendUint(dst, uint64(o), 10)
		return append(dst, ')')
	case KindArray:
		return appendArrayText(dst, t, v)
	}
	return dst
}

// FormatText is AppendText into a new string.
func FormatText(t Type, v Value) string { return string(AppendText(nil, t, v)) }

func appendFloat(dst []byte, f float64, single bool) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	bits, limit := 64, 15
	if single {
		bits, limit = 32, 6
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	// Shortest round-trip digits, then PostgreSQL's choice between fixed
	// and exponential notation by the decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, bits)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp >= -4 && exp < limit {
		return strconv.AppendFloat(dst, f, 'f', -1, bits)
	}
	return append(dst, e...)
}

func appendUUID(dst []byte, raw string) []byte {
	var buf [36]byte
	b := []byte(raw)
	if len(b) != 16 {
		return append(dst, "<bad uuid>"...)
	}
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], b[10:16])
	return append(dst, buf[:]...)
}

func appendPad(dst []byte, n int64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

func civil(days int64) (year int, month time.Month, day int) {
	return pgEpoch.AddDate(0, 0, int(days)).Date()
}

func appendYMD(dst []byte, days int64) ([]byte, bool) {
	y, m, d := civil(days)
	bc := y <= 0
	if bc {
		y = 1 - y
	}
	dst = appendPad(dst, int64(y), 4)
	dst = append(dst, '-')
	dst = appendPad(dst, int64(m), 2)
	dst = append(dst, '-')
	dst = appendPad(dst, int64(d), 2)
	return dst, bc
}

func appendDate(dst []byte, days int32) []byte {
	switch days {
	case DateNegInfinity:
		return append(dst, "-infinity"...)
	case DatePosInfinity:
		return append(dst, "infinity"...)
	}
	dst, bc := appendYMD(dst, int64(days))
	if bc {
		dst = append(dst, " BC"...)
	}
	return dst
}

func appendClock(dst []byte, us int64) []byte {
	h := us / (3600 * usPerSecond)
	us -= h * 3600 * usPerSecond
	m := us / (60 * usPerSecond)
	us -= m * 60 * usPerSecond
	s := us / usPerSecond
	us -= s * usPerSecond
	dst = appendPad(dst, h, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, m, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, s, 2)
	if us != 0 {
		frac := appendPad(nil, us, 6)
		for len(frac) > 0 && frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
		dst = append(dst, '.')
		dst = append(dst, frac...)
	}
	return dst
}

func appendTimestamp(dst []byte, us int64, tz bool) []byte {
	switch us {
	case TimeNegInfinity:
		return append(dst, "-infinity"...)
	case TimePosInfinity:
		return append(dst, "infinity"...)
	}
	days := floorDiv(us, usPerDay)
	dst, bc := appendYMD(dst, days)
	dst = append(dst, ' ')
	dst = appendClock(dst, us-days*usPerDay)
	if tz {
		dst = append(dst, "+00"...)
	}
	if bc {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendZone appends a UTC offset east (seconds) as PostgreSQL prints it:
// +HH, +HH:MM or +HH:MM:SS.
func appendZone(dst []byte, east int64) []byte {
	sign := byte('+')
	if east < 0 {
		sign, east = '-', -east
	}
	dst = append(dst, sign)
	dst = appendPad(dst, east/3600, 2)
	if m, sec := east/60%60, east%60; m != 0 || sec != 0 {
		dst = append(dst, ':')
		dst = appendPad(dst, m, 2)
		if sec != 0 {
			dst = append(dst, ':')
			dst = appendPad(dst, sec, 2)
		}
	}
	return dst
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func appendInterval(dst []byte, v Value) []byte {
	months, days, us := v.Interval()
	start := len(dst)
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendInt(dst, n, 10)
		dst = append(dst, ' ')
		dst = append(dst, name...)
		if n != 1 {
			dst = append(dst, 's')
		}
	}
	unit(int64(months/12), "year")
	unit(int64(months%12), "mon")
	unit(int64(days), "day")
	if us != 0 || len(dst) == start {
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		if us < 0 {
			dst = append(dst, '-')
			us = -us
		} else if months < 0 || days < 0 {
			dst = append(dst, '+')
		}
		dst = appendClock(dst, us)
	}
	return dst
}

// SyntaxError is an invalid text input for a type: PostgreSQL's 22P02
// ("invalid input syntax for type bigint: \"x\"") or another data-exception
// code such as 22003 (out of range) or 22001 (too long).
type SyntaxError struct {
	Code string // SQLSTATE
	Msg  string
}

func (e *SyntaxError) Error() string    { return e.Msg }
func (e *SyntaxError) SQLState() string { return e.Code }

// charIn is PostgreSQL's charin: "\ooo" (three octal digits) is that byte,
// anything else its first byte ("" stays empty).
func charIn(s string) string {
	isOctal := func(c byte) bool { return c >= '0' && c <= '7' }
	if len(s) == 4 && s[0] == '\\' && isOctal(s[1]) && isOctal(s[2]) && isOctal(s[3]) {
		c := (s[1]-'0')<<6 + (s[2]-'0')<<3 + s[3] - '0'
		if c == 0 {
			return ""
		}
		return string([]byte{c})
	}
	if len(s) > 1 {
		return s[:1]
	}
	return s
}

func invalid(t Type, s string) error {
	return &SyntaxError{Code: pgcode.InvalidTextRepresentation, Msg: fmt.Sprintf("invalid input syntax for type %s: %q", t.String(), s)}
}

func outOfRange(t Type, s string) error {
	return &SyntaxError{Code: pgcode.NumericValueOutOfRange, Msg: fmt.Sprintf("value %q is out of range for type %s", s, t.String())}
}

// ParseText parses PostgreSQL's text input form of a value of type t, the
// way the type's input function does (timestamps without an offset are taken
// as UTC). The result is the Value the column stores.
func ParseText(t Type, s string) (Value, error) {
	if err := CheckUTF8(s); err != nil {
		return Null, err
	}
	switch t.Kind() {
	case KindBool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "t", "tr", "tru", "true", "y", "ye", "yes", "on", "1":
			return BoolValue(true), nil
		case "f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0":
			return BoolValue(false), nil
		}
		return Null, &SyntaxError{Code: pgcode.InvalidTextRepresentation, Msg: fmt.Sprintf("invalid input syntax for type boolean: %q", s)}
	case KindInt:
		return parseInt(t, s)
	case KindFloat:
		return parseFloat(t, s)
	case KindText:
		if (t.OID == OIDVarchar || t.OID == OIDBPChar) && t.Mod >= 4 {
			n := int(t.Mod - 4)
			if r := []rune(s); len(r) > n {
				trimmed := strings.TrimRight(string(r[n:]), " ")
				if trimmed != "" {
					return Null, &SyntaxError{Code: pgcode.StringDataRightTruncation, Msg: fmt.Sprintf("value too long for type %s", t.String())}
				}
				s = string(r[:n])
			} else if t.OID == OIDBPChar && len(r) < n {
				s += strings.Repeat(" ", n-len(r))
			}
		}
		if t.OID == OIDChar {
			return TextValue(charIn(s)), nil
		}
		return TextValue(s), nil
	case KindBytes:
		b, err := parseBytea(s)
		if err != nil {
			return Null, invalid(t, s)
		}
		return BytesValue(b), nil
	case KindNumeric:
		n, err := ParseNumeric(s, t)
		if err != nil {
			return Null, err
		}
		return NumericValue(n), nil
	case KindUUID:
		u, ok := parseUUID(s)
		if !ok {
			return Null, invalid(t, s)
		}
		return UUIDValue(u), nil
	case KindDate:
		d, err := parseDate(strings.TrimSpace(s))
		if err != nil {
			return Null, invalid(t, s)
		}
		return DateValue(d), nil
	case KindTime:
		us, ok := parseClock(strings.TrimSpace(s))
		if !ok {
			return Null, invalid(t, s)
		}
		return TimeValue(us), nil
	case KindTimeTZ:
		in := strings.TrimSpace(s)
		clock, zone := in, ""
		if i := strings.IndexAny(in, "+-Zz"); i >= 0 {
			clock, zone = in[:i], in[i:]
		}
		us, ok := parseClock(strings.TrimSpace(clock))
		if !ok {
			return Null, invalid(t, s)
		}
		var east int64
		if zone != "" {
			off, ok := parseZone(zone)
			if !ok {
				return Null, invalid(t, s)
			}
			east = off / usPerSecond
		}
		return TimeTZValue(us, int32(-east)), nil
	case KindTimestamp, KindTimestampTZ:
		us, err := parseTimestamp(strings.TrimSpace(s), t.Kind() == KindTimestampTZ)
		if err != nil {
			return Null, invalid(t, s)
		}
		if !validTimestamp(us) {
			return Null, &SyntaxError{Code: pgcode.DatetimeFieldOverflow, Msg: fmt.Sprintf("timestamp out of range: %q", s)}
		}
		return Value{K: t.Kind(), I: us}, nil
	case KindInterval:
		return parseInterval(t, s)
	case KindTID:
		var b, o uint64
		var rest string
		if n, _ := fmt.Sscanf(strings.TrimSpace(s), "(%d,%d)%s", &b, &o, &rest); n != 2 || b > math.MaxUint32 || o > math.MaxUint16 {
			return Null, invalid(t, s)
		}
		return TIDValue(uint32(b), uint16(o)), nil
	case KindArray:
		return parseArrayText(t, s)
	}
	return Null, fmt.Errorf("type %s has no text input", t)
}

func parseInt(t Type, s string) (Value, error) {
	trim := strings.TrimSpace(s)
	bits := 64
	switch t.OID {
	case OIDInt2:
		bits = 16
	case OIDInt4:
		bits = 32
	case OIDOID, OIDXID, OIDRegproc, OIDRegclass:
		u, err := strconv.ParseUint(trim, 10, 32)
		if err != nil {
			i, err2 := strconv.ParseInt(trim, 10, 32)
			if err2 != nil {
				return Null, invalid(t, s)
			}
			return IntValue(int64(uint32(int32(i)))), nil
		}
		return IntValue(int64(u)), nil
	}
	i, err := strconv.ParseInt(trim, 10, bits)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return Null, outOfRange(t, s)
		}
		return Null, invalid(t, s)
	}
	return IntValue(i), nil
}

func parseFloat(t Type, s string) (Value, error) {
	trim := strings.TrimSpace(s)
	switch strings.ToLower(trim) {
	case "nan":
		// PostgreSQL's NaN is the canonical quiet NaN (0x7ff8000000000000);
		// Go's math.NaN() sets a low bit, and binary COPY sends the bits.
		return FloatValue(math.Float64frombits(0x7ff8000000000000)), nil
	case "infinity", "+infinity", "inf", "+inf":
		return FloatValue(math.Inf(1)), nil
	case "-infinity", "-inf":
		return FloatValue(math.Inf(-1)), nil
	}
	bits := 64
	if t.OID == OIDFloat4 {
		bits = 32
	}
	f, err := strconv.ParseFloat(trim, bits)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return Null, outOfRange(t, s)
		}
		return Null, invalid(t, s)
	}
	return FloatValue(f), nil
}

func parseBytea(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) || strings.HasPrefix(s, `\X`) {
		h := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\t' || r == '\r' {
				return -1
			}
			return r
		}, s[2:])
		return hex.DecodeString(h)
	}
	// escape format
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '\\' {
			out = append(out, '\\')
			i++
			continue
		}
		if i+3 < len(s) {
			n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
			if err == nil {
				out = append(out, byte(n))
				i += 3
				continue
			}
		}
		return nil, fmt.Errorf("invalid escape")
	}
	return out, nil
}

func parseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = s[1 : len(s)-1]
	}
	var h []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			// PostgreSQL accepts a hyphen after any group of four digits.
			if len(h)%4 != 0 || len(h) == 0 || i+1 == len(s) || s[i+1] == '-' {
				return u, false
			}
			continue
		}
		h = append(h, c)
	}
	if len(h) != 32 {
		return u, false
	}
	if _, err := hex.Decode(u[:], h); err != nil {
		return u, false
	}
	return u, true
}

func daysFromCivil(y, m, d int) (int64, bool) {
	if m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d {
		return 0, false
	}
	return floorDiv(t.Unix()-pgEpochUnixSeconds, 86400), true
}

func parseDate(s string) (int32, error) {
	switch strings.ToLower(s) {
	case "infinity", "+infinity":
		return DatePosInfinity, nil
	case "-infinity":
		return DateNegInfinity, nil
	case "epoch":
		return -10957, nil
	}
	bc := false
	if u := strings.ToUpper(s); strings.HasSuffix(u, " BC") {
		bc, s = true, strings.TrimSpace(s[:len(s)-3])
	} else if strings.HasSuffix(u, " AD") {
		s = strings.TrimSpace(s[:len(s)-3])
	}
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return 0, fmt.Errorf("bad date")
	}
	y, e1 := strconv.Atoi(parts[0])
	m, e2 := strconv.Atoi(parts[1])
	d, e3 := strconv.Atoi(parts[2])
	if e1 != nil || e2 != nil || e3 != nil || y < 0 {
		return 0, fmt.Errorf("bad date")
	}
	if bc {
		if y == 0 {
			return 0, fmt.Errorf("bad date")
		}
		y = 1 - y
	}
	days, ok := daysFromCivil(y, m, d)
	if !ok || days < math.MinInt32+1 || days > math.MaxInt32-1 {
		return 0, fmt.Errorf("bad date")
	}
	return int32(days), nil
}

// parseClock parses HH:MM[:SS[.ffffff]] into microseconds since midnight.
func parseClock(s string) (int64, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	h, e1 := strconv.Atoi(parts[0])
	m, e2 := strconv.Atoi(parts[1])
	if e1 != nil || e2 != nil || h < 0 || h > 24 || m < 0 || m > 59 {
		return 0, false
	}
	var us int64
	if len(parts) == 3 {
		sec, frac, hasFrac := strings.Cut(parts[2], ".")
		sv, err := strconv.Atoi(sec)
		if err != nil || sv < 0 || sv > 60 || len(sec) == 0 {
			return 0, false
		}
		us = int64(sv) * usPerSecond
		if hasFrac {
			if frac == "" {
				return 0, false
			}
			for _, c := range frac {
				if c < '0' || c > '9' {
					return 0, false
				}
			}
			// Round to microseconds as PostgreSQL does.
			digits := frac
			if len(digits) > 6 {
				digits = frac[:6]
			}
			n, _ := strconv.ParseInt(digits+strings.Repeat("0", 6-len(digits)), 10, 64)
			if len(frac) > 6 && frac[6] >= '5' {
				n++
			}
			us += n
		}
	}
	total := int64(h)*3600*usPerSecond + int64(m)*60*usPerSecond + us
	if total > usPerDay {
		return 0, false
	}
	return total, true
}

// parseIntervalClock parses the H:MM:SS[.f] part of an interval, whose hours
// are unbounded.
func parseIntervalClock(s string) (int64, bool) {
	h, rest, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	hours, err := strconv.ParseInt(h, 10, 64)
	if err != nil || hours < 0 || hours > 2562047788 {
		return 0, false
	}
	us, ok := parseClock("00:" + rest)
	if !ok {
		return 0, false
	}
	return hours*3600*usPerSecond + us, true
}

func parseTimestamp(s string, tz bool) (int64, error) {
	switch strings.ToLower(s) {
	case "infinity", "+infinity":
		return TimePosInfinity, nil
	case "-infinity":
		return TimeNegInfinity, nil
	case "epoch":
		return -int64(pgEpochUnixSeconds) * usPerSecond, nil
	}
	bc := false
	if u := strings.ToUpper(s); strings.HasSuffix(u, " BC") {
		bc, s = true, strings.TrimSpace(s[:len(s)-3])
	}
	datePart, rest := s, ""
	if i := strings.IndexAny(s, " Tt"); i >= 0 {
		datePart, rest = s[:i], strings.TrimSpace(s[i+1:])
	}
	if bc {
		datePart += " BC"
	}
	days, err := parseDate(datePart)
	if err != nil || days == DatePosInfinity || days == DateNegInfinity {
		return 0, fmt.Errorf("bad timestamp")
	}
	var clock, offset int64
	if rest != "" {
		clockPart := rest
		zone := ""
		if i := strings.IndexAny(rest, "+-Zz "); i >= 0 {
			clockPart, zone = rest[:i], strings.TrimSpace(rest[i:])
		}
		c, ok := parseClock(clockPart)
		if !ok {
			return 0, fmt.Errorf("bad time")
		}
		clock = c
		if zone != "" {
			off, ok := parseZone(zone)
			if !ok {
				return 0, fmt.Errorf("bad zone")
			}
			if tz {
				offset = off
			}
		}
	}
	return int64(days)*usPerDay + clock - offset, nil
}

// parseZone parses +HH, +HH:MM, +HHMM, Z, UTC, GMT into an offset east of
// UTC in microseconds.
func parseZone(z string) (int64, bool) {
	switch strings.ToUpper(z) {
	case "Z", "UTC", "GMT", "+00", "-00":
		return 0, true
	}
	if len(z) < 2 || (z[0] != '+' && z[0] != '-') {
		return 0, false
	}
	sign := int64(1)
	if z[0] == '-' {
		sign = -1
	}
	body := strings.ReplaceAll(z[1:], ":", "")
	var h, m, sec int
	var err error
	switch len(body) {
	case 1, 2:
		h, err = strconv.Atoi(body)
	case 4:
		h, err = strconv.Atoi(body[:2])
		if err == nil {
			m, err = strconv.Atoi(body[2:])
		}
	case 6:
		h, err = strconv.Atoi(body[:2])
		if err == nil {
			m, err = strconv.Atoi(body[2:4])
		}
		if err == nil {
			sec, err = strconv.Atoi(body[4:])
		}
	default:
		return 0, false
	}
	if err != nil || h > 15 || m > 59 || sec > 59 {
		return 0, false
	}
	return sign * (int64(h)*3600 + int64(m)*60 + int64(sec)) * usPerSecond, true
}

func parseInterval(t Type, s string) (Value, error) {
	fields := strings.Fields(strings.ToLower(s))
	var months, days int64
	var us int64
	ago := false
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "ago" {
			ago = true
			continue
		}
		if strings.Contains(f, ":") {
			neg := strings.HasPrefix(f, "-")
			c, ok := parseIntervalClock(strings.TrimLeft(f, "+-"))
			if !ok {
				return Null, invalid(t, s)
			}
			if neg {
				c = -c
			}
			us += c
			continue
		}
		num, err := strconv.ParseFloat(strings.TrimPrefix(f, "@"), 64)
		if err != nil {
			return Null, invalid(t, s)
		}
		unitName := ""
		if i+1 < len(fields) {
			unitName = strings.TrimSuffix(fields[i+1], ",")
			i++
		} else {
			unitName = "second"
		}
		switch strings.TrimSuffix(unitName, "s") {
		case "microsecond", "usec", "u":
			us += int64(num)
		case "millisecond", "msec", "m" + "s":
			us += int64(num * 1e3)
		case "second", "sec", "":
			us += int64(math.Round(num * 1e6))
		case "minute", "min":
			us += int64(math.Round(num * 60e6))
		case "hour", "hr", "h":
			us += int64(math.Round(num * 3600e6))
		case "day", "d":
			days += int64(num)
		case "week", "w":
			days += int64(num * 7)
		case "mon", "month":
			months += int64(num)
		case "year", "yr", "y":
			months += int64(num * 12)
		case "decade":
			months += int64(num * 120)
		case "century", "centurie":
			months += int64(num * 1200)
		default:
			return Null, invalid(t, s)
		}
	}
	if len(fields) == 0 {
		return Null, invalid(t, s)
	}
	if ago {
		months, days, us = -months, -days, -us
	}
	if months > math.MaxInt32 || months < math.MinInt32 || days > math.MaxInt32 || days < math.MinInt32 {
		return Null, outOfRange(t, s)
	}
	return IntervalValue(int32(months), int32(days), us), nil
}
