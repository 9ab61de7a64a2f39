package blobstore_test

import (
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/blobstore"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

// The adapter over gocloud's in-memory driver: checks the adapter's own
// mapping (ranges, errors, listing) apart from any S3 server.
func TestMemblobConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store {
		return blobstore.New(memblob.OpenBucket(nil), "memblob")
	})
}

// A prefixed bucket confines keys and strips the prefix from List.
func TestPrefixedConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store {
		return blobstore.New(blob.PrefixedBucket(memblob.OpenBucket(nil), "lake/catalog/"), "memblob/lake/catalog/")
	})
}

func TestPrefixApplied(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	open := func() *blob.Bucket {
		b, err := fileblob.OpenBucket(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := open()
	defer raw.Close()
	s := blobstore.New(blob.PrefixedBucket(open(), "lake/"), "fileblob/lake/")
	defer s.Close()
	if err := s.Put(ctx, "wal/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := raw.WriteAll(ctx, "outside", []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := raw.Exists(ctx, "lake/wal/1"); err != nil || !ok {
		t.Fatalf("object not stored under the prefix: %v, %v", ok, err)
	}
	l, err := s.List(ctx, "")
	if err != nil || len(l) != 1 || l[0].Key != "wal/1" {
		t.Fatalf("List = %v, %v; want only wal/1", l, err)
	}
}

// OpenURL goes through gocloud's URL mux (mem:// is registered by memblob).
func TestOpenURL(t *testing.T) {
	ctx := t.Context()
	s, err := blobstore.OpenURL(ctx, "mem://bucket/some/prefix")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.String(); got != "mem://bucket/some/prefix/" {
		t.Fatalf("String = %q", got)
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Bucket().Exists(ctx, "k"); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	for _, bad := range []string{"mem:///p", "mem://b/../x", "mem://b?prefix=x/", "nosuch://b", "mem://u:p@b"} {
		if s, err := blobstore.OpenURL(ctx, bad); err == nil {
			_ = s.Close()
			t.Errorf("OpenURL(%q) succeeded", bad)
		}
	}
}
