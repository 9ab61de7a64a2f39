package workload

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUUse is CPU time spent during a run's timed window: by the whole machine
// (its busy time: user, nice, system, irq and softirq, not idle, iowait or
// time stolen by the hypervisor) and by this process (the driver, and a
// moraine running in-process). With the server in another process on the
// same machine, Machine − Process is the server's share plus anything else
// the machine ran, which is why the benchmark wants an otherwise idle
// machine. Capacity is the time all the machine's CPUs had, busy or not
// (every field of /proc/stat's totals), so Machine/Capacity is how busy the
// machine was: below one, the run left CPU idle. All are zero where they
// cannot be read (Result.CPUMeasured). RunQueue is how long this
// process's goroutines waited for a processor once runnable, and
// ServerRunQueue the same for a server in another process, when it could
// be read (Config.ServerRunQueue).
type CPUUse struct {
	Machine, Capacity, Process time.Duration
	RunQueue, ServerRunQueue   RunQueueWait
}

// RunQueueWait summarizes how long goroutines waited to run after they
// became runnable (a network read's data arrived, a channel was sent on),
// from the runtime's /sched/latencies:seconds histogram, which the runtime
// fills from a sample of its scheduling events. On the commit chain every
// step is such a wake-up on each side of a round trip, so on a busy
// two-core machine this wait, not the work, is much of a link (see
// docs/benchmarks.md). Mean counts each bucket at its midpoint (the
// unbounded last one at its lower bound); P90 is the upper bound of the
// bucket that holds the 90th percentile.
type RunQueueWait struct {
	Samples   uint64
	Mean, P90 time.Duration
}

// runQueueHist reads the scheduler latency histogram; nil if this runtime
// does not have it.
func runQueueHist() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	h := s[0].Value.Float64Histogram()
	// The runtime may reuse the histogram's memory on the next Read.
	return &metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: append([]float64(nil), h.Buckets...)}
}

// runQueueSince summarizes the scheduling events counted in h but not in
// h0 (two readings of one runtime histogram: the same buckets).
func runQueueSince(h0, h *metrics.Float64Histogram) RunQueueWait {
	if h0 == nil || h == nil || len(h0.Counts) != len(h.Counts) || len(h.Buckets) != len(h.Counts)+1 {
		return RunQueueWait{}
	}
	var w RunQueueWait
	var sum float64
	for i := range h.Counts {
		n := h.Counts[i] - h0.Counts[i]
		w.Samples += n
		lo, hi := max(h.Buckets[i], 0), h.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = lo
		}
		sum += float64(n) * (lo + hi) / 2
	}
	if w.Samples == 0 {
		return w
	}
	w.Mean = time.Duration(sum / float64(w.Samples) * float64(time.Second))
	var cum uint64
	for i := range h.Counts {
		cum += h.Counts[i] - h0.Counts[i]
		if 10*cum >= 9*w.Samples {
			hi := h.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h.Buckets[i]
			}
			w.P90 = time.Duration(hi * float64(time.Second))
			break
		}
	}
	return w
}

// BusyShare is the fraction of the machine's CPU time that was busy.
func (u CPUUse) BusyShare() float64 {
	if u.Capacity <= 0 {
		return 0
	}
	return float64(u.Machine) / float64(u.Capacity)
}

// cpuSample is one reading of the clocks CPUUse subtracts.
type cpuSample struct {
	machine, capacity, process time.Duration
	runQueue                   *metrics.Float64Histogram
	ok                         bool
}

// since is the CPU spent between s0 and s; the zero CPUUse when either
// reading failed.
func (s cpuSample) since(s0 cpuSample) (CPUUse, bool) {
	if !s.ok || !s0.ok {
		return CPUUse{}, false
	}
	return CPUUse{
		Machine: s.machine - s0.machine, Capacity: s.capacity - s0.capacity, Process: s.process - s0.process,
		RunQueue: runQueueSince(s0.runQueue, s.runQueue),
	}, true
}

// userHZ is the unit of /proc/stat's counters: USER_HZ, which the kernel
// fixes at 100 for user space on every architecture Linux supports.
const userHZ = 100

// readCPU reads the machine's busy time from /proc/stat, this process's
// CPU time from getrusage (moraine runs on Linux only; see localdir) and
// its scheduler latency histogram.
func readCPU() cpuSample {
	machine, capacity, err := machineBusy()
	if err != nil {
		return cpuSample{}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}
	}
	process := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpuSample{machine: machine, capacity: capacity, process: process, runQueue: runQueueHist(), ok: true}
}

// machineBusy reads /proc/stat's "cpu" totals line (parseBusy).
func machineBusy() (busy, capacity time.Duration, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("/proc/stat: empty: %v", sc.Err())
	}
	return parseBusy(sc.Text())
}

// parseBusy reads a "cpu" totals line: busy is user, nice, system, irq and
// softirq (fields 1–3, 6, 7); capacity adds idle, iowait and steal (4, 5,
// 8). Idle and iowait are not busy; steal is the hypervisor's; guest time
// (9, 10) is already counted in user.
func parseBusy(line string) (busy, capacity time.Duration, err error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: first line %q is not the cpu totals", line)
	}
	var b, c uint64
	for i := 1; i <= 8; i++ {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		c += n
		if i <= 3 || i == 6 || i == 7 {
			b += n
		}
	}
	tick := time.Second / userHZ
	return time.Duration(b) * tick, time.Duration(c) * tick, nil
}
