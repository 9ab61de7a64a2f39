package rowids

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
)

// Opener resolves a data-file path to random-access bytes. The returned
// closer releases whatever Open acquired.
type Opener interface {
	Open(ctx context.Context, path string) (r io.ReaderAt, size int64, closer io.Closer, err error)
}

// LocalOpener opens local paths (optionally written file:///abs/path).
type LocalOpener struct{}

// Open implements Opener.
func (LocalOpener) Open(_ context.Context, path string) (io.ReaderAt, int64, io.Closer, error) {
	path = strings.TrimPrefix(path, "file://")
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rowids: open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, fmt.Errorf("rowids: stat %s: %w", path, err)
	}
	return f, st.Size(), f, nil
}

// StoreOpener reads files through an objstore.Store: a path beginning with
// Prefix (for example "s3://bucket/lake/") names the key after it.
type StoreOpener struct {
	Store  objstore.Store
	Prefix string
}

// Open implements Opener.
func (o StoreOpener) Open(ctx context.Context, path string) (io.ReaderAt, int64, io.Closer, error) {
	key, ok := strings.CutPrefix(path, o.Prefix)
	if !ok {
		return nil, 0, nil, fmt.Errorf("rowids: %s is not under %s", path, o.Prefix)
	}
	info, err := o.Store.Stat(ctx, key)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rowids: %s: %w", path, err)
	}
	return &storeReaderAt{ctx: ctx, store: o.Store, key: key, size: info.Size}, info.Size, io.NopCloser(nil), nil
}

type storeReaderAt struct {
	ctx   context.Context
	store objstore.Store
	key   string
	size  int64
}

func (r *storeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if off+n > r.size {
		n = r.size - off
	}
	b, err := r.store.GetRange(r.ctx, r.key, off, n)
	if err != nil {
		return 0, err
	}
	copied := copy(p, b)
	if copied < len(p) {
		return copied, io.EOF
	}
	return copied, nil
}

// URLOpener opens local paths directly and any path with a URL scheme
// (s3://bucket/key, mem://name/key, …) through objurl: the store is opened
// once per scheme://host with Query appended (for example
// "endpoint=http://127.0.0.1:9000&use_path_style=true") and the key is the
// URL path.
type URLOpener struct {
	Query string

	mu     sync.Mutex
	stores map[string]objstore.Store
}

// Open implements Opener.
func (o *URLOpener) Open(ctx context.Context, path string) (io.ReaderAt, int64, io.Closer, error) {
	u, err := url.Parse(path)
	if err != nil || u.Scheme == "" || u.Scheme == "file" || len(u.Scheme) == 1 /* C:\ */ {
		return LocalOpener{}.Open(ctx, path)
	}
	root := u.Scheme + "://" + u.Host
	o.mu.Lock()
	st, ok := o.stores[root]
	if !ok {
		open := root
		if o.Query != "" {
			open += "?" + o.Query
		}
		st, err = objurl.Open(ctx, open)
		if err != nil {
			o.mu.Unlock()
			return nil, 0, nil, fmt.Errorf("rowids: open store for %s: %w", path, err)
		}
		if o.stores == nil {
			o.stores = map[string]objstore.Store{}
		}
		o.stores[root] = st
	}
	o.mu.Unlock()
	return StoreOpener{Store: st, Prefix: root + "/"}.Open(ctx, path)
}

// Close closes every store the opener opened.
func (o *URLOpener) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for _, st := range o.stores {
		errs = append(errs, st.Close())
	}
	o.stores = nil
	return errors.Join(errs...)
}

// openParquet opens the Parquet file at path; an encrypted one is
// decrypted with key (a plaintext copy of the columns keep selects, in
// memory). An encrypted file without a key, or with the wrong one, is an
// error: the hold fails closed.
func openParquet(ctx context.Context, op Opener, path string, key []byte, keep func(format.SchemaElement) bool) (*parquet.File, io.Closer, error) {
	r, size, closer, err := op.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	enc, err := encrypted(r, size)
	if err != nil {
		closer.Close()
		return nil, nil, fmt.Errorf("rowids: %s: %w", path, err)
	}
	if enc {
		if len(key) == 0 {
			closer.Close()
			return nil, nil, fmt.Errorf("%w: %s is encrypted and the catalog records no key for it", ErrInvalid, path)
		}
		plain, err := decryptParquet(r, size, key, keep)
		closer.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
		}
		r, size, closer = bytes.NewReader(plain), int64(len(plain)), io.NopCloser(nil)
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		closer.Close()
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	return f, closer, nil
}

// keepRowID selects the embedded row-id column of a data file.
func keepRowID(el format.SchemaElement) bool { return el.FieldID == RowIDFieldID }

// keepDeleteColumns selects a positional delete file's columns.
func keepDeleteColumns(el format.SchemaElement) bool {
	return el.Name == "file_path" || el.Name == "pos"
}

// readFileIDs returns f's row ids. withPositions asks for the ids in file
// order as well (a rewrite maps delete-file positions through them).
func readFileIDs(ctx context.Context, op Opener, f File, withPositions bool) (fileIDs, error) {
	pf, closer, err := openParquet(ctx, op, f.Path, f.EncryptionKey, keepRowID)
	if err != nil {
		return fileIDs{}, err
	}
	defer closer.Close()
	if pf.NumRows() != f.RecordCount {
		return fileIDs{}, fmt.Errorf("%w: %s holds %d rows, the catalog says %d", ErrInvalid, f.Path, pf.NumRows(), f.RecordCount)
	}
	col := embeddedRowIDColumn(pf)
	if col == nil {
		if !f.HasRowIDStart {
			return fileIDs{}, fmt.Errorf("%w: %s has neither row_id_start nor a %d column", ErrInvalid, f.Path, RowIDFieldID)
		}
		out := fileIDs{start: f.RowIDStart, count: f.RecordCount}
		if f.RecordCount > 0 {
			out.spans = []Span{{f.RowIDStart, f.RowIDStart + f.RecordCount}}
		}
		return out, nil
	}
	out := fileIDs{count: f.RecordCount}
	var all []int64
	for i, rg := range pf.RowGroups() {
		if !withPositions {
			if s, ok := provenRun(pf, i, col.Index(), rg.NumRows()); ok {
				out.spans = append(out.spans, s)
				continue
			}
		}
		ids, err := readInt64Column(rg.ColumnChunks()[col.Index()])
		if err != nil {
			return fileIDs{}, fmt.Errorf("%w: %s: row group %d: %v", ErrInvalid, f.Path, i, err)
		}
		if int64(len(ids)) != rg.NumRows() {
			return fileIDs{}, fmt.Errorf("%w: %s: row group %d: %d row ids for %d rows", ErrInvalid, f.Path, i, len(ids), rg.NumRows())
		}
		if withPositions {
			all = append(all, ids...)
		}
		out.spans = append(out.spans, spansOf(ids)...)
	}
	out.ordered = all
	return out, nil
}

// embeddedRowIDColumn finds the top-level leaf with the row-id field id.
func embeddedRowIDColumn(f *parquet.File) *parquet.Column {
	for _, c := range f.Root().Columns() {
		if c.Leaf() && c.ID() == RowIDFieldID {
			return c
		}
	}
	return nil
}

// provenRun reports whether row group rg's footer statistics prove its row
// ids are exactly one contiguous run: min and max present, no nulls, and a
// distinct count equal to the row count spanning max-min+1 values.
func provenRun(f *parquet.File, rg, col int, rows int64) (Span, bool) {
	md := f.Metadata()
	if rg >= len(md.RowGroups) || col >= len(md.RowGroups[rg].Columns) {
		return Span{}, false
	}
	st := md.RowGroups[rg].Columns[col].MetaData.Statistics
	if rows == 0 || st.NullCount != 0 || st.DistinctCount != rows || len(st.MinValue) != 8 || len(st.MaxValue) != 8 {
		return Span{}, false
	}
	lo := int64(binary.LittleEndian.Uint64(st.MinValue))
	hi := int64(binary.LittleEndian.Uint64(st.MaxValue))
	if hi < lo || hi-lo+1 != rows {
		return Span{}, false
	}
	return Span{lo, hi + 1}, true
}

// readInt64Column decodes a BIGINT column chunk in row order. NULLs are an
// error: a row without an id cannot be held to anything.
func readInt64Column(chunk parquet.ColumnChunk) ([]int64, error) {
	pages := chunk.Pages()
	defer pages.Close()
	var out []int64
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if page.NumNulls() > 0 {
			parquet.Release(page)
			return nil, fmt.Errorf("%d NULL row ids", page.NumNulls())
		}
		if page.Dictionary() == nil {
			// Optional columns do not implement Int64Reader (a parquet-go pitfall):
			// take the dense non-null values directly.
			data := page.Data()
			if vals := data.Int64(); int64(len(vals)) == page.NumValues() {
				out = append(out, vals...)
				parquet.Release(page)
				continue
			}
		}
		vals, err := readValues(page)
		parquet.Release(page)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			out = append(out, v.Int64())
		}
	}
}

// readValues reads every value of a page through the generic reader (works
// for dictionary-encoded and optional pages alike).
func readValues(page parquet.Page) ([]parquet.Value, error) {
	vals := make([]parquet.Value, page.NumValues())
	r := page.Values()
	n := 0
	for n < len(vals) {
		k, err := r.ReadValues(vals[n:])
		n += k
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, io.ErrNoProgress
		}
	}
	return vals[:n], nil
}

// readDeletePositions reads a Parquet delete file (columns file_path, pos)
// and returns the positions it deletes from dataPath. Rows naming another
// file are ignored, unless no row names dataPath and every row names one
// single file: DuckLake writes one delete file per data file, and the path
// it stores may be spelled differently (absolute vs. relative) from ours.
func readDeletePositions(ctx context.Context, op Opener, df DeleteFile, dataPath string) ([]int64, error) {
	switch df.Format {
	case "", "parquet":
	case "puffin":
		return readDeletionVector(ctx, op, df)
	default:
		return nil, fmt.Errorf("%w: delete file %s has format %q, which the hold cannot read", ErrInvalid, df.Path, df.Format)
	}
	path := df.Path
	pf, closer, err := openParquet(ctx, op, path, df.EncryptionKey, keepDeleteColumns)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	fp, pos := pf.Root().Column("file_path"), pf.Root().Column("pos")
	if fp == nil || pos == nil {
		return nil, fmt.Errorf("%w: delete file %s lacks file_path/pos columns", ErrInvalid, path)
	}
	var paths []string
	var positions []int64
	for i, rg := range pf.RowGroups() {
		ps, err := readStringColumn(rg.ColumnChunks()[fp.Index()])
		if err != nil {
			return nil, fmt.Errorf("%w: delete file %s: row group %d: %v", ErrInvalid, path, i, err)
		}
		ns, err := readInt64Column(rg.ColumnChunks()[pos.Index()])
		if err != nil {
			return nil, fmt.Errorf("%w: delete file %s: row group %d: %v", ErrInvalid, path, i, err)
		}
		if len(ps) != len(ns) {
			return nil, fmt.Errorf("%w: delete file %s: %d paths for %d positions", ErrInvalid, path, len(ps), len(ns))
		}
		paths = append(paths, ps...)
		positions = append(positions, ns...)
	}
	var out []int64
	single := true
	for i, p := range paths {
		if p == dataPath || strings.TrimPrefix(p, "file://") == strings.TrimPrefix(dataPath, "file://") {
			out = append(out, positions[i])
		}
		if p != paths[0] {
			single = false
		}
	}
	if len(out) == 0 && single {
		out = positions
	}
	return out, nil
}

func readStringColumn(chunk parquet.ColumnChunk) ([]string, error) {
	pages := chunk.Pages()
	defer pages.Close()
	var out []string
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		vals, err := readValues(page)
		if err != nil {
			parquet.Release(page)
			return nil, err
		}
		for _, v := range vals {
			if v.IsNull() {
				parquet.Release(page)
				return nil, errors.New("NULL file_path")
			}
			out = append(out, string(v.ByteArray())) // copies out of the page buffer
		}
		parquet.Release(page)
	}
}
