package workload

// RoundRatiosForTest exposes roundRatios to the external tests.
func RoundRatiosForTest(r *BenchReport, n int) []float64 { return r.roundRatios(n) }
