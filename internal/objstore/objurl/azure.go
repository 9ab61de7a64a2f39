//go:build azure

package objurl

import (
	"context"
	"net/url"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/azure"
)

func init() {
	register(azure.Scheme, func(ctx context.Context, raw string, _ *url.URL) (objstore.Store, error) {
		return azure.OpenURL(ctx, raw)
	})
}
