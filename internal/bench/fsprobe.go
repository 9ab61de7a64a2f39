package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// FileCreateCost creates n empty files in a new directory under dir and
// returns the CPU one creation cost the creating thread. moraine's local
// store creates a file per WAL object, and on ext4 without a journal a
// creation also skips, one inode-table read each, every inode freed near
// it in the last minutes: from ~20 µs in a quiet directory to half a
// millisecond beside recent mass deletions (docs/benchmarks.md). A replay
// run reports it so that its figures can be read against it.
//
// The files stay until remove is called: removing them at once would
// make the next creations beside them dearer.
func FileCreateCost(dir string, n int) (per time.Duration, remove func(), err error) {
	probe, err := os.MkdirTemp(dir, "moraine-bench-probe-")
	if err != nil {
		return 0, nil, fmt.Errorf("bench: file creation probe: %w", err)
	}
	remove = func() { os.RemoveAll(probe) }
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCPU()
	if err != nil {
		return 0, remove, err
	}
	for i := range n {
		fd, err := unix.Open(filepath.Join(probe, fmt.Sprint(i)), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return 0, remove, fmt.Errorf("bench: file creation probe: %w", err)
		}
		unix.Close(fd)
	}
	after, err := threadCPU()
	if err != nil {
		return 0, remove, err
	}
	return (after - before) / time.Duration(n), remove, nil
}

// threadCPU is the calling thread's user and system CPU time.
func threadCPU() (time.Duration, error) { return rusageCPU(unix.RUSAGE_THREAD) }
