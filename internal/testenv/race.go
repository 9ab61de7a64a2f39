//go:build race

package testenv

// RaceEnabled reports whether the binary was built with the race detector,
// whose instrumentation allocates where the code itself does not: a test
// that counts allocations measures the detector, not the code, under it.
const RaceEnabled = true
