package workload

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUUse is CPU time spent during a run's timed phase: by the whole machine
// (its busy time: user, nice, system, irq and softirq, not idle, iowait or
// time stolen by the hypervisor) and by this process (the driver, and a
// moraine running in-process). With the server in another process on the
// same machine, Machine − Process is the server's share plus anything else
// the machine ran, which is why the benchmark wants an otherwise idle
// machine. Capacity is the time all the machine's CPUs had, busy or not
// (every field of /proc/stat's totals), so Machine/Capacity is how busy the
// machine was: below one, the run left CPU idle. All are zero where they
// cannot be read (Result.CPUMeasured).
type CPUUse struct {
	Machine, Capacity, Process time.Duration
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
	ok                         bool
}

// since is the CPU spent between s0 and s; the zero CPUUse when either
// reading failed.
func (s cpuSample) since(s0 cpuSample) (CPUUse, bool) {
	if !s.ok || !s0.ok {
		return CPUUse{}, false
	}
	return CPUUse{Machine: s.machine - s0.machine, Capacity: s.capacity - s0.capacity, Process: s.process - s0.process}, true
}

// userHZ is the unit of /proc/stat's counters: USER_HZ, which the kernel
// fixes at 100 for user space on every architecture Linux supports.
const userHZ = 100

// readCPU reads the machine's busy time from /proc/stat and this process's
// CPU time from getrusage (moraine runs on Linux only; see localdir).
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
	return cpuSample{machine: machine, capacity: capacity, process: process, ok: true}
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
