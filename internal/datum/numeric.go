package datum

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// ParseNumeric parses PostgreSQL numeric input and returns its canonical
// text: no leading zeros, exactly the display scale PostgreSQL keeps (the
// input's scale, or the column's scale when t has a modifier, rounding half
// away from zero). NaN and ±Infinity are kept by name.
func ParseNumeric(s string, t Type) (string, error) {
	in := strings.TrimSpace(s)
	switch strings.ToLower(in) {
	case "nan":
		return "NaN", nil
	case "infinity", "+infinity", "inf", "+inf":
		return "Infinity", nil
	case "-infinity", "-inf":
		return "-Infinity", nil
	}
	neg := false
	if in != "" && (in[0] == '+' || in[0] == '-') {
		neg = in[0] == '-'
		in = in[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(in), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > 1000 || e < -1000 {
			return "", invalid(t, s)
		}
		exp = e
	}
	ip, fp, _ := strings.Cut(mant, ".")
	if ip == "" && fp == "" {
		return "", invalid(t, s)
	}
	for _, c := range ip + fp {
		if c < '0' || c > '9' {
			return "", invalid(t, s)
		}
	}
	digits := ip + fp
	// value = digits × 10^(exp - len(fp))
	pointPos := len(ip) + exp // decimal point after this many digits of `digits`
	scale := len(fp) - exp
	if scale < 0 {
		scale = 0
	}
	if pointPos < 0 {
		digits = strings.Repeat("0", -pointPos) + digits
		pointPos = 0
	}
	if pointPos > len(digits) {
		digits += strings.Repeat("0", pointPos-len(digits))
	}
	intDigits, fracDigits := digits[:pointPos], digits[pointPos:]
	if len(fracDigits) < scale {
		fracDigits += strings.Repeat("0", scale-len(fracDigits))
	}
	fracDigits = fracDigits[:scale] // digits beyond scale are zeros by construction
	if p, sc, ok := t.NumericPrecisionScale(); ok {
		intDigits, fracDigits = roundDecimal(intDigits, fracDigits, sc)
		if n := len(strings.TrimLeft(intDigits, "0")); n > p-sc {
			return "", &SyntaxError{Code: pgcode.NumericValueOutOfRange, Msg: fmt.Sprintf("numeric field overflow")}
		}
	}
	intDigits = strings.TrimLeft(intDigits, "0")
	if intDigits == "" {
		intDigits = "0"
	}
	out := intDigits
	if len(fracDigits) > 0 {
		out += "." + fracDigits
	}
	if neg && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, nil
}

// roundDecimal rounds intDigits.fracDigits to scale fractional digits, half
// away from zero (on the magnitude), padding with zeros as needed.
func roundDecimal(intDigits, fracDigits string, scale int) (string, string) {
	if len(fracDigits) <= scale {
		return intDigits, fracDigits + strings.Repeat("0", scale-len(fracDigits))
	}
	roundUp := fracDigits[scale] >= '5'
	all := []byte(intDigits + fracDigits[:scale])
	if roundUp {
		i := len(all) - 1
		for ; i >= 0; i-- {
			if all[i] == '9' {
				all[i] = '0'
				continue
			}
			all[i]++
			break
		}
		if i < 0 {
			all = append([]byte{'1'}, all...)
		}
	}
	n := len(all) - scale
	return string(all[:n]), string(all[n:])
}
