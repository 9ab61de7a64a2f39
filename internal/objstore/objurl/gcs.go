//go:build gcs

package objurl

import (
	"context"
	"net/url"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/gcs"
)

func init() {
	register(gcs.Scheme, func(ctx context.Context, raw string, _ *url.URL) (objstore.Store, error) {
		return gcs.OpenURL(ctx, raw)
	})
}
