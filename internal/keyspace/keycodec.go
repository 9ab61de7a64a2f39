package keyspace

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The order-preserving key codec. Keys compare bytewise (slate orders them
// with bytes.Compare), and every encoding below is chosen so that comparing
// two encoded keys compares their fields in order:
//
//	uint32         4 bytes big endian (catalog ids)
//	int field      0x00 for NULL, or 0x01 then 8 bytes big endian of
//	               uint64(v) XOR 1<<63 (the sign flip puts negatives first)
//	string field   0x00 for NULL, or 0x01 then the bytes with every 0x00
//	               written as 0x00 0xFF, then the terminator 0x00 0x01
//
// Boolean and timestamptz key columns are int fields (0/1; microseconds,
// with ±infinity at the int64 extremes). NULL sorts before every value. The string escape keeps a string's
// encoding prefix-free, so "a" < "a\x00" < "ab" holds for the encodings as it
// does for the strings. These encodings are part of the storage format and
// must not change.

// Field tags.
const (
	tagNull    byte = 0x00
	tagPresent byte = 0x01
)

// ErrCorrupt reports stored bytes that do not parse: a torn, truncated or
// overwritten key or value. It is never returned for well-formed input.
var ErrCorrupt = errors.New("keyspace: corrupt key or value")

// ErrUnknownShape reports a well-formed record this version of moraine does
// not understand: a newer format version, an unknown kind. It is refused, not
// guessed at.
var ErrUnknownShape = errors.New("keyspace: unknown record shape")

// AppendUint32 appends v big endian.
func AppendUint32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

// AppendInt appends a non-NULL int field.
func AppendInt(dst []byte, v int64) []byte {
	dst = append(dst, tagPresent)
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// AppendNull appends a NULL field (int or string).
func AppendNull(dst []byte) []byte { return append(dst, tagNull) }

// AppendString appends a non-NULL string field.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, tagPresent)
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0x00, 0xFF)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, 0x00, 0x01)
}

// KeyReader reads fields from an encoded key in order. The first error sticks:
// later reads return zero values and Err reports it.
type KeyReader struct {
	b   []byte
	err error
}

// NewKeyReader reads the fields of b.
func NewKeyReader(b []byte) *KeyReader { return &KeyReader{b: b} }

// Err returns the first error met, wrapping ErrCorrupt.
func (r *KeyReader) Err() error { return r.err }

// Rest returns the bytes not read yet.
func (r *KeyReader) Rest() []byte { return r.b }

// Done reports an error unless every byte has been read.
func (r *KeyReader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

func (r *KeyReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: key: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	r.b = nil
}

// Uint32 reads a big-endian uint32.
func (r *KeyReader) Uint32() uint32 {
	if len(r.b) < 4 {
		r.fail("truncated uint32")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// Byte reads one raw byte.
func (r *KeyReader) Byte() byte {
	if len(r.b) < 1 {
		r.fail("truncated byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Int reads an int field; null reports NULL.
func (r *KeyReader) Int() (v int64, null bool) {
	switch t := r.Byte(); {
	case r.err != nil:
		return 0, false
	case t == tagNull:
		return 0, true
	case t != tagPresent:
		r.fail("bad field tag 0x%02x", t)
		return 0, false
	}
	if len(r.b) < 8 {
		r.fail("truncated int field")
		return 0, false
	}
	v = int64(binary.BigEndian.Uint64(r.b) ^ (1 << 63))
	r.b = r.b[8:]
	return v, false
}

// String reads a string field; null reports NULL.
func (r *KeyReader) String() (s string, null bool) {
	switch t := r.Byte(); {
	case r.err != nil:
		return "", false
	case t == tagNull:
		return "", true
	case t != tagPresent:
		r.fail("bad field tag 0x%02x", t)
		return "", false
	}
	var out []byte
	for i := 0; i < len(r.b); i++ {
		if r.b[i] != 0 {
			continue
		}
		if i+1 >= len(r.b) {
			break
		}
		switch r.b[i+1] {
		case 0x01:
			out = append(out, r.b[:i]...)
			r.b = r.b[i+2:]
			return string(out), false
		case 0xFF:
			out = append(out, r.b[:i+1]...)
			r.b = r.b[i+2:]
			i = -1
		default:
			r.fail("bad string escape 0x00 0x%02x", r.b[i+1])
			return "", false
		}
	}
	r.fail("unterminated string field")
	return "", false
}

// PrefixEnd returns the smallest key greater than every key with prefix p:
// the exclusive upper bound of a prefix scan. It returns nil (no bound) when
// p is empty or all 0xFF.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
