package rowids

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/RoaringBitmap/roaring/v2"
)

// Deletion vectors: DuckLake may write a delete file as an Iceberg V3
// deletion vector (ducklake_delete_file.format 'puffin'): either one bare
// deletion-vector-v1 blob, or a Puffin file ("PFA1" … footer) of
// cumulative blobs, one per snapshot, the last holding every deletion.
// Puffin files are written in plaintext even in an ENCRYPTED lake.
//
// A deletion-vector-v1 blob is: the big-endian length of what follows up
// to the checksum, the magic D1 D3 39 64, a 64-bit Roaring bitmap of row
// positions in the portable layout (a little-endian count of 32-bit
// buckets, each a little-endian high half and a portable 32-bit Roaring
// bitmap of low halves), and a big-endian CRC-32 of magic and bitmap.

var (
	puffinMagic = []byte("PFA1")
	dvMagic     = []byte{0xD1, 0xD3, 0x39, 0x64}
)

// readDeletionVector returns the positions a 'puffin' delete file deletes.
func readDeletionVector(ctx context.Context, op Opener, df DeleteFile) ([]int64, error) {
	r, size, closer, err := op.Open(ctx, df.Path)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("rowids: %s: %w", df.Path, err)
	}
	blob := b
	if bytes.HasPrefix(b, puffinMagic) {
		if blob, err = lastPuffinBlob(b); err != nil {
			return nil, fmt.Errorf("%w: deletion vector %s: %v", ErrInvalid, df.Path, err)
		}
	}
	pos, err := decodeDeletionVector(blob)
	if err != nil {
		return nil, fmt.Errorf("%w: deletion vector %s: %v", ErrInvalid, df.Path, err)
	}
	return pos, nil
}

// puffinFooter is the part of a Puffin footer's JSON the reader uses.
type puffinFooter struct {
	Blobs []struct {
		Type   string `json:"type"`
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
	} `json:"blobs"`
}

// lastPuffinBlob returns the last deletion-vector-v1 blob of a Puffin file:
// DuckLake's blobs are cumulative.
func lastPuffinBlob(b []byte) ([]byte, error) {
	const tail = 12 // payload size, flags, magic
	if len(b) < 4+4+tail || !bytes.HasSuffix(b, puffinMagic) {
		return nil, errors.New("not a Puffin file")
	}
	size := int(binary.LittleEndian.Uint32(b[len(b)-tail:]))
	flags := binary.LittleEndian.Uint32(b[len(b)-8:])
	start := len(b) - tail - size
	if size < 0 || start < 8 || !bytes.Equal(b[start-4:start], puffinMagic) {
		return nil, fmt.Errorf("footer of %d bytes does not fit", size)
	}
	if flags&1 != 0 {
		return nil, errors.New("compressed Puffin footer (LZ4) is not supported")
	}
	var f puffinFooter
	if err := json.Unmarshal(b[start:start+size], &f); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	for i := len(f.Blobs) - 1; i >= 0; i-- {
		bl := f.Blobs[i]
		if bl.Type != "deletion-vector-v1" {
			continue
		}
		if bl.Offset < 4 || bl.Length < 0 || bl.Offset+bl.Length > int64(start-4) {
			return nil, fmt.Errorf("blob [%d, +%d) outside the file", bl.Offset, bl.Length)
		}
		return b[bl.Offset : bl.Offset+bl.Length], nil
	}
	return nil, errors.New("no deletion-vector-v1 blob")
}

// decodeDeletionVector decodes one deletion-vector-v1 blob, checking its
// length, magic and checksum.
func decodeDeletionVector(b []byte) ([]int64, error) {
	if len(b) < 4+4+8+4 {
		return nil, fmt.Errorf("blob of %d bytes is too short", len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 4+8 || 4+n+4 != len(b) {
		return nil, fmt.Errorf("blob length %d does not match its %d bytes", n, len(b))
	}
	body := b[4 : 4+n]
	if !bytes.Equal(body[:4], dvMagic) {
		return nil, errors.New("bad magic")
	}
	if want, got := binary.BigEndian.Uint32(b[4+n:]), crc32.ChecksumIEEE(body); want != got {
		return nil, fmt.Errorf("checksum %08x, computed %08x", want, got)
	}
	rd := bytes.NewReader(body[4:])
	var count int64
	if err := binary.Read(rd, binary.LittleEndian, &count); err != nil || count < 0 {
		return nil, fmt.Errorf("bitmap count: %v", err)
	}
	var out []int64
	for i := int64(0); i < count; i++ {
		var key uint32
		if err := binary.Read(rd, binary.LittleEndian, &key); err != nil {
			return nil, fmt.Errorf("bitmap %d key: %w", i, err)
		}
		bm := roaring.New()
		if _, err := bm.ReadFrom(rd); err != nil {
			return nil, fmt.Errorf("bitmap %d: %w", i, err)
		}
		it := bm.Iterator()
		for it.HasNext() {
			out = append(out, int64(key)<<32|int64(it.Next()))
		}
	}
	if rd.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes in the bitmap", rd.Len())
	}
	return out, nil
}
