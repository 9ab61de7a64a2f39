package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// StartProfiles starts a CPU profile and an execution trace when their
// paths are set; the returned func stops both and closes the files.
func StartProfiles(cpuPath, tracePath string) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return stop, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("--cpuprofile: %w", err)
		}
		closers = append(closers, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			stop()
			return func() {}, fmt.Errorf("--trace: %w", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, fmt.Errorf("--trace: %w", err)
		}
		closers = append(closers, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}
