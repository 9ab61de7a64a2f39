package slate

import (
	"encoding/binary"
)

// WAL object format (docs/storage-format.md, "WAL object"). Version 1
// objects are read as well; only version 2 is written.
const (
	walMagic   = "SLWL"
	walVersion = 2
)

// walBatch is one batch as stored in a WAL object.
type walBatch struct {
	seq uint64
	ops []op
}

// walHeader is what a WAL object records about its writing besides its
// batches.
type walHeader struct {
	// epoch is the writer epoch that wrote it; 0 for a zero-byte fence
	// (written before fences carried their epoch).
	epoch uint64
	// base is the lowest WAL id its writer had not yet seen land when it
	// started this object's PUT (the object's own id when none was in
	// flight): an id in [base, id) may be missing for good if that writer
	// failed, one below base only if the store lost it (writeFence).
	base uint64
}

// void reports whether an object with header h, read in id order after
// objects whose highest epoch is *seen, is void: written by an older writer
// after a newer one's fence, so never acknowledged (writeFence). It raises
// *seen to h's epoch. Zero-byte fences carry no epoch and change nothing.
func (h walHeader) void(seen *uint64) bool {
	if h.epoch != 0 && h.epoch < *seen {
		return true
	}
	*seen = max(*seen, h.epoch)
	return false
}

// encodeWAL encodes the batches of one WAL object. Batches are stored whole:
// a batch never straddles two WAL objects.
func encodeWAL(id uint64, h walHeader, batches []walBatch) []byte {
	size := 38
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
	buf = binary.LittleEndian.AppendUint64(buf, h.epoch)
	buf = binary.LittleEndian.AppendUint64(buf, h.base)
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

// walFenceSize is the size of a fence: a WAL object without batches,
// which records the epoch of the writer that created it. Every object that
// holds batches is larger.
var walFenceSize = len(encodeWAL(0, walHeader{}, nil))

// isFence reports whether a WAL object of size bytes is a fence, which GC
// never deletes.
func isFence(size int64) bool { return size <= int64(walFenceSize) }

// decodeWAL decodes and verifies a WAL object named name with id. A fence
// has no batches: a zero-length object (written before fences carried
// their writer's epoch; its epoch reads as 0) or one without batches.
// Anything that does not verify is ErrCorrupt: a torn object fails its
// checksum.
func decodeWAL(name string, id uint64, data []byte) (h walHeader, batches []walBatch, err error) {
	if len(data) == 0 {
		return walHeader{base: id}, nil, nil
	}
	payload, ok := checkCRC(data)
	if !ok {
		return walHeader{}, nil, corruptf(name, "checksum mismatch (torn or damaged WAL object)")
	}
	r := &reader{b: payload}
	if string(r.bytes(4)) != walMagic {
		return walHeader{}, nil, corruptf(name, "bad magic")
	}
	v := r.u16()
	if v != 1 && v != walVersion {
		return walHeader{}, nil, corruptf(name, "unsupported WAL version %d", v)
	}
	if got := r.u64(); got != id {
		return walHeader{}, nil, corruptf(name, "object holds WAL id %d", got)
	}
	h.epoch, h.base = r.u64(), id
	if v >= 2 {
		h.base = r.u64()
	}
	if r.err == nil && (h.base > id || id-h.base >= MaxWALInFlight) {
		return walHeader{}, nil, corruptf(name, "base WAL id %d out of range", h.base)
	}
	n := r.u32()
	var prev uint64
	for i := uint32(0); i < n && r.err == nil; i++ {
		seq := r.u64()
		nops := r.u32()
		if r.err == nil && (seq <= prev || nops == 0 || uint64(nops) > uint64(len(r.b))) {
			return walHeader{}, nil, corruptf(name, "batch %d: bad header (seq %d, %d ops)", i, seq, nops)
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
				return walHeader{}, nil, corruptf(name, "batch %d: unknown op kind %d", i, k)
			}
			if r.err == nil && len(key) == 0 {
				return walHeader{}, nil, corruptf(name, "batch %d: empty key", i)
			}
			ops = append(ops, op{kind: k, key: key, value: val})
		}
		batches = append(batches, walBatch{seq: seq, ops: ops})
	}
	if r.err != nil {
		return walHeader{}, nil, corruptf(name, "%v", r.err)
	}
	if len(r.b) != 0 {
		return walHeader{}, nil, corruptf(name, "%d trailing bytes", len(r.b))
	}
	if len(batches) == 0 && (v < 2 || h.epoch == 0) {
		return walHeader{}, nil, corruptf(name, "WAL object without batches that is not a fence")
	}
	return h, batches, nil
}
