package objstore_test

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/moraine-db/moraine/internal/objstore"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"wal/00000000000000000001.wal", true},
		{"a/b/c", true},
		{".hidden/..x/x..", true},
		{"ünïcödé/key with spaces", true},
		{strings.Repeat("k", objstore.MaxKeyLen), true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{".", false},
		{"..", false},
		{"a/./b", false},
		{"a/../b", false},
		{"a\x00b", false},
		{"a\tb", false},
		{"a\x7fb", false},
		{"\xff", false},
		{strings.Repeat("k", objstore.MaxKeyLen+1), false},
	} {
		err := objstore.ValidateKey(tc.key)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
		if err != nil && !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, not ErrInvalidKey", tc.key, err)
		}
	}
}

// FuzzValidateKey pins what backends rely on: an accepted key is clean
// (the same after path cleaning), relative, and joined to a root it stays
// strictly inside it — so a file backend cannot be escaped or aliased.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "a/../../b", "/abs", "a//b", "a/.", "./a", "a\x00", "é/\xff", "..a/b..", " / "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if objstore.ValidateKey(key) != nil {
			return
		}
		if !utf8.ValidString(key) || path.Clean(key) != key || path.IsAbs(key) || strings.HasPrefix(key, "../") || key == ".." {
			t.Fatalf("accepted unclean key %q", key)
		}
		root := filepath.FromSlash("/srv/objects")
		p := filepath.Join(root, filepath.FromSlash(key))
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("key %q escapes the root: %s", key, p)
		}
	})
}
