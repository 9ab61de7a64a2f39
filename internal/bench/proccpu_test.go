package bench

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	line := "4242 (post gres: (x)) S 100 4242 4242 0 -1 4194304 500 0 0 0 250 30 7 3 20 0 1 0 123 456 789"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 100 || st.utime != 250 || st.stime != 30 || st.cutime != 7 || st.cstime != 3 {
		t.Fatalf("%+v", st)
	}
	if _, err := parseProcStat("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
}

// TestProcessCPUGrows: this process's reading grows by at least the CPU it
// burns between two readings (the kernel counts in 10 ms ticks).
func TestProcessCPUGrows(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var burned time.Duration
	for burned < 200*time.Millisecond {
		after, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		burned = after - before
	}
	if ppid, err := ParentPID(os.Getpid()); err != nil || ppid != os.Getppid() {
		t.Fatalf("parent %d, %v; want %d", ppid, err, os.Getppid())
	}
}

// TestThreadsCPUGrows: the nanosecond readings of this process's threads
// grow while it burns CPU, and the tree's reading holds them.
func TestThreadsCPUGrows(t *testing.T) {
	before := map[int]time.Duration{}
	if err := ThreadsCPU(os.Getpid(), before); err != nil || len(before) == 0 {
		t.Fatalf("%d threads: %v", len(before), err)
	}
	for {
		now := map[int]time.Duration{}
		if err := ThreadsCPU(os.Getpid(), now); err != nil {
			t.Fatal(err)
		}
		if CPUSince(before, now) > 0 {
			break
		}
	}
	tree := map[int]time.Duration{}
	if err := TreeCPU(os.Getpid(), tree); err != nil || CPUSince(before, tree) <= 0 {
		t.Fatalf("tree readings %v (%v) did not grow from %v", tree, err, before)
	}
	// A thread that ended counts nothing; a new one counts whole.
	if d := CPUSince(map[int]time.Duration{1: 5, 2: 7}, map[int]time.Duration{2: 9, 3: 4}); d != 6 {
		t.Fatalf("CPUSince = %v, want 6ns", d)
	}
}

// TestThreadsClock: the clock of this process's threads never goes back,
// and it moves while the process burns CPU, by less than a tick at first:
// it is not counted in /proc/<pid>/stat's 10 ms ticks.
func TestThreadsClock(t *testing.T) {
	clock := threadsClock(os.Getpid())
	prev, err := clock()
	if err != nil {
		t.Fatal(err)
	}
	var moved []time.Duration
	for len(moved) < 20 {
		now, err := clock()
		if err != nil {
			t.Fatal(err)
		}
		if now < prev {
			t.Fatalf("clock went back: %v after %v", now, prev)
		}
		if now > prev {
			moved = append(moved, now-prev)
		}
		prev = now
	}
	if slices.IndexFunc(moved, func(d time.Duration) bool { return d%(10*time.Millisecond) != 0 }) < 0 {
		t.Fatalf("every step is a whole number of ticks: %v", moved)
	}
}
