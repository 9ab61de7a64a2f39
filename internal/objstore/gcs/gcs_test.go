//go:build gcs

package gcs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore/gcs"
)

// No GCS server is reachable here: check that URLs are understood and that
// an anonymous client opens without touching the network.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	s, err := gcs.OpenURL(ctx, "gs://some-bucket/lake/catalog?anonymous=true")
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	if got := s.String(); got != "gs://some-bucket/lake/catalog/" {
		t.Fatalf("String = %q", got)
	}
	_ = s.Close()
	for _, tc := range []struct{ url, want string }{
		{"s3://b", "not a gs://"},
		{"gs:///p?anonymous=true", "no bucket"},
		{"gs://b/../x?anonymous=true", "invalid key"},
		{"gs://b?anonymous=true&bogus=1", "bogus"},
	} {
		if _, err := gcs.OpenURL(ctx, tc.url); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenURL(%q) = %v, want error containing %q", tc.url, err, tc.want)
		}
	}
}
