package objstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey is returned (wrapped) when a key breaks the rules in
// ValidateKey. It is a caller bug, never a storage condition: retrying cannot
// help.
var ErrInvalidKey = errors.New("objstore: invalid key")

// MaxKeyLen bounds a key's length in bytes. S3 allows 1024; local file
// systems cap each name at 255 bytes, which ValidateKey does not check.
const MaxKeyLen = 1024

// ValidateKey reports whether key is acceptable to every backend: non-empty,
// at most MaxKeyLen bytes, valid UTF-8 without NUL or other control bytes,
// not beginning or ending with "/", and without empty, "." or ".." segments.
// Every backend calls it before touching storage, so a bad key fails the same
// way everywhere instead of escaping a directory or aliasing another key.
func ValidateKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("key %q: %s: %w", key, why, ErrInvalidKey) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxKeyLen))
	case strings.HasPrefix(key, "/"), strings.HasSuffix(key, "/"):
		return bad("leading or trailing slash")
	}
	if !utf8.ValidString(key) {
		return bad("not valid UTF-8")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("dot segment")
		}
	}
	return nil
}

// ValidateKeys is ValidateKey for each key, failing as operation op would
// for the first invalid one.
func ValidateKeys(op string, keys []string) error {
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return OpError(op, k, err)
		}
	}
	return nil
}

// OpError wraps err with the operation and key, in the one format every
// backend uses (`<op> "<key>": <err>`), so that a failure deep in slate still
// names the object it was about. Callers branch with errors.Is on the
// sentinels, never on the text.
func OpError(op, key string, err error) error {
	return fmt.Errorf("%s %q: %w", op, key, err)
}
