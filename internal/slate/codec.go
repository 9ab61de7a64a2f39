package slate

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// castagnoli is the CRC32C table used by every checksum in the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// appendCRC appends the CRC32C (little endian) of buf to buf.
func appendCRC(buf []byte) []byte { return binary.LittleEndian.AppendUint32(buf, crc(buf)) }

// checkCRC splits a "payload | crc32c" buffer and verifies it.
func checkCRC(b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	payload := b[:len(b)-4]
	return payload, crc(payload) == binary.LittleEndian.Uint32(b[len(b)-4:])
}

var errShort = errors.New("truncated")

// reader decodes little-endian fields from a buffer, remembering the first
// failure so that decoders can check once at the end. It never panics.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.fail(errShort)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next n bytes (aliasing the buffer).
func (r *reader) bytes(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.fail(errShort)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// lenBytes reads a uvarint length (at most max) and that many bytes.
func (r *reader) lenBytes(max uint64) []byte {
	n := r.uvarint()
	if n > max {
		r.fail(errors.New("length out of range"))
		return nil
	}
	return r.bytes(n)
}

func appendLenBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}
