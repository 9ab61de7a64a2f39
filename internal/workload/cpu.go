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
// machine. Both are zero where they cannot be read (Result.CPUMeasured).
type CPUUse struct {
	Machine, Process time.Duration
}

// cpuSample is one reading of the two clocks CPUUse subtracts.
type cpuSample struct {
	machine, process time.Duration
	ok               bool
}

// since is the CPU spent between s0 and s; the zero CPUUse when either
// reading failed.
func (s cpuSample) since(s0 cpuSample) (CPUUse, bool) {
	if !s.ok || !s0.ok {
		return CPUUse{}, false
	}
	return CPUUse{Machine: s.machine - s0.machine, Process: s.process - s0.process}, true
}

// userHZ is the unit of /proc/stat's counters: USER_HZ, which the kernel
// fixes at 100 for user space on every architecture Linux supports.
const userHZ = 100

// readCPU reads the machine's busy time from /proc/stat and this process's
// CPU time from getrusage (moraine runs on Linux only; see localdir).
func readCPU() cpuSample {
	machine, err := machineBusy()
	if err != nil {
		return cpuSample{}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}
	}
	process := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpuSample{machine: machine, process: process, ok: true}
}

// machineBusy sums the busy fields of /proc/stat's "cpu" line: user, nice,
// system, irq and softirq (fields 1–3, 6, 7). Idle and iowait are not busy;
// steal is the hypervisor's; guest time is already counted in user.
func machineBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat: empty: %v", sc.Err())
	}
	return parseBusy(sc.Text())
}

func parseBusy(line string) (time.Duration, error) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu totals", line)
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
