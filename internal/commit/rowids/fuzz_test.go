package rowids

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// FuzzDeletionVector: any bytes, as a bare blob or a Puffin file, decode
// or fail with an error; never a panic.
func FuzzDeletionVector(f *testing.F) {
	f.Add([]byte{0, 0, 0, 12, 0xD1, 0xD3, 0x39, 0x64, 0, 0, 0, 0, 0, 0, 0, 0, 0x5c, 0x2b, 0x44, 0x17})
	f.Add([]byte("PFA1PFA1{\"blobs\":[]}\x0f\x00\x00\x00\x00\x00\x00\x00PFA1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeDeletionVector(b)
		if blob, err := lastPuffinBlob(b); err == nil {
			_, _ = decodeDeletionVector(blob)
		}
	})
}

// FuzzDecryptParquet: any bytes ending in the encrypted magic fail to
// decrypt with an error; never a panic or an allocation beyond the input.
func FuzzDecryptParquet(f *testing.F) {
	f.Add([]byte("PARE\x05\x00\x00\x00\x2c\x15\x00\x00\x00\x00\x00\x00\x00\x00PARE"))
	key := bytes.Repeat([]byte{7}, 32)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append(b, "PARE"...)
		_, _ = decryptParquet(bytes.NewReader(b), int64(len(b)), key, func(format.SchemaElement) bool { return true })
	})
}
