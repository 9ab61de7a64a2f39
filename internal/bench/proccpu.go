package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Server CPU, read from /proc as the kernel accounts it: what a server
// process and the processes it started spent, whichever client drove them.

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every architecture Linux supports.
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/<pid>/stat a CPU reading needs.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses a /proc/<pid>/stat line: "pid (comm) state ppid …",
// where comm may hold spaces and parentheses, so fields count from the
// last ')'. utime, stime, cutime and cstime are fields 14–17.
func parseProcStat(line string) (procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("bench: /proc stat line without a command: %.60q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("bench: /proc stat line with %d fields", len(f)+2)
	}
	num := func(k int) (int64, error) { return strconv.ParseInt(f[k-3], 10, 64) }
	var st procStat
	var err error
	var ppid int64
	if ppid, err = num(4); err != nil {
		return st, err
	}
	st.ppid = int(ppid)
	for k, dst := range map[int]*int64{14: &st.utime, 15: &st.stime, 16: &st.cutime, 17: &st.cstime} {
		if *dst, err = num(k); err != nil {
			return st, err
		}
	}
	return st, nil
}

// ProcessCPU is the CPU time process pid and its children have used: its
// own, its reaped children's (cutime, cstime), and that of its live
// children. For moraine serve that is the server; for PostgreSQL's
// postmaster, the postmaster and every backend, ended or running.
func ProcessCPU(pid int) (time.Duration, error) {
	st, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := st.utime + st.stime + st.cutime + st.cstime
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		kids = nil // kernels without the children file: live children are missed
	}
	for _, k := range strings.Fields(string(kids)) {
		kp, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		if ks, err := readProcStat(kp); err == nil && ks.ppid == pid {
			ticks += ks.utime + ks.stime // a child ends between the reads: counted by neither or once
		}
	}
	return time.Duration(ticks) * clockTick, nil
}

// ParentPID is the parent of pid (a PostgreSQL backend's is the postmaster).
func ParentPID(pid int) (int, error) {
	st, err := readProcStat(pid)
	return st.ppid, err
}

// ThreadsCPU adds to into the CPU time each live thread of process pid
// has used, keyed by thread id, in nanoseconds as
// /proc/<pid>/task/<tid>/schedstat reports it: finer than stat's clock
// ticks, so that the CPU of a single commit can be told. A thread that
// ended is missing.
func ThreadsCPU(pid int, into map[int]time.Duration) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("bench: schedstat of %d/%d: %w", pid, tid, err)
		}
		into[tid] = time.Duration(ns)
	}
	return nil
}

// TreeCPU is ThreadsCPU of pid and of each of its live children: for
// PostgreSQL's postmaster, the server with its running backends.
func TreeCPU(pid int, into map[int]time.Duration) error {
	if err := ThreadsCPU(pid, into); err != nil {
		return err
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	for _, k := range strings.Fields(string(kids)) {
		if kp, err := strconv.Atoi(k); err == nil {
			_ = ThreadsCPU(kp, into) // a backend that ended is missing
		}
	}
	return nil
}

// CPUSince is the CPU the threads of now used since then: a thread new
// since then counts whole, one that ended in between not at all (its last
// moments are lost, never counted twice).
func CPUSince(then, now map[int]time.Duration) time.Duration {
	var d time.Duration
	for tid, t := range now {
		if t > then[tid] {
			d += t - then[tid]
		}
	}
	return d
}

// rusageCPU is the user and system CPU time getrusage(2) reports for who
// (RUSAGE_SELF, RUSAGE_THREAD): for this process, finer than /proc's ticks.
func rusageCPU(who int) (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0, fmt.Errorf("bench: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
