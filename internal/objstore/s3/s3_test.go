package s3_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
	"github.com/moraine-db/moraine/internal/objstore/s3"
)

func TestConformance(t *testing.T) {
	srv := objstoretest.StartS3(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return srv.Open(t, srv.NewBucket(t), "")
	})
}

func TestConformancePrefixedAnonymousURL(t *testing.T) {
	srv := objstoretest.StartS3(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		st, err := s3.OpenURL(context.Background(), srv.URL(srv.NewBucket(t), "lake/catalog/"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// Two stores on one bucket with different prefixes do not see each other,
// and a store on the bucket root sees both under their prefixes.
func TestPrefixIsolation(t *testing.T) {
	ctx := context.Background()
	srv := objstoretest.StartS3(t)
	b := srv.NewBucket(t)
	a, c, root := srv.Open(t, b, "a/"), srv.Open(t, b, "c/"), srv.Open(t, b, "")
	if err := a.PutIfAbsent(ctx, "manifest/1", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := c.PutIfAbsent(ctx, "manifest/1", []byte("C")); err != nil {
		t.Fatalf("same key under another prefix: %v", err)
	}
	l, err := root.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range l {
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "a/manifest/1,c/manifest/1" {
		t.Fatalf("root List = %v", keys)
	}
}

func TestMissingBucket(t *testing.T) {
	srv := objstoretest.StartS3(t)
	st := srv.Open(t, "no-such-bucket", "")
	_, err := st.Get(context.Background(), "k")
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get in a missing bucket = %v, want ErrNotFound", err)
	}
	if err := st.Put(context.Background(), "k", nil); err == nil {
		t.Fatal("Put into a missing bucket succeeded")
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    s3.Config
		wantErr string
	}{
		{in: "s3://b", want: s3.Config{Bucket: "b"}},
		{in: "s3://b/", want: s3.Config{Bucket: "b"}},
		{in: "s3://b/lake/cat", want: s3.Config{Bucket: "b", Prefix: "lake/cat/"}},
		{in: "s3://b/lake/?region=eu-west-1", want: s3.Config{Bucket: "b", Prefix: "lake/", Region: "eu-west-1"}},
		{
			in:   "s3://b/p?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true&anonymous=1&request_checksum=when_required",
			want: s3.Config{Bucket: "b", Prefix: "p/", Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", UsePathStyle: true, Anonymous: true, RequestChecksum: 2},
		},
		{in: "s3:///p", wantErr: "no bucket"},
		{in: "gs://b", wantErr: "scheme"},
		{in: "s3://b?endpoit=http://x", wantErr: "unknown parameter"},
		{in: "s3://b?use_path_style=yes", wantErr: "not a boolean"},
		{in: "s3://b?endpoint=127.0.0.1:9000", wantErr: "not an absolute URL"},
		{in: "s3://b?request_checksum=never", wantErr: "request_checksum"},
		{in: "s3://key:secret@b/p", wantErr: "credentials"},
		{in: "s3://b/../etc", wantErr: "invalid key"},
		{in: "s3://b/a//b", wantErr: "invalid key"},
	} {
		got, err := s3.ParseURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%q) err = %v, want containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if back, err := s3.ParseURL(got.String()); err != nil || back != got {
			t.Errorf("round trip %q -> %q -> %+v, %v", tc.in, got.String(), back, err)
		}
	}
}
