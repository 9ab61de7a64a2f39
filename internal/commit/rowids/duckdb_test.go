package rowids_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/moraine-db/moraine/internal/commit/rowids"
)

// The hold on files DuckDB writes, as DuckLake has it write them: data
// files with the row id in a column of field id 2147483540 (or none, and a
// row_id_start), positional delete files, each plain or encrypted with
// the file's own key (an ENCRYPTED lake), and deletion vectors.

// duck writes Parquet files with DuckDB (duckdb-go, in process).
type duck struct {
	t   *testing.T
	db  *sql.DB
	dir string
}

func newDuck(t *testing.T) *duck {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // PRAGMA keys are per connection
	t.Cleanup(func() { db.Close() })
	d := &duck{t: t, db: db, dir: t.TempDir()}
	// Writing encrypted files without the httpfs extension's crypto
	// module: DuckDB then uses its bundled one.
	d.exec(`SET force_mbedtls_unsafe = 'true'`)
	return d
}

func (d *duck) exec(q string) {
	d.t.Helper()
	if _, err := d.db.Exec(q); err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
}

// newKey registers a fresh 256-bit key with DuckDB under name and returns
// it as the catalog stores it would be decoded: raw bytes.
func (d *duck) newKey(name string) []byte {
	d.t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		d.t.Fatal(err)
	}
	d.exec(fmt.Sprintf(`PRAGMA add_parquet_key('%s', '%s')`, name, base64.StdEncoding.EncodeToString(key)))
	return key
}

// copyTo writes query's rows to name; options are COPY options besides
// FORMAT parquet.
func (d *duck) copyTo(name, query, options string) string {
	d.t.Helper()
	p := filepath.Join(d.dir, name)
	opts := "FORMAT parquet"
	if options != "" {
		opts += ", " + options
	}
	d.exec(fmt.Sprintf(`COPY (%s) TO '%s' (%s)`, query, p, opts))
	return p
}

const rowIDField = `FIELD_IDS {_ducklake_internal_row_id: 2147483540}`

// dataFile writes a data file of n rows holding row ids id0, id0+step, …;
// key non-nil encrypts it.
func (d *duck) dataFile(name string, id0, step int64, n int, key []byte, keyName string) rowids.File {
	d.t.Helper()
	opts := rowIDField + ", ROW_GROUP_SIZE 2048"
	if key != nil {
		opts += fmt.Sprintf(", ENCRYPTION_CONFIG {footer_key: '%s'}", keyName)
	}
	p := d.copyTo(name, fmt.Sprintf(`SELECT i * 7 AS v, 'row ' || i AS s, %d + i * %d AS _ducklake_internal_row_id FROM range(%d) t(i)`, id0, step, n), opts)
	d.checkEncrypted(p, key != nil)
	return rowids.File{Path: p, RecordCount: int64(n), EncryptionKey: key}
}

// plainFile writes a data file without the row-id column: its ids are
// row_id_start + position.
func (d *duck) plainFile(name string, start int64, n int, key []byte, keyName string) rowids.File {
	d.t.Helper()
	opts := ""
	if key != nil {
		opts = fmt.Sprintf("ENCRYPTION_CONFIG {footer_key: '%s'}", keyName)
	}
	p := d.copyTo(name, fmt.Sprintf(`SELECT i AS v FROM range(%d) t(i)`, n), opts)
	d.checkEncrypted(p, key != nil)
	return rowids.File{Path: p, RowIDStart: start, HasRowIDStart: true, RecordCount: int64(n), EncryptionKey: key}
}

// deleteFile writes a positional delete file of dataPath.
func (d *duck) deleteFile(name, dataPath string, key []byte, keyName string, positions ...int64) rowids.DeleteFile {
	d.t.Helper()
	var vals []string
	for _, p := range positions {
		vals = append(vals, fmt.Sprintf("('%s', %d::BIGINT)", dataPath, p))
	}
	opts := ""
	if key != nil {
		opts = fmt.Sprintf("ENCRYPTION_CONFIG {footer_key: '%s'}", keyName)
	}
	p := d.copyTo(name, "SELECT * FROM (VALUES "+strings.Join(vals, ", ")+") v(file_path, pos)", opts)
	return rowids.DeleteFile{Path: p, Format: "parquet", EncryptionKey: key}
}

// checkEncrypted fails the test unless the file at p is (or is not) in
// DuckDB's encrypted layout, so that the encrypted cases test decryption.
func (d *duck) checkEncrypted(p string, want bool) {
	d.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		d.t.Fatal(err)
	}
	if got := bytes.HasSuffix(b, []byte("PARE")); got != want {
		d.t.Fatalf("%s: encrypted %v, want %v", p, got, want)
	}
}

func TestHoldOnDuckDBFiles(t *testing.T) {
	ctx := context.Background()
	ch := &rowids.Checker{}
	for _, enc := range []bool{false, true} {
		name := "plain"
		if enc {
			name = "encrypted"
		}
		t.Run(name, func(t *testing.T) {
			d := newDuck(t)
			var k1, k2, k3 []byte
			if enc {
				k1, k2, k3 = d.newKey("k1"), d.newKey("k2"), d.newKey("k3")
			}
			// Two sources: an insert's file (ids from row_id_start) and a
			// flush output with embedded ids across several row groups.
			a := d.plainFile("a.parquet", 0, 5000, k1, "k1")
			b := d.dataFile("b.parquet", 5000, 1, 3000, k2, "k2")
			t.Run("merge holding the ids lands", func(t *testing.T) {
				out := d.dataFile("merged.parquet", 0, 1, 8000, k3, "k3")
				if err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{a, b}, Outputs: []rowids.File{out}}); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("merge renumbering is refused", func(t *testing.T) {
				out := d.dataFile("renumbered.parquet", 1, 1, 8000, k3, "k3")
				err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{a, b}, Outputs: []rowids.File{out}})
				if !errors.Is(err, rowids.ErrCorrupt) {
					t.Fatalf("got %v, want ErrCorrupt", err)
				}
			})
			t.Run("rewrite applying a delete file lands", func(t *testing.T) {
				src := b
				src.Deletes = []rowids.DeleteFile{d.deleteFile("b-del.parquet", b.Path, k1, "k1", 0, 2999)}
				out := d.copyTo("rewritten.parquet",
					`SELECT i AS v, 5000 + i AS _ducklake_internal_row_id FROM range(1, 2999) t(i)`, rowIDField+encOpt(k3, "k3"))
				err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src},
					Outputs: []rowids.File{{Path: out, RecordCount: 2998, EncryptionKey: k3}}})
				if err != nil {
					t.Fatal(err)
				}
			})
			t.Run("rewrite resurrecting a deleted row is refused", func(t *testing.T) {
				src := b
				src.Deletes = []rowids.DeleteFile{d.deleteFile("b-del2.parquet", b.Path, k1, "k1", 0)}
				out := d.copyTo("resurrected.parquet",
					`SELECT i AS v, 5000 + i AS _ducklake_internal_row_id FROM range(0, 3000) t(i)`, rowIDField+encOpt(k3, "k3"))
				err := ch.Check(ctx, rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{src},
					Outputs: []rowids.File{{Path: out, RecordCount: 3000, EncryptionKey: k3}}})
				if !errors.Is(err, rowids.ErrCorrupt) {
					t.Fatalf("got %v, want ErrCorrupt", err)
				}
			})
		})
	}
}

func encOpt(key []byte, name string) string {
	if key == nil {
		return ""
	}
	return fmt.Sprintf(", ENCRYPTION_CONFIG {footer_key: '%s'}", name)
}

// TestEncryptedFilesFailClosed: an encrypted file read without its key, or
// with another, or altered, is an error that is not a verdict on its ids:
// the compaction is refused all the same.
func TestEncryptedFilesFailClosed(t *testing.T) {
	ctx := context.Background()
	d := newDuck(t)
	k := d.newKey("k")
	other := d.newKey("other")
	f := d.dataFile("enc.parquet", 0, 1, 100, k, "k")
	merge := func(src rowids.File) error {
		out := f
		return (&rowids.Checker{}).Check(ctx, rowids.Compaction{Kind: rowids.Merge, Sources: []rowids.File{src}, Outputs: []rowids.File{out}})
	}
	noKey := f
	noKey.EncryptionKey = nil
	wrongKey := f
	wrongKey.EncryptionKey = other
	raw, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	altered := f
	altered.Path = filepath.Join(d.dir, "altered.parquet")
	if err := os.WriteFile(altered.Path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]rowids.File{"no key": noKey, "wrong key": wrongKey, "altered": altered} {
		err := merge(src)
		if err == nil || errors.Is(err, rowids.ErrCorrupt) || !errors.Is(err, rowids.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid (unreadable), not a verdict", name, err)
		}
	}
}

// dvBlob encodes positions as a deletion-vector-v1 blob (Iceberg's puffin
// spec, as DuckLake writes it).
func dvBlob(t *testing.T, positions ...int64) []byte {
	t.Helper()
	buckets := map[uint32]*roaring.Bitmap{}
	var keys []uint32
	for _, p := range positions {
		hi := uint32(p >> 32)
		if buckets[hi] == nil {
			buckets[hi] = roaring.New()
			keys = append(keys, hi)
		}
		buckets[hi].Add(uint32(p))
	}
	var body bytes.Buffer
	body.Write([]byte{0xD1, 0xD3, 0x39, 0x64})
	binary.Write(&body, binary.LittleEndian, int64(len(keys)))
	for _, k := range keys {
		binary.Write(&body, binary.LittleEndian, k)
		if _, err := buckets[k].WriteTo(&body); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	binary.Write(&out, binary.BigEndian, uint32(body.Len()))
	out.Write(body.Bytes())
	binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(body.Bytes()))
	return out.Bytes()
}

// puffin wraps cumulative deletion-vector blobs in a Puffin container.
func puffin(blobs ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("PFA1")
	var meta []string
	for _, bl := range blobs {
		meta = append(meta, fmt.Sprintf(`{"type":"deletion-vector-v1","fields":[],"snapshot-id":-1,"sequence-number":-1,"offset":%d,"length":%d,"properties":{}}`, b.Len(), len(bl)))
		b.Write(bl)
	}
	payload := `{"blobs":[` + strings.Join(meta, ",") + `],"properties":{"created-by":"ducklake"}}`
	b.WriteString("PFA1")
	b.WriteString(payload)
	binary.Write(&b, binary.LittleEndian, uint32(len(payload)))
	binary.Write(&b, binary.LittleEndian, uint32(0))
	b.WriteString("PFA1")
	return b.Bytes()
}

// TestHoldReadsDeletionVectors: a rewrite whose source's deletes are a
// deletion vector, bare or in a Puffin file of cumulative blobs, is held
// like one with a positional delete file; a corrupt vector fails closed.
func TestHoldReadsDeletionVectors(t *testing.T) {
	ctx := context.Background()
	d := newDuck(t)
	src := d.dataFile("src.parquet", 100, 1, 10, nil, "")
	write := func(name string, b []byte) string {
		p := filepath.Join(d.dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bare := write("bare.puffin", dvBlob(t, 0, 9))
	container := write("cumulative.puffin", puffin(dvBlob(t, 0), dvBlob(t, 0, 9)))
	corrupt := dvBlob(t, 0, 9)
	corrupt[len(corrupt)-1] ^= 1
	broken := write("corrupt.puffin", corrupt)
	survivors := d.copyTo("out.parquet", `SELECT i AS v, 100 + i AS _ducklake_internal_row_id FROM range(1, 9) t(i)`, rowIDField)
	withAll := d.copyTo("out-all.parquet", `SELECT i AS v, 100 + i AS _ducklake_internal_row_id FROM range(0, 10) t(i)`, rowIDField)
	check := func(dv, out string, n int64) error {
		s := src
		s.Deletes = []rowids.DeleteFile{{Path: dv, Format: "puffin"}}
		return (&rowids.Checker{}).Check(ctx, rowids.Compaction{Kind: rowids.Rewrite, Sources: []rowids.File{s},
			Outputs: []rowids.File{{Path: out, RecordCount: n}}})
	}
	for _, dv := range []string{bare, container} {
		if err := check(dv, survivors, 8); err != nil {
			t.Errorf("%s: %v", filepath.Base(dv), err)
		}
		if err := check(dv, withAll, 10); !errors.Is(err, rowids.ErrCorrupt) {
			t.Errorf("%s: resurrection: got %v, want ErrCorrupt", filepath.Base(dv), err)
		}
	}
	if err := check(broken, survivors, 8); err == nil || errors.Is(err, rowids.ErrCorrupt) || !errors.Is(err, rowids.ErrInvalid) {
		t.Errorf("corrupt vector: got %v, want ErrInvalid", err)
	}
}
