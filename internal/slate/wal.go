package slate

import (
	"encoding/binary"
	"fmt"
)

// WAL object format (docs/storage-format.md, "WAL object"). Must not change.
const (
	walMagic   = "SLWL"
	walVersion = 1
)

// walBatch is one batch as stored in a WAL object.
type walBatch struct {
	seq uint64
	ops []op
}

// encodeWAL encodes the batches of one WAL object. Batches are stored whole:
// a batch never straddles two WAL objects.
func encodeWAL(id, epoch uint64, batches []walBatch) []byte {
	size := 30
	for _, b := range batches {
		size += 12
		for _, o := range b.ops {
			size += 1 + 10 + len(o.key) + len(o.value)
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, walMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, walVersion)
	buf = binary.LittleEndian.AppendUint64(buf, id)
	buf = binary.LittleEndian.AppendUint64(buf, epoch)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(batches)))
	for _, b := range batches {
		buf = binary.LittleEndian.AppendUint64(buf, b.seq)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b.ops)))
		for _, o := range b.ops {
			buf = append(buf, byte(o.kind))
			buf = appendLenBytes(buf, o.key)
			if o.kind == kindPut {
				buf = appendLenBytes(buf, o.value)
			}
		}
	}
	return appendCRC(buf)
}

// decodeWAL decodes and verifies a WAL object named name with id. A
// zero-length object is a fence and has no batches. Anything that does not
// verify is ErrCorrupt: a torn object fails its checksum.
func decodeWAL(name string, id uint64, data []byte) (epoch uint64, batches []walBatch, err error) {
	if len(data) == 0 {
		return 0, nil, nil
	}
	payload, ok := checkCRC(data)
	if !ok {
		return 0, nil, corruptf(name, "checksum mismatch (torn or damaged WAL object)")
	}
	r := &reader{b: payload}
	if string(r.bytes(4)) != walMagic {
		return 0, nil, corruptf(name, "bad magic")
	}
	if v := r.u16(); v != walVersion {
		return 0, nil, corruptf(name, "unsupported WAL version %d", v)
	}
	if got := r.u64(); got != id {
		return 0, nil, corruptf(name, "object holds WAL id %d", got)
	}
	epoch = r.u64()
	n := r.u32()
	var prev uint64
	for i := uint32(0); i < n && r.err == nil; i++ {
		seq := r.u64()
		nops := r.u32()
		if r.err == nil && (seq <= prev || nops == 0 || uint64(nops) > uint64(len(r.b))) {
			return 0, nil, corruptf(name, "batch %d: bad header (seq %d, %d ops)", i, seq, nops)
		}
		prev = seq
		ops := make([]op, 0, nops)
		for j := uint32(0); j < nops && r.err == nil; j++ {
			k := kind(r.u8())
			key := r.lenBytes(MaxKeyLen)
			var val []byte
			switch k {
			case kindPut:
				val = r.lenBytes(MaxValueLen)
			case kindDelete:
			default:
				return 0, nil, corruptf(name, "batch %d: unknown op kind %d", i, k)
			}
			if r.err == nil && len(key) == 0 {
				return 0, nil, corruptf(name, "batch %d: empty key", i)
			}
			ops = append(ops, op{kind: k, key: key, value: val})
		}
		batches = append(batches, walBatch{seq: seq, ops: ops})
	}
	if r.err != nil {
		return 0, nil, corruptf(name, "%v", r.err)
	}
	if len(r.b) != 0 {
		return 0, nil, corruptf(name, "%d trailing bytes", len(r.b))
	}
	if len(batches) == 0 {
		return 0, nil, corruptf(name, "non-fence WAL object without batches")
	}
	return epoch, batches, nil
}

// walObjectErr names WAL id in an error.
func walObjectErr(id uint64, err error) error { return fmt.Errorf("%s: %w", walName(id), err) }
