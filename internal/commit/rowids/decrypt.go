package rowids

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Encrypted Parquet, as DuckDB writes it for an ENCRYPTED DuckLake: the
// file begins and ends with "PARE"; before the final magic and length sit a
// plaintext FileCryptoMetaData and the footer, encrypted. The footer and
// every page header and page of every column are AES-GCM modules under the
// one key the catalog records for the file (ducklake_data_file and
// ducklake_delete_file.encryption_key, base64): a 4-byte little-endian
// length, a 12-byte nonce, the ciphertext and a 16-byte tag, authenticated
// without additional data.
//
// decryptParquet turns such a file into a plaintext Parquet file holding
// the top-level columns the hold reads, so that the same reader serves
// plain and encrypted files. GCM authenticates every module: a wrong key
// or a tampered byte is an error, never a misread.

var (
	magicPlain     = []byte("PAR1")
	magicEncrypted = []byte("PARE")
)

// encrypted reports whether the file ends with the encrypted-footer magic.
func encrypted(r io.ReaderAt, size int64) (bool, error) {
	if size < 8 {
		return false, nil
	}
	var tail [4]byte
	if _, err := r.ReadAt(tail[:], size-4); err != nil {
		return false, err
	}
	return bytes.Equal(tail[:], magicEncrypted), nil
}

const (
	gcmNonce = 12
	gcmTag   = 16
)

// module decrypts the module at the start of b and returns its plaintext
// and the bytes it took.
func module(g cipher.AEAD, b []byte) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, errors.New("truncated encrypted module")
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < gcmNonce+gcmTag || n > len(b)-4 {
		return nil, 0, fmt.Errorf("encrypted module of %d bytes where %d remain", n, len(b)-4)
	}
	pt, err := g.Open(nil, b[4:4+gcmNonce], b[4+gcmNonce:4+n], nil)
	if err != nil {
		return nil, 0, fmt.Errorf("decrypt: %w (wrong key, or the file was altered)", err)
	}
	return pt, 4 + n, nil
}

// decryptParquet returns a plaintext Parquet file with the top-level leaf
// columns of the encrypted file r for which keep reports true, every row
// group kept, and the file's row count.
func decryptParquet(r io.ReaderAt, size int64, key []byte, keep func(format.SchemaElement) bool) ([]byte, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, err
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if flen <= 0 || flen > size-12 {
		return nil, fmt.Errorf("encrypted footer of %d bytes in a %d-byte file", flen, size)
	}
	region := make([]byte, flen)
	if _, err := r.ReadAt(region, size-8-flen); err != nil {
		return nil, err
	}
	var cm format.FileCryptoMetaData
	br := bytes.NewReader(region)
	if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(br)).Decode(&cm); err != nil {
		return nil, fmt.Errorf("crypto metadata: %w", err)
	}
	alg, ok := cm.EncryptionAlgorithm.Value.(*format.AesGcmV1)
	if !ok {
		return nil, fmt.Errorf("encryption algorithm %T is not AES-GCM", cm.EncryptionAlgorithm.Value)
	}
	if len(alg.AadPrefix) > 0 || len(alg.AadFileUnique) > 0 || alg.SupplyAadPrefix {
		return nil, errors.New("the file is encrypted with additional authenticated data (not DuckDB's layout), which this reader does not support")
	}
	footer, _, err := module(g, region[len(region)-br.Len():])
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, &md); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}

	// The kept columns: top-level leaves, by their index among all leaves
	// (a column chunk per leaf, in schema order).
	if len(md.Schema) == 0 {
		return nil, errors.New("footer without a schema")
	}
	schema, chunks, leaves := selectLeaves(md.Schema, keep)
	if len(chunks) == 0 {
		// A Parquet file needs a column; the first top-level leaf stands in
		// (its rows are counted, never read).
		first := true
		schema, chunks, leaves = selectLeaves(md.Schema, func(format.SchemaElement) bool {
			ok := first
			first = false
			return ok
		})
	}
	if len(chunks) == 0 {
		return nil, errors.New("the file has no top-level column")
	}
	leaf := leaves
	schema[0].NumChildren = thrift.New(int32(len(schema) - 1))

	out := bytes.NewBuffer(append([]byte(nil), magicPlain...))
	for ri := range md.RowGroups {
		rg := &md.RowGroups[ri]
		cols := make([]format.ColumnChunk, 0, len(chunks))
		var total int64
		for _, ci := range chunks {
			if ci >= len(rg.Columns) {
				return nil, fmt.Errorf("row group %d has %d column chunks, the schema %d leaves", ri, len(rg.Columns), leaf)
			}
			cc := rg.Columns[ci]
			if len(cc.EncryptedColumnMetadata) > 0 {
				return nil, fmt.Errorf("row group %d column %d: separately encrypted column metadata is not supported", ri, ci)
			}
			cmd := cc.MetaData
			start := cmd.DataPageOffset
			if cmd.DictionaryPageOffset > 0 && cmd.DictionaryPageOffset < start {
				start = cmd.DictionaryPageOffset
			}
			if start < 4 || cmd.TotalCompressedSize < 0 || start+cmd.TotalCompressedSize > size {
				return nil, fmt.Errorf("row group %d column %d: chunk [%d, +%d) outside the file", ri, ci, start, cmd.TotalCompressedSize)
			}
			raw := make([]byte, cmd.TotalCompressedSize)
			if _, err := r.ReadAt(raw, start); err != nil {
				return nil, err
			}
			newStart := int64(out.Len())
			cmd.DictionaryPageOffset, cmd.DataPageOffset = 0, 0
			for off := 0; off < len(raw); {
				hdr, n, err := module(g, raw[off:])
				if err != nil {
					return nil, fmt.Errorf("row group %d column %d: page header: %w", ri, ci, err)
				}
				off += n
				var ph format.PageHeader
				if err := thrift.Unmarshal(new(thrift.CompactProtocol), hdr, &ph); err != nil {
					return nil, fmt.Errorf("row group %d column %d: page header: %w", ri, ci, err)
				}
				data, n, err := module(g, raw[off:])
				if err != nil {
					return nil, fmt.Errorf("row group %d column %d: page: %w", ri, ci, err)
				}
				off += n
				if len(data) != int(ph.CompressedPageSize) {
					return nil, fmt.Errorf("row group %d column %d: page of %d bytes, its header says %d", ri, ci, len(data), ph.CompressedPageSize)
				}
				at := int64(out.Len())
				switch {
				case ph.Type == format.DictionaryPage && cmd.DictionaryPageOffset == 0:
					cmd.DictionaryPageOffset = at
				case ph.Type != format.DictionaryPage && cmd.DataPageOffset == 0:
					cmd.DataPageOffset = at
				}
				out.Write(hdr)
				out.Write(data)
			}
			cmd.TotalCompressedSize = int64(out.Len()) - newStart
			cmd.IndexPageOffset, cmd.BloomFilterOffset, cmd.BloomFilterLength = 0, 0, 0
			total += cmd.TotalCompressedSize
			cols = append(cols, format.ColumnChunk{FileOffset: newStart, MetaData: cmd})
		}
		rg.Columns = cols
		rg.TotalCompressedSize = total
		rg.FileOffset = 0
		rg.SortingColumns = nil
	}
	md.Schema = schema
	md.EncryptionAlgorithm = format.EncryptionAlgorithm{}
	md.FooterSigningKeyMetadata = nil
	md.ColumnOrders = nil
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return nil, fmt.Errorf("plaintext footer: %w", err)
	}
	out.Write(b)
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
	out.Write(n[:])
	out.Write(magicPlain)
	return out.Bytes(), nil
}

// selectLeaves returns the schema of the top-level leaves keep selects
// (the root first), their column-chunk indexes, and the number of leaves.
func selectLeaves(all []format.SchemaElement, keep func(format.SchemaElement) bool) ([]format.SchemaElement, []int, int) {
	schema := []format.SchemaElement{all[0]}
	var chunks []int
	leaf := 0
	for i := 1; i < len(all); {
		el := all[i]
		if el.NumChildren.Valid && el.NumChildren.V > 0 {
			n, next := leavesUnder(all, i)
			leaf += n
			i = next
			continue
		}
		if keep(el) {
			schema = append(schema, el)
			chunks = append(chunks, leaf)
		}
		leaf++
		i++
	}
	return schema, chunks, leaf
}

// leavesUnder counts the leaves of the group at s[i] and returns the index
// after its subtree.
func leavesUnder(s []format.SchemaElement, i int) (leaves, next int) {
	children := int(s[i].NumChildren.V)
	next = i + 1
	if children == 0 {
		return 1, next
	}
	for c := 0; c < children && next < len(s); c++ {
		n, after := leavesUnder(s, next)
		leaves += n
		next = after
	}
	return leaves, next
}
