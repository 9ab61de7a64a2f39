package objstoretest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/s3"
)

// S3Server is an in-process S3 server (gofakes3 over its memory backend)
// listening on loopback. It speaks the real S3 protocol, including
// If-None-Match: * on PUT, so stores opened on it exercise the same code
// path as AWS. It stops when the test ends.
type S3Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:port".
	Endpoint string
	backend  *s3mem.Backend
	next     atomic.Int64
}

// StartS3 starts a server for the duration of t. A putDelay, if given,
// holds every PUT request (object writes, conditional ones included) that
// long before serving it, so that a writer has several in flight.
func StartS3(t testing.TB, putDelay ...time.Duration) *S3Server {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	var h http.Handler = faker.Server()
	if len(putDelay) > 0 && putDelay[0] > 0 {
		inner, d := h, putDelay[0]
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				time.Sleep(d)
			}
			inner.ServeHTTP(w, r)
		})
	}
	return serveS3(t, h, backend)
}

// StartS3IgnoringConditions starts an S3 server that ignores
// If-None-Match on PUT, as some S3-compatible servers do: a create-if-absent
// overwrites an existing object instead of failing. For tests of what
// moraine does on such a store.
func StartS3IgnoringConditions(t testing.TB) *S3Server {
	t.Helper()
	backend := s3mem.New()
	inner := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		inner.ServeHTTP(w, r)
	})
	return serveS3(t, h, backend)
}

func serveS3(t testing.TB, h http.Handler, backend *s3mem.Backend) *S3Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &S3Server{Endpoint: srv.URL, backend: backend}
}

// CreateBucket makes a bucket; it fails the test if that is impossible.
func (s *S3Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("objstoretest: create bucket %q: %v", name, err)
	}
}

// NewBucket creates a bucket with a fresh name and returns the name.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("bucket-%d", s.next.Add(1))
	s.CreateBucket(t, name)
	return name
}

// Config returns the s3.Config of bucket/prefix on this server, with static
// test credentials (the server does not check them, but the SDK signs).
func (s *S3Server) Config(bucket, prefix string) s3.Config {
	return s3.Config{
		Bucket:       bucket,
		Prefix:       prefix,
		Endpoint:     s.Endpoint,
		Region:       s3.DefaultRegion,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("moraine-test", "moraine-test-secret", ""),
	}
}

// URL returns an s3:// URL for bucket/prefix on this server that needs no
// credentials from the environment (anonymous=true), for code under test
// that takes a store URL. prefix is empty or ends with "/".
func (s *S3Server) URL(bucket, prefix string) string {
	c := s.Config(bucket, prefix)
	c.Credentials, c.Anonymous = nil, true
	return c.String()
}

// Open opens bucket/prefix as a Store that is closed when the test ends.
func (s *S3Server) Open(t testing.TB, bucket, prefix string) objstore.Store {
	t.Helper()
	st, err := s3.Open(context.Background(), s.Config(bucket, prefix))
	if err != nil {
		t.Fatalf("objstoretest: open s3 store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// NewS3 starts an in-process S3 server and returns a Store on a new bucket
// of it: the one-line way for a test to run against the real S3 protocol.
func NewS3(t testing.TB) objstore.Store {
	t.Helper()
	srv := StartS3(t)
	return srv.Open(t, srv.NewBucket(t), "")
}
