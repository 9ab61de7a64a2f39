package workload

import (
	"slices"
	"testing"
	"time"
)

// TestChainLinks: a link is the time between the batch answers of
// consecutive snapshots, both landed in the timed phase; a snapshot whose
// predecessor did not land (or landed during the warm-up) has none.
func TestChainLinks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &Result{timedFrom: at(10), landed: []Landed{
		{Snapshot: 4, Answered: at(5)},  // warm-up
		{Snapshot: 5, Answered: at(11)}, // its predecessor was warm-up: no link
		{Snapshot: 7, Answered: at(14)}, // out of acknowledgement order
		{Snapshot: 6, Answered: at(12)},
		{Snapshot: 9, Answered: at(20)}, // 8 did not land: no link
		{Snapshot: 10, Answered: at(25)},
		{Snapshot: 11}, // never answered (setup): no time
	}}
	got := r.ChainLinks()
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("ChainLinks = %v, want %v", got, want)
	}
}
