package datum

import "testing"

// CheckUTF8 answers as PostgreSQL's UTF8 verification does, naming the
// bytes of the first bad character as pg_utf_mblen counts them.
func TestCheckUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""}, {"plain", ""}, {"ünïcode ✓ 𝄞", ""},
		{"k\xff\xfe\x00", "0xff"},
		{"a\x00b", "0x00"},
		{"\xe2\x28\xa1", "0xe2 0x28 0xa1"}, // a three-byte lead with a bad continuation
		{"ok\xe2\x82", "0xe2 0x82"},        // truncated at the end
		{"\xed\xa0\x80", "0xed 0xa0 0x80"}, // a surrogate
		{"\xc0\xaf", "0xc0 0xaf"},          // overlong
		{"\x80", "0x80"},                   // a lone continuation byte
	} {
		err := CheckUTF8(c.in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.want != "" && (err == nil || err.Error() != `invalid byte sequence for encoding "UTF8": `+c.want):
			t.Errorf("%q: %v, want %s", c.in, err, c.want)
		}
	}
}
