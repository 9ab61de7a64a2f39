package objstoretest_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
	"github.com/moraine-db/moraine/internal/objstore/s3"
)

// The helpers hand out working, empty, independent stores. (The full suite
// runs against each backend in its own package.)
func TestBackends(t *testing.T) {
	ctx := context.Background()
	for _, b := range objstoretest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			one, two := b.New(t), b.New(t)
			if err := one.PutIfAbsent(ctx, "manifest/1", []byte("m")); err != nil {
				t.Fatal(err)
			}
			if err := one.PutIfAbsent(ctx, "manifest/1", []byte("m")); !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("second PutIfAbsent = %v", err)
			}
			if got, err := one.Get(ctx, "manifest/1"); err != nil || !bytes.Equal(got, []byte("m")) {
				t.Fatalf("Get = %q, %v", got, err)
			}
			if l, err := two.List(ctx, ""); err != nil || len(l) != 0 {
				t.Fatalf("second store is not empty and separate: %v, %v", l, err)
			}
		})
	}
}

// Stores opened on one server share buckets; URL and Config agree.
func TestS3ServerHelpers(t *testing.T) {
	ctx := context.Background()
	srv := objstoretest.StartS3(t)
	b := srv.NewBucket(t)
	a := srv.Open(t, b, "p/")
	if err := a.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	viaURL, err := s3.OpenURL(ctx, srv.URL(b, "p/"))
	if err != nil {
		t.Fatal(err)
	}
	defer viaURL.Close()
	if got, err := viaURL.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("Get through URL = %q, %v", got, err)
	}
	root := srv.Open(t, b, "")
	if _, err := root.Stat(ctx, "p/k"); err != nil {
		t.Fatalf("prefix not applied: %v", err)
	}
	if c := srv.Config(b, "p/"); c.Endpoint != srv.Endpoint || c.Bucket != b || !c.UsePathStyle {
		t.Fatalf("Config = %+v", c)
	}
}
