package datum

import (
	"strings"
)

// Arrays are one-dimensional with lower bound 1. A KindArray Value's S holds
// the elements as an encoded Row (see row.go) of the element type, which
// keeps NULL elements and makes arrays storable like any other value.

// ArrayValue builds an array value of elements of type elem.
func ArrayValue(elem Type, elems []Value) Value {
	types := make([]Type, len(elems))
	for i := range types {
		types[i] = elem
	}
	return Value{K: KindArray, S: string(EncodeRow(nil, types, elems))}
}

// ArrayElems decodes the elements of an array value.
func ArrayElems(t Type, v Value) ([]Value, error) {
	r := Row(v.S)
	n, err := r.Len()
	if err != nil {
		return nil, err
	}
	types := make([]Type, n)
	for i := range types {
		types[i] = t.Elem()
	}
	return r.Decode(types, nil)
}

func appendArrayText(dst []byte, t Type, v Value) []byte {
	elems, err := ArrayElems(t, v)
	if err != nil {
		return append(dst, "<bad array>"...)
	}
	vector := t.OID == OIDInt2Vector || t.OID == OIDOIDVector
	if !vector {
		dst = append(dst, '{')
	}
	for i, e := range elems {
		if i > 0 {
			if vector {
				dst = append(dst, ' ')
			} else {
				dst = append(dst, ',')
			}
		}
		if e.IsNull() {
			dst = append(dst, "NULL"...)
			continue
		}
		s := FormatText(t.Elem(), e)
		if t.Elem().Kind() == KindText && needsArrayQuote(s) {
			dst = append(dst, '"')
			for j := 0; j < len(s); j++ {
				if s[j] == '"' || s[j] == '\\' {
					dst = append(dst, '\\')
				}
				dst = append(dst, s[j])
			}
			dst = append(dst, '"')
			continue
		}
		dst = append(dst, s...)
	}
	if !vector {
		dst = append(dst, '}')
	}
	return dst
}

// asciiSpace is what PostgreSQL's array parser skips (isspace in the C
// locale); other Unicode spaces are element data.
const asciiSpace = " \t\n\r\v\f"

func needsArrayQuote(s string) bool {
	if s == "" || strings.EqualFold(s, "NULL") {
		return true
	}
	return strings.ContainsAny(s, "{},\"\\ \t\n\r\v\f")
}

func parseArrayText(t Type, s string) (Value, error) {
	in := strings.Trim(s, asciiSpace)
	elem := t.Elem()
	if t.OID == OIDInt2Vector || t.OID == OIDOIDVector {
		var elems []Value
		for _, f := range strings.Fields(in) {
			v, err := ParseText(elem, f)
			if err != nil {
				return Null, err
			}
			elems = append(elems, v)
		}
		return ArrayValue(elem, elems), nil
	}
	if len(in) < 2 || in[0] != '{' || in[len(in)-1] != '}' {
		return Null, invalid(t, s)
	}
	body := in[1 : len(in)-1]
	var elems []Value
	if strings.Trim(body, asciiSpace) == "" {
		return ArrayValue(elem, nil), nil
	}
	i := 0
	for {
		for i < len(body) && strings.IndexByte(asciiSpace, body[i]) >= 0 {
			i++
		}
		var tok strings.Builder
		quoted := false
		if i < len(body) && body[i] == '"' {
			quoted = true
			i++
			for i < len(body) && body[i] != '"' {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				tok.WriteByte(body[i])
				i++
			}
			if i >= len(body) {
				return Null, invalid(t, s)
			}
			i++
		} else {
			for i < len(body) && body[i] != ',' {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				tok.WriteByte(body[i])
				i++
			}
		}
		str := tok.String()
		if !quoted {
			str = strings.Trim(str, asciiSpace)
		}
		if !quoted && strings.EqualFold(str, "NULL") {
			elems = append(elems, Null)
		} else {
			v, err := ParseText(elem, str)
			if err != nil {
				return Null, err
			}
			elems = append(elems, v)
		}
		for i < len(body) && strings.IndexByte(asciiSpace, body[i]) >= 0 {
			i++
		}
		if i >= len(body) {
			break
		}
		if body[i] != ',' {
			return Null, invalid(t, s)
		}
		i++
	}
	return ArrayValue(elem, elems), nil
}
