package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// The Go runtime's system monitor (sysmon) sleeps deeply whenever every
// processor is idle, and the first system call after that wakes it and
// resets it to polling every 20 µs, on the bet that more blocking calls
// follow. A catalog server is idle between every two messages of a
// DuckLake commit (13 round trips), so each message paid a futex wake-up
// of sysmon and a burst of its polls: on a 2-vCPU VM, where a
// context switch costs ~20 µs of CPU, that was a fifth of a separately
// running server's CPU (docs/benchmarks.md, "moraine as a separate
// process"). The runtime keeps sysmon out of deep sleep when its scheduler
// trace is on, and offers no other switch; the trace's period is set to the
// largest it takes (~24.8 days), so that it prints nothing in practice (a
// line at start only on a host up for longer than that). sysmon then backs
// off to one poll per 10 ms while nothing happens.
//
// GODEBUG is read once, when the process starts, so serve restarts itself
// in place (execve: same pid, arguments and environment, plus the setting)
// before it opens anything.
const sysmonAwakeSetting = "schedtrace=2147483647"

// godebugSets reports whether the GODEBUG value gd sets key.
func godebugSets(gd, key string) bool {
	for _, kv := range strings.Split(gd, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(kv), "="); k == key {
			return true
		}
	}
	return false
}

// sysmonAwakeEnv returns env with sysmonAwakeSetting added to GODEBUG, and
// false when GODEBUG sets schedtrace already (the operator's value, or
// ours after the restart) and nothing needs to change.
func sysmonAwakeEnv(env []string) ([]string, bool) {
	out := make([]string, 0, len(env)+1)
	gd := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GODEBUG="); ok {
			gd = v
			continue
		}
		out = append(out, e)
	}
	if godebugSets(gd, "schedtrace") {
		return env, false
	}
	if gd != "" {
		gd += ","
	}
	return append(out, "GODEBUG="+gd+sysmonAwakeSetting), true
}

// keepSysmonAwake restarts the process with sysmonAwakeSetting unless
// GODEBUG sets schedtrace already. It returns only if no restart was
// needed or the restart failed (the error says why; serving goes on
// without it).
func keepSysmonAwake() error {
	env, restart := sysmonAwakeEnv(os.Environ())
	if !restart {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("keep sysmon awake: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("keep sysmon awake: restarting %s: %w", exe, err)
	}
	return nil
}
