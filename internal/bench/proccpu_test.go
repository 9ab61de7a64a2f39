package bench

import (
	"os"
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

// TestThreadsCPUGrows: the nanosecond reading of this process's threads
// grows while it burns CPU, and the tree's reading holds at least it.
func TestThreadsCPUGrows(t *testing.T) {
	before, err := ThreadsCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for {
		now, err := ThreadsCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			break
		}
	}
	tree, err := TreeCPU(os.Getpid())
	if err != nil || tree <= before {
		t.Fatalf("tree %v (%v), threads before %v", tree, err, before)
	}
}
