//go:build azure

package azure

import (
	"context"
	"fmt"
	"strings"

	_ "gocloud.dev/blob/azureblob" // registers azblob:// with gocloud's URL mux

	"github.com/moraine-db/moraine/internal/objstore/blobstore"
)

// Scheme is the URL scheme this package opens.
const Scheme = "azblob"

// OpenURL opens azblob://container/prefix?params.
func OpenURL(ctx context.Context, raw string) (*blobstore.Store, error) {
	if !strings.HasPrefix(raw, Scheme+"://") {
		return nil, fmt.Errorf("azure: %q is not an %s:// URL", raw, Scheme)
	}
	s, err := blobstore.OpenURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	return s, nil
}
