package catalog

import "testing"

// FuzzParseCTID: tid text from clients never panics, and whatever parses
// prints back to a form that parses to the same locator.
func FuzzParseCTID(f *testing.F) {
	for _, s := range []string{"(0,1)", " (12 , 7) ", "(4294967295,65535)", "(0,65536)", "(", "(,)", "(-1,2)", "(1,2)x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCTID(s)
		if err != nil {
			return
		}
		back, err := ParseCTID(c.String())
		if err != nil || back != c {
			t.Fatalf("%q -> %s -> %v, %v", s, c, back, err)
		}
	})
}
