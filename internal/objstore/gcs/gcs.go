//go:build gcs

package gcs

import (
	"context"
	"fmt"
	"strings"

	_ "gocloud.dev/blob/gcsblob" // registers gs:// with gocloud's URL mux

	"github.com/moraine-db/moraine/internal/objstore/blobstore"
)

// Scheme is the URL scheme this package opens.
const Scheme = "gs"

// OpenURL opens gs://bucket/prefix?params.
func OpenURL(ctx context.Context, raw string) (*blobstore.Store, error) {
	if !strings.HasPrefix(raw, Scheme+"://") {
		return nil, fmt.Errorf("gcs: %q is not a %s:// URL", raw, Scheme)
	}
	s, err := blobstore.OpenURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	return s, nil
}
