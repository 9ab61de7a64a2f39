//go:build azure

package azure_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/objstore/azure"
)

// No Azure endpoint is reachable here: check that URLs are understood and
// that a client for a local emulator opens without touching the network.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AZURE_STORAGE_ACCOUNT", "devstoreaccount1")
	t.Setenv("AZURE_STORAGE_KEY", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
	s, err := azure.OpenURL(ctx, "azblob://container/lake?localemu=true&domain=127.0.0.1:10000&protocol=http")
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	if got := s.String(); got != "azblob://container/lake/" {
		t.Fatalf("String = %q", got)
	}
	_ = s.Close()
	for _, tc := range []struct{ url, want string }{
		{"s3://b", "not an azblob://"},
		{"azblob:///p", "no bucket"},
		{"azblob://c/a//b", "invalid key"},
		{"azblob://c?bogus=1", "bogus"},
	} {
		if _, err := azure.OpenURL(ctx, tc.url); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenURL(%q) = %v, want error containing %q", tc.url, err, tc.want)
		}
	}
}
