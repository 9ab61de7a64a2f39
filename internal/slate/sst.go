package slate

import (
	"bytes"
	"encoding/binary"
	"sort"
	"unsafe"
)

// Sorted table format (docs/storage-format.md, "Sorted table"). Must not
// change without bumping sstVersion.
const (
	sstMagic        = "SLSST\x00\x00\x01"
	sstVersion      = 1
	sstFooterLen    = 8 + 4 + 2 + 8
	restartInterval = 16
)

// sstInfo describes one sorted table. It is stored in the table's info block
// and copied into every manifest that references the table, so readers never
// fetch a footer for a table the manifest lists.
type sstInfo struct {
	id        string // ULID; the object is sstName(id)
	size      uint64 // object size in bytes
	firstKey  []byte
	lastKey   []byte
	minSeq    uint64
	maxSeq    uint64
	entries   uint64
	indexOff  uint64
	indexLen  uint32
	filterOff uint64
	filterLen uint32
}

func appendInfo(buf []byte, in *sstInfo) []byte {
	buf = appendLenBytes(buf, in.firstKey)
	buf = appendLenBytes(buf, in.lastKey)
	buf = binary.LittleEndian.AppendUint64(buf, in.minSeq)
	buf = binary.LittleEndian.AppendUint64(buf, in.maxSeq)
	buf = binary.LittleEndian.AppendUint64(buf, in.entries)
	buf = binary.LittleEndian.AppendUint64(buf, in.indexOff)
	buf = binary.LittleEndian.AppendUint32(buf, in.indexLen)
	buf = binary.LittleEndian.AppendUint64(buf, in.filterOff)
	buf = binary.LittleEndian.AppendUint32(buf, in.filterLen)
	return buf
}

func readInfo(r *reader, in *sstInfo) {
	in.firstKey = clone(r.lenBytes(MaxKeyLen))
	in.lastKey = clone(r.lenBytes(MaxKeyLen))
	in.minSeq = r.u64()
	in.maxSeq = r.u64()
	in.entries = r.u64()
	in.indexOff = r.u64()
	in.indexLen = r.u32()
	in.filterOff = r.u64()
	in.filterLen = r.u32()
}

// validInfo checks that the handles in an info lie inside the object.
func validInfo(in *sstInfo) bool {
	end := func(off uint64, n uint32) bool { return off <= in.size && uint64(n) <= in.size-off }
	return in.entries > 0 && in.size >= sstFooterLen && end(in.indexOff, in.indexLen) && end(in.filterOff, in.filterLen) &&
		in.minSeq <= in.maxSeq && bytes.Compare(in.firstKey, in.lastKey) <= 0 && len(in.firstKey) > 0
}

// sstBuilder writes one sorted table into memory. Entries must be added in
// entryLess order.
type sstBuilder struct {
	blockSize int
	buf       []byte // finished blocks
	block     []byte // current block entries
	restarts  []uint32
	count     int // entries in the current block
	prevKey   []byte
	index     []indexEntry
	hashes    []uint64
	info      sstInfo
}

type indexEntry struct {
	off     uint64
	length  uint32
	lastKey []byte
}

func newSSTBuilder(blockSize int) *sstBuilder {
	return &sstBuilder{blockSize: blockSize, info: sstInfo{minSeq: ^uint64(0)}}
}

// reserve sizes the table's buffer for about n bytes of entries, so that a
// flush does not grow it by doubling (and copy it each time).
func (b *sstBuilder) reserve(n int) {
	if n > cap(b.buf) {
		b.buf = make([]byte, 0, n+n/8)
	}
}

func (b *sstBuilder) add(e entry) {
	if b.info.entries == 0 {
		b.info.firstKey = clone(e.key)
	}
	if b.info.entries == 0 || !bytes.Equal(e.key, b.info.lastKey) {
		b.hashes = append(b.hashes, bloomHash(e.key))
	}
	b.info.entries++
	b.info.lastKey = append(b.info.lastKey[:0], e.key...)
	b.info.minSeq = min(b.info.minSeq, e.seq)
	b.info.maxSeq = max(b.info.maxSeq, e.seq)

	shared := 0
	if b.count%restartInterval == 0 {
		b.restarts = append(b.restarts, uint32(len(b.block)))
	} else {
		for shared < len(e.key) && shared < len(b.prevKey) && e.key[shared] == b.prevKey[shared] {
			shared++
		}
	}
	val := e.value
	if e.kind != kindPut {
		val = nil
	}
	b.block = binary.AppendUvarint(b.block, uint64(shared))
	b.block = binary.AppendUvarint(b.block, uint64(len(e.key)-shared))
	b.block = binary.AppendUvarint(b.block, uint64(len(val)))
	b.block = append(b.block, e.key[shared:]...)
	b.block = append(b.block, val...)
	b.block = binary.LittleEndian.AppendUint64(b.block, e.seq)
	b.block = append(b.block, byte(e.kind))
	b.count++
	b.prevKey = append(b.prevKey[:0], e.key...)
	if len(b.block) >= b.blockSize {
		b.finishBlock()
	}
}

// estimatedSize is the size the table would have if finished now.
func (b *sstBuilder) estimatedSize() int { return len(b.buf) + len(b.block) + len(b.index)*24 }

func (b *sstBuilder) finishBlock() {
	if b.count == 0 {
		return
	}
	for _, r := range b.restarts {
		b.block = binary.LittleEndian.AppendUint32(b.block, r)
	}
	b.block = binary.LittleEndian.AppendUint32(b.block, uint32(len(b.restarts)))
	b.block = appendCRC(b.block)
	b.index = append(b.index, indexEntry{off: uint64(len(b.buf)), length: uint32(len(b.block)), lastKey: clone(b.prevKey)})
	b.buf = append(b.buf, b.block...)
	b.block, b.restarts, b.count = b.block[:0], b.restarts[:0], 0
}

// finish completes the table and returns its bytes and info (without id).
// REQUIRES: at least one entry was added.
func (b *sstBuilder) finish() ([]byte, sstInfo) {
	b.finishBlock()
	filter := appendCRC(buildBloom(b.hashes))
	b.info.filterOff, b.info.filterLen = uint64(len(b.buf)), uint32(len(filter))
	b.buf = append(b.buf, filter...)

	idx := binary.LittleEndian.AppendUint32(nil, uint32(len(b.index)))
	for _, ie := range b.index {
		idx = binary.LittleEndian.AppendUint64(idx, ie.off)
		idx = binary.LittleEndian.AppendUint32(idx, ie.length)
		idx = appendLenBytes(idx, ie.lastKey)
	}
	idx = appendCRC(idx)
	b.info.indexOff, b.info.indexLen = uint64(len(b.buf)), uint32(len(idx))
	b.buf = append(b.buf, idx...)

	infoOff := len(b.buf)
	infoBlock := appendCRC(appendInfo(nil, &b.info))
	b.buf = append(b.buf, infoBlock...)
	infoLen := len(infoBlock)
	b.buf = binary.LittleEndian.AppendUint64(b.buf, uint64(infoOff))
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(infoLen))
	b.buf = binary.LittleEndian.AppendUint16(b.buf, sstVersion)
	b.buf = append(b.buf, sstMagic...)
	b.info.size = uint64(len(b.buf))
	return b.buf, b.info
}

// decodeIndex parses a verified index block.
func decodeIndex(name string, raw []byte, size uint64) ([]indexEntry, error) {
	payload, ok := checkCRC(raw)
	if !ok {
		return nil, corruptf(name, "index block checksum mismatch")
	}
	r := &reader{b: payload}
	n := r.u32()
	if uint64(n) > uint64(len(payload)) {
		return nil, corruptf(name, "index block: %d entries", n)
	}
	idx := make([]indexEntry, 0, n)
	var next uint64
	for i := uint32(0); i < n && r.err == nil; i++ {
		ie := indexEntry{off: r.u64(), length: r.u32(), lastKey: clone(r.lenBytes(MaxKeyLen))}
		if r.err == nil && (ie.off != next || ie.length < 8 || uint64(ie.length) > size-ie.off) {
			return nil, corruptf(name, "index entry %d: bad block handle", i)
		}
		if i > 0 && bytes.Compare(ie.lastKey, idx[i-1].lastKey) < 0 {
			return nil, corruptf(name, "index entry %d: keys out of order", i)
		}
		next = ie.off + uint64(ie.length)
		idx = append(idx, ie)
	}
	if r.err != nil || len(r.b) != 0 || n == 0 {
		return nil, corruptf(name, "malformed index block")
	}
	return idx, nil
}

// decodeFilter verifies a filter block and returns the filter bytes.
func decodeFilter(name string, raw []byte) ([]byte, error) {
	payload, ok := checkCRC(raw)
	if !ok || len(payload) < 2 {
		return nil, corruptf(name, "filter block checksum mismatch")
	}
	return payload, nil
}

// block is a verified, decoded data block.
type block struct {
	entries []entry
	arena   []byte // backing store of the keys, kept for reuse
	// mem is the memory the decoded block keeps alive: its entries, every
	// arena its keys were rebuilt into, and the encoded block its values
	// point into. The block cache is bounded by it: decoded, a block holds
	// several times its encoded size.
	mem int64
}

// decodeBlock verifies and fully decodes a data block. Full decoding keeps
// the iterator simple and checks every field before any entry is served.
func decodeBlock(name string, raw []byte) (*block, error) {
	return decodeBlockInto(name, raw, nil)
}

// decodeBlockInto is decodeBlock reusing the memory of reuse (which must no
// longer be referenced) when it is not nil.
func decodeBlockInto(name string, raw []byte, reuse *block) (*block, error) {
	payload, ok := checkCRC(raw)
	if !ok {
		return nil, corruptf(name, "data block checksum mismatch")
	}
	if len(payload) < 4 {
		return nil, corruptf(name, "data block too short")
	}
	nr := binary.LittleEndian.Uint32(payload[len(payload)-4:])
	if uint64(nr)*4+4 > uint64(len(payload)) || nr == 0 {
		return nil, corruptf(name, "data block: bad restart count %d", nr)
	}
	data := payload[:len(payload)-4-int(nr)*4]
	r := &reader{b: data}
	// Keys are rebuilt into one arena per block rather than one allocation
	// per key; slices taken before the arena grows stay valid.
	var out []entry
	var arena []byte
	if reuse != nil && cap(reuse.arena) >= len(data)*2 {
		out, arena = reuse.entries[:0], reuse.arena[:0]
	} else {
		out, arena = make([]entry, 0, len(data)/16), make([]byte, 0, len(data)*2)
	}
	arenaStart := arena
	mem := int64(len(raw)) + int64(cap(arena))
	var prev []byte
	for len(r.b) > 0 && r.err == nil {
		shared := r.uvarint()
		unshared := r.uvarint()
		vlen := r.uvarint()
		if r.err != nil || shared > uint64(len(prev)) || unshared > MaxKeyLen || vlen > MaxValueLen {
			return nil, corruptf(name, "data block: bad entry header")
		}
		suffix := r.bytes(unshared)
		val := r.bytes(vlen)
		seq := r.u64()
		k := kind(r.u8())
		if r.err != nil {
			break
		}
		if cap(arena)-len(arena) < int(shared)+len(suffix) {
			arena = make([]byte, 0, max(len(data), int(shared)+len(suffix)))
			mem += int64(cap(arena))
		}
		start := len(arena)
		arena = append(append(arena, prev[:shared]...), suffix...)
		key := arena[start:len(arena):len(arena)]
		if len(key) == 0 || (k != kindPut && k != kindDelete) || (k == kindDelete && vlen != 0) {
			return nil, corruptf(name, "data block: bad entry")
		}
		e := entry{key: key, value: val, seq: seq, kind: k}
		if len(out) > 0 && !entryLess(out[len(out)-1], e) {
			return nil, corruptf(name, "data block: entries out of order")
		}
		out = append(out, e)
		prev = key
	}
	if r.err != nil || len(out) == 0 {
		return nil, corruptf(name, "data block: truncated entry")
	}
	if uint64(nr) != (uint64(len(out))+restartInterval-1)/restartInterval {
		return nil, corruptf(name, "data block: %d restarts for %d entries", nr, len(out))
	}
	if reuse == nil {
		reuse = &block{}
	}
	reuse.entries, reuse.arena = out, arenaStart
	reuse.mem = mem + int64(cap(out))*int64(unsafe.Sizeof(entry{}))
	return reuse, nil
}

// seekBlock returns the first index position of key in the block's entries.
func (b *block) seek(key []byte) int {
	return sort.Search(len(b.entries), func(i int) bool { return bytes.Compare(b.entries[i].key, key) >= 0 })
}
