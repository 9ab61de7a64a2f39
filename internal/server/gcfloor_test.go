package server

import (
	"context"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 256 * mib, 6300},         // nothing measured yet: 4 MiB assumed
		{16 * mib, 256 * mib, 1500},  // next cycle at 16 + 240 = 256 MiB
		{64 * mib, 256 * mib, 300},   // 64 + 192 = 256 MiB
		{128 * mib, 256 * mib, 100},  // the default already reaches the floor
		{1024 * mib, 256 * mib, 100}, // a large catalog: GOGC=100 unchanged
		{4 * mib, 1 << 40, 100_000},  // capped
		{100 * mib, 0, 100},          // no floor
	} {
		if got := gcPercentFor(c.live, c.floor); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

// TestRunGCFloor: with a floor far above the live heap the percentage is
// raised, and it is restored when the server stops.
func TestRunGCFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runGCFloor(ctx, 1<<40); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p := currentGCPercent(); p > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent still %d with a 1 TiB floor", currentGCPercent())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	p := debug.SetGCPercent(100)
	if p != 100 {
		t.Fatalf("GC percent %d after the floor stopped, want the 100 it found", p)
	}
}

// TestGCFloorsShared: two servers in one process share the collector: the
// percentage follows the higher floor while both run, and the one found
// before the first is restored only after the last stops.
func TestGCFloorsShared(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	percent := currentGCPercent
	waitFor := func(what string, ok func(int) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok(percent()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GC percent %d", what, percent())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { runGCFloor(ctxA, 1<<40); close(doneA) }()
	waitFor("one huge floor", func(p int) bool { return p == 100_000 })
	go func() { runGCFloor(ctxB, 1); close(doneB) }()
	time.Sleep(3 * gcFloorInterval)
	if p := percent(); p != 100_000 {
		t.Fatalf("a second, tiny floor lowered the percentage to %d while the huge one runs", p)
	}
	stopA()
	<-doneA
	waitFor("only the tiny floor left", func(p int) bool { return p == 100 })
	stopB()
	<-doneB
	if p := percent(); p != 100 {
		t.Fatalf("after both stopped: %d, want the 100 found before", p)
	}
}

// TestBoostGCForLoad: a load raises the percentage to loadGCPercent and the
// last of overlapping loads restores what it found; a floor loop running
// meanwhile keeps it raised; GOGC in the environment is left alone.
func TestBoostGCForLoad(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	a := boostGCForLoad()
	if p := currentGCPercent(); p != loadGCPercent {
		t.Fatalf("during a load: GC percent %d, want %d", p, loadGCPercent)
	}
	b := boostGCForLoad()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runGCFloor(ctx, 1); close(done) }() // a floor that wants 100
	time.Sleep(3 * gcFloorInterval)
	if p := currentGCPercent(); p != loadGCPercent {
		t.Fatalf("a floor loop during a load set GC percent %d", p)
	}
	cancel()
	<-done
	a()
	if p := currentGCPercent(); p != loadGCPercent {
		t.Fatalf("one of two loads ended: GC percent %d, want %d", p, loadGCPercent)
	}
	b()
	if p := currentGCPercent(); p != 100 {
		t.Fatalf("after the loads: GC percent %d, want the 100 found", p)
	}
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	boostGCForLoad()()
	if p := currentGCPercent(); p != 50 {
		t.Fatalf("GOGC=50 set by the operator: a load left %d", p)
	}
}
