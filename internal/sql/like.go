package sql

import (
	"strings"
	"unicode/utf8"
)

// likeMatch reports whether s matches the LIKE pattern p: % matches any
// sequence of characters, _ any one character, and a backslash makes the
// next pattern character literal (PostgreSQL's default ESCAPE).
//
// It never backtracks across a %: the pattern is split at its %s into
// segments; the first must match at the start of s, the last at its end,
// and each one between at its leftmost place after the one before — a
// match anywhere later leaves less room for the rest, so leftmost is
// always right. The cost is O(len(s) × len(p)) in the worst case, where a
// naive recursive matcher is exponential in the number of %s. A long
// search calls interrupt every few thousand places it tries and stops with
// its error (a cancelled statement); nil interrupt never stops.
func likeMatch(s, p string) bool {
	ok, _ := likeMatchInterruptible(s, p, nil)
	return ok
}

// likeMatchInterruptible is likeMatch with an interrupt (see there).
func likeMatchInterruptible(s, p string, interrupt func() error) (bool, error) {
	segs := likeSegments(p)
	if len(segs) == 1 { // no %: the whole string
		n, ok := segs[0].matchAt(s, 0)
		return ok && n == len(s), nil
	}
	first, last := segs[0], segs[len(segs)-1]
	start, ok := first.matchAt(s, 0)
	if !ok {
		return false, nil
	}
	end, ok := last.matchEnd(s)
	if !ok || end < start {
		return false, nil
	}
	for _, seg := range segs[1 : len(segs)-1] {
		next, ok, err := seg.find(s[:end], start, interrupt)
		if err != nil || !ok {
			return false, err
		}
		start = next
	}
	return true, nil
}

// likeSegment is a run of the pattern between two %s: literal text and _
// wildcards. lit[i] is the literal byte at position i, or any is set there.
type likeSegment struct {
	lit []byte
	any []bool // _ at this position: one character, of any width
}

// likeSegments splits a pattern at its unescaped %s (consecutive ones are
// one); a pattern without % is one segment, one with k of them k+1.
func likeSegments(p string) []likeSegment {
	segs := []likeSegment{{}}
	for i := 0; i < len(p); i++ {
		cur := &segs[len(segs)-1]
		switch c := p[i]; {
		case c == '%':
			if len(cur.lit) > 0 || len(segs) == 1 || !prevPercent(p, i) {
				segs = append(segs, likeSegment{})
			}
		case c == '_':
			cur.lit, cur.any = append(cur.lit, 0), append(cur.any, true)
		case c == '\\' && i+1 < len(p):
			i++
			cur.lit, cur.any = append(cur.lit, p[i]), append(cur.any, false)
		default:
			cur.lit, cur.any = append(cur.lit, c), append(cur.any, false)
		}
	}
	return segs
}

// prevPercent reports whether the pattern byte before i is an unescaped %.
func prevPercent(p string, i int) bool {
	if i == 0 || p[i-1] != '%' {
		return false
	}
	// An odd run of backslashes before that % escapes it.
	n := 0
	for j := i - 2; j >= 0 && p[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}

// matchAt matches the segment at s[at:] and returns the end of the match.
func (g likeSegment) matchAt(s string, at int) (int, bool) {
	i := at
	for k := range g.lit {
		if i >= len(s) {
			return 0, false
		}
		if g.any[k] {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			continue
		}
		if s[i] != g.lit[k] {
			return 0, false
		}
		i++
	}
	return i, true
}

// matchEnd matches the segment against the end of s and returns where the
// match starts.
func (g likeSegment) matchEnd(s string) (int, bool) {
	i := len(s)
	for k := len(g.lit) - 1; k >= 0; k-- {
		if i <= 0 {
			return 0, false
		}
		if g.any[k] {
			_, w := utf8.DecodeLastRuneInString(s[:i])
			i -= w
			continue
		}
		if s[i-1] != g.lit[k] {
			return 0, false
		}
		i--
	}
	return i, true
}

// find returns the end of the segment's leftmost match in s starting at a
// character boundary at or after from.
func (g likeSegment) find(s string, from int, interrupt func() error) (int, bool, error) {
	// A segment that starts with a literal byte can only match where that
	// byte is.
	lead := -1
	if len(g.lit) > 0 && !g.any[0] {
		lead = int(g.lit[0])
	}
	tries := 0
	for at := from; at <= len(s); {
		if lead >= 0 {
			j := strings.IndexByte(s[at:], byte(lead))
			if j < 0 {
				return 0, false, nil
			}
			at += j
		}
		if end, ok := g.matchAt(s, at); ok {
			return end, true, nil
		}
		if tries++; interrupt != nil && tries%4096 == 0 {
			if err := interrupt(); err != nil {
				return 0, false, err
			}
		}
		if at == len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[at:])
		at += w
	}
	return 0, false, nil
}
