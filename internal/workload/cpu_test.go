package workload

import (
	"math"
	"runtime/metrics"
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
	// Burn until the process has used 200 ms of CPU, however long that
	// takes on a loaded machine.
	const burn = 200 * time.Millisecond
	wall := time.Now()
	x := uint64(1)
	for {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if u, ok := readCPU().since(s0); ok && u.Process >= burn {
			break
		}
	}
	wall2 := time.Since(wall)
	use, ok := readCPU().since(s0)
	if !ok || x == 0 {
		t.Fatal("second reading failed")
	}
	// The process cannot use more than its threads ran; the machine was
	// busy at least while the process was (to /proc/stat's 10 ms ticks).
	if use.Process < burn || use.Process > 4*wall2 {
		t.Errorf("process CPU %v for a busy loop over %v", use.Process, wall2)
	}
	if use.Machine < use.Process-30*time.Millisecond {
		t.Errorf("machine busy time %v below the process's %v (10 ms ticks)", use.Machine, use.Process)
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

// TestRunQueueSince: the wait summary is computed from the events between
// two readings only, each bucket at its midpoint, the unbounded bucket at
// its lower bound, and p90 as the upper bound of the bucket it falls in.
func TestRunQueueSince(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 10e-6, 100e-6, math.Inf(1)}
	h := func(counts ...uint64) *metrics.Float64Histogram {
		return &metrics.Float64Histogram{Counts: counts, Buckets: buckets}
	}
	for _, tc := range []struct {
		name      string
		h0, h     *metrics.Float64Histogram
		want      RunQueueWait
		wantEmpty bool
	}{
		// 10 new events in [0,10µs) at 5 µs and 10 in [10,100µs) at 55 µs:
		// mean 30 µs; the 90th percentile lies in the second bucket.
		{name: "two buckets", h0: h(0, 7, 1, 0), h: h(0, 17, 11, 0),
			want: RunQueueWait{Samples: 20, Mean: 30 * time.Microsecond, P90: 100 * time.Microsecond}},
		// 9 fast events and one beyond 100 µs, counted at 100 µs.
		{name: "unbounded bucket", h0: h(0, 0, 0, 0), h: h(0, 9, 0, 1),
			want: RunQueueWait{Samples: 10, Mean: 14500 * time.Nanosecond, P90: 10 * time.Microsecond}},
		{name: "no events", h0: h(0, 3, 3, 3), h: h(0, 3, 3, 3), want: RunQueueWait{}},
		{name: "no first reading", h0: nil, h: h(0, 3, 3, 3), want: RunQueueWait{}},
		{name: "different shapes", h0: h(0, 1), h: h(0, 3, 3, 3), want: RunQueueWait{}},
	} {
		if got := runQueueSince(tc.h0, tc.h); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestReadRunQueue: goroutines that wake each other show up as scheduling
// events between two readings of this process.
func TestReadRunQueue(t *testing.T) {
	s0 := readCPU()
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	for i := 0; i < 20000; i++ {
		ping <- i
		<-pong
	}
	close(ping)
	use, ok := readCPU().since(s0)
	if !ok {
		t.Fatal("reading failed")
	}
	// The runtime samples one scheduling event in eight or so; 40 000
	// wake-ups leave thousands.
	if use.RunQueue.Samples < 1000 || use.RunQueue.P90 <= 0 || use.RunQueue.Mean < 0 {
		t.Errorf("run queue after 40 000 wake-ups: %+v", use.RunQueue)
	}
}
