//go:build !moraine_guardsoff

package commit

// guardOn reports whether the named lake guard is enforced: always, in
// every build but the moraine_guardsoff one scripts/guards uses.
func guardOn(string) bool { return true }
