package workload

import (
	"testing"
	"time"
)

func TestParseBusy(t *testing.T) {
	for _, tc := range []struct {
		line           string
		busy, capacity time.Duration // busy -1: an error
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// busy = 1000+20+300+40+50 ticks of 10 ms; capacity adds idle,
		// iowait and steal; guest time is inside user already.
		{"cpu  1000 20 300 90000 700 40 50 999 7 7", 14100 * time.Millisecond, 931090 * time.Millisecond},
		{"cpu 0 0 0 5 5 0 0 5", 0, 150 * time.Millisecond},
		{"cpu0 1000 20 300 90000 700 40 50 999 0 0", -1, 0}, // one CPU's line, not the totals
		{"cpu 1000 20 300", -1, 0},
		{"cpu 1000 x 300 90000 700 40 50 999", -1, 0},
		{"", -1, 0},
	} {
		busy, capacity, err := parseBusy(tc.line)
		if tc.busy < 0 {
			if err == nil {
				t.Errorf("%q: %v/%v, want an error", tc.line, busy, capacity)
			}
			continue
		}
		if err != nil || busy != tc.busy || capacity != tc.capacity {
			t.Errorf("%q: %v/%v, %v; want %v/%v", tc.line, busy, capacity, err, tc.busy, tc.capacity)
		}
	}
}

// TestReadCPU: CPU this goroutine burns shows in both clocks, and a
// failed reading makes the difference unmeasured rather than wrong.
func TestReadCPU(t *testing.T) {
	s0 := readCPU()
	if !s0.ok {
		t.Fatal("cannot read /proc/stat or getrusage")
	}
	wall := time.Now()
	x := uint64(1)
	for time.Since(wall) < 200*time.Millisecond {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	wall2 := time.Since(wall)
	use, ok := readCPU().since(s0)
	if !ok || x == 0 {
		t.Fatal("second reading failed")
	}
	// A busy loop of 200 ms wall gets most of a CPU even on a loaded
	// two-core machine; the process cannot use more than its threads ran.
	if use.Process < 100*time.Millisecond || use.Process > 4*wall2 {
		t.Errorf("process CPU %v for a %v busy loop", use.Process, wall2)
	}
	if use.Machine < 80*time.Millisecond {
		t.Errorf("machine busy time %v for a %v busy loop (10 ms ticks)", use.Machine, wall2)
	}
	// Capacity is every CPU's time: at least the wall time once, and the
	// busy share a fraction.
	if use.Capacity < wall2-20*time.Millisecond || use.Machine > use.Capacity || use.BusyShare() <= 0 || use.BusyShare() > 1 {
		t.Errorf("capacity %v, busy %v (share %.2f) over %v", use.Capacity, use.Machine, use.BusyShare(), wall2)
	}
	if _, ok := readCPU().since(cpuSample{}); ok {
		t.Error("a difference from a failed reading counts as measured")
	}
}
