package server

import (
	"testing"
	"time"
)

// TestReopenBackoff: the wait grows from 100 ms to its cap, and starts over
// only after a writer served a healthy period; one that fails sooner keeps
// the grown wait.
func TestReopenBackoff(t *testing.T) {
	if backoff(0) != 100*time.Millisecond || backoff(3) != 800*time.Millisecond || backoff(6) != backoff(60) {
		t.Fatalf("backoff: %v %v %v %v", backoff(0), backoff(3), backoff(6), backoff(60))
	}
	for _, tc := range []struct {
		attempt int
		served  time.Duration
		want    int
	}{
		{attempt: 5, served: healthyPeriod, want: 0},
		{attempt: 5, served: 2 * healthyPeriod, want: 0},
		{attempt: 5, served: healthyPeriod - time.Second, want: 5},
		{attempt: 0, served: time.Second, want: 0},
	} {
		if got := attemptAfterServing(tc.attempt, tc.served); got != tc.want {
			t.Errorf("attemptAfterServing(%d, %v) = %d, want %d", tc.attempt, tc.served, got, tc.want)
		}
	}
}
