// Package blobstore adapts a gocloud.dev/blob Bucket to objstore.Store. The
// S3, GCS and Azure backends are this adapter over the matching gocloud
// driver; what differs between them is only how the bucket is opened.
//
// PutIfAbsent is a write with WriterOptions.IfNotExist, which every cloud
// driver turns into a server-side precondition (S3 and Azure: If-None-Match:
// *, GCS: DoesNotExist), so it is atomic across every client of the bucket.
// The server's "precondition failed" becomes objstore.ErrExists.
//
// Ambiguity: the drivers' HTTP clients retry failed requests. If a
// create-if-absent PUT lands but its response is lost, the retry finds the
// object and reports ErrExists although this caller wrote it. Callers that
// must know (slate's manifest advance) read the object back and compare.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-db/moraine/internal/objstore"
)

// Store is an objstore.Store over a blob.Bucket.
type Store struct {
	bucket *blob.Bucket
	name   string // for error messages and String, e.g. "s3://bucket/prefix/"
	opts   options
	mu     struct {
		sync.RWMutex
		closed bool
	}
}

var _ objstore.Store = (*Store)(nil)

// Option adjusts a Store.
type Option func(*options)

type options struct {
	rangeReader *blob.ReaderOptions
}

// WithRangeReaderOptions passes o to every ranged read (not to whole-object
// Gets), for driver-specific per-request settings through BeforeRead.
func WithRangeReaderOptions(o *blob.ReaderOptions) Option {
	return func(opts *options) { opts.rangeReader = o }
}

// New wraps bucket, which the Store then owns (Close closes it). name
// describes the bucket in errors. To confine the store to a key prefix,
// pass blob.PrefixedBucket(bucket, prefix).
func New(bucket *blob.Bucket, name string, opts ...Option) *Store {
	s := &Store{bucket: bucket, name: name}
	for _, o := range opts {
		o(&s.opts)
	}
	return s
}

// String returns the name given to New.
func (s *Store) String() string { return s.name }

// Bucket returns the underlying bucket, for driver-specific escapes (As).
func (s *Store) Bucket() *blob.Bucket { return s.bucket }

// begin checks the key, context and closed flag. On nil error the caller
// must s.mu.RUnlock.
func (s *Store) begin(ctx context.Context, op, key string, validate bool) error {
	if validate {
		if err := objstore.ValidateKey(key); err != nil {
			return objstore.OpError(op, key, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return objstore.OpError(op, key, err)
	}
	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return objstore.OpError(op, key, objstore.ErrClosed)
	}
	return nil
}

// mapErr turns a driver error into the objstore vocabulary. A context error
// stays a context error even when the driver reports it as Unknown.
func (s *Store) mapErr(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return objstore.OpError(op, key, fmt.Errorf("%w (%v)", cerr, err))
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return objstore.OpError(op, key, fmt.Errorf("%w (%s)", objstore.ErrNotFound, s.name))
	case gcerrors.FailedPrecondition:
		if op == "put-if-absent" {
			return objstore.OpError(op, key, objstore.ErrExists)
		}
	case gcerrors.Canceled:
		return objstore.OpError(op, key, fmt.Errorf("%w (%v)", context.Canceled, err))
	case gcerrors.DeadlineExceeded:
		return objstore.OpError(op, key, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err))
	}
	return objstore.OpError(op, key, fmt.Errorf("%s: %w", s.name, err))
}

func writerOptions(ifNotExist bool) *blob.WriterOptions {
	// An explicit content type stops gocloud sniffing the bytes.
	return &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist}
}

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.begin(ctx, "put", key, true); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.bucket.WriteAll(ctx, key, data, writerOptions(false)); err != nil {
		return s.mapErr(ctx, "put", key, err)
	}
	return nil
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.begin(ctx, "put-if-absent", key, true); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.bucket.WriteAll(ctx, key, data, writerOptions(true)); err != nil {
		return s.mapErr(ctx, "put-if-absent", key, err)
	}
	return nil
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.begin(ctx, "get", key, true); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	b, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, s.mapErr(ctx, "get", key, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.begin(ctx, "get-range", key, true); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if offset < 0 {
		return nil, objstore.OpError("get-range", key, objstore.ErrInvalidRange)
	}
	if length == 0 {
		// Servers cannot express an empty range; only existence matters.
		if _, err := s.bucket.Attributes(ctx, key); err != nil {
			return nil, s.mapErr(ctx, "get-range", key, err)
		}
		return []byte{}, nil
	}
	r, err := s.bucket.NewRangeReader(ctx, key, offset, length, s.opts.rangeReader)
	if err != nil {
		// A range that starts at or past the end (any range of an empty
		// object) is "416 Range Not Satisfiable" on S3, which gocloud does
		// not classify. Our contract says: empty result, if the object
		// exists.
		attrs, aerr := s.bucket.Attributes(ctx, key)
		if aerr != nil {
			return nil, s.mapErr(ctx, "get-range", key, aerr)
		}
		if offset >= attrs.Size {
			return []byte{}, nil
		}
		return nil, s.mapErr(ctx, "get-range", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, s.mapErr(ctx, "get-range", key, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := s.begin(ctx, "list", prefix, false); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := []objstore.ObjectInfo{}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.mapErr(ctx, "list", prefix, err)
		}
		if o.IsDir {
			continue // only with a delimiter, which we never set
		}
		out = append(out, objstore.ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
	}
	// S3 lists in UTF-8 byte order already; other servers need not.
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.begin(ctx, "delete", key, true); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.mapErr(ctx, "delete", key, err)
	}
	return nil
}

// deleteParallelism bounds the DELETE requests DeleteMany has in flight:
// one at a time, a garbage collection round of thousands of objects would
// take a round trip each.
const deleteParallelism = 16

// DeleteMany sends a DELETE per key, up to deleteParallelism at once (the
// gocloud API has no batch delete); the first failure cancels the rest.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if err := objstore.ValidateKeys("delete", keys); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.begin(ctx, "delete", keys[0], false); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteParallelism)
	for _, k := range keys {
		g.Go(func() error {
			if err := s.bucket.Delete(gctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return s.mapErr(gctx, "delete", k, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := s.begin(ctx, "stat", key, true); err != nil {
		return objstore.ObjectInfo{}, err
	}
	defer s.mu.RUnlock()
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return objstore.ObjectInfo{}, s.mapErr(ctx, "stat", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

// Close closes the bucket once; later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.name, err)
	}
	return nil
}
