package datum

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// CheckUTF8 reports text that is not valid in the server encoding, UTF8,
// as PostgreSQL's input functions and protocol conversions do (every string
// a client sends is verified before it is stored or parsed): 22021
// `invalid byte sequence for encoding "UTF8": 0x…`, naming the bytes of
// the first bad character. NUL is invalid too: PostgreSQL's text cannot
// hold it.
func CheckUTF8(s string) error {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return nil
	}
	i := 0
	for i < len(s) {
		if s[i] == 0 {
			break
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w <= 1 {
			break
		}
		i += w
	}
	// The bytes PostgreSQL names (pg_utf_mblen): as many as the lead
	// byte announces, one for a byte that announces nothing.
	n := 1
	switch c := s[i]; {
	case c&0xe0 == 0xc0:
		n = 2
	case c&0xf0 == 0xe0:
		n = 3
	case c&0xf8 == 0xf0:
		n = 4
	}
	n = min(n, len(s)-i)
	var b strings.Builder
	for k := 0; k < n; k++ {
		if k > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "0x%02x", s[i+k])
	}
	return &SyntaxError{Code: pgcode.CharacterNotInRepertoire, Msg: fmt.Sprintf("invalid byte sequence for encoding \"UTF8\": %s", b.String())}
}
