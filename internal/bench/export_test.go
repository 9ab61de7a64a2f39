package bench

// RoundRatiosForTest exposes roundRatios to the external tests.
func RoundRatiosForTest(r *CommitsReport, n int) []float64 { return r.roundRatios(n) }
