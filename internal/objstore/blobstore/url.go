package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"

	"github.com/moraine-db/moraine/internal/objstore"
)

// NormalizePrefix turns a URL path ("/lake/catalog") into a key prefix
// ("lake/catalog/"), refusing prefixes that are not valid key paths.
func NormalizePrefix(path string) (string, error) {
	p := strings.Trim(path, "/")
	if p == "" {
		return "", nil
	}
	if err := objstore.ValidateKey(p); err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	return p + "/", nil
}

// OpenURL opens scheme://bucket/prefix?params through gocloud's default URL
// mux, for drivers whose package registered scheme there (import it for its
// side effect). The URL path is moraine's key prefix; the query goes to the
// driver unchanged, so its own parameters (credentials files, emulator
// endpoints) keep working. Driver-level "prefix" is refused to avoid two
// ways of saying one thing.
func OpenURL(ctx context.Context, raw string) (*Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", raw, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no bucket", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q: credentials do not belong in the URL", u.Redacted())
	}
	if u.Query().Has("prefix") {
		return nil, fmt.Errorf("%q: give the prefix as the URL path, not a parameter", raw)
	}
	prefix, err := NormalizePrefix(u.Path)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	driverURL := url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: u.RawQuery}
	bucket, err := blob.OpenBucket(ctx, driverURL.String())
	if err != nil {
		return nil, fmt.Errorf("open %s://%s: %w", u.Scheme, u.Host, err)
	}
	if prefix != "" {
		bucket = blob.PrefixedBucket(bucket, prefix)
	}
	return New(bucket, u.Scheme+"://"+u.Host+"/"+prefix), nil
}
