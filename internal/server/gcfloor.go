package server

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The Go collector starts a cycle when the heap has grown by GOGC percent
// (100) over what the last cycle left live. moraine's live heap is the
// resident catalog, so on a small catalog under a stream of commits that
// means a collection every few tens of milliseconds, each costing CPU the
// commits need (a 16-writer DuckLake run spent ~15 % of its CPU in the
// collector). The floor keeps the collector's target at least minHeap
// bytes: while the live heap is small the percentage is raised so that the
// next cycle starts at minHeap, and once the catalog is larger than
// minHeap/2 the default 100 applies unchanged. It only trades memory the
// server is allowed to use (--gc-min-heap-mib, 64 by default: a 256 MiB
// floor measured slower, fresh memory costing more in cache misses than the
// cycles it saved) for fewer cycles; it never
// lets the heap grow past what GOGC=100 would on a large catalog.

// gcPercentFor is the GC percentage that puts the next cycle's target at
// floor bytes for a live heap of live bytes, never below 100.
func gcPercentFor(live, floor uint64) int {
	// Before its first cycle the runtime reports no live heap; it assumes
	// 4 MiB (the smallest heap target) until then.
	live = max(live, 4<<20)
	if 2*live >= floor {
		return 100
	}
	p := (floor - live) * 100 / live
	return int(min(p, 100_000))
}

// gcFloorInterval is how often the floor is recomputed.
const gcFloorInterval = 250 * time.Millisecond

// gcFloors is the process's set of floors: servers in one process (tests,
// benchmarks) share one collector, so the percentage follows the highest
// floor of the servers running, and the one found before the first is
// restored after the last.
var gcFloors struct {
	sync.Mutex
	floors   map[*uint64]bool
	prev     int // the percentage before the first floor
	applied  int // the percentage last set, 0 when none is
	loads    int // catalog loads under way (boostGCForLoad)
	loadPrev int // the percentage before the first of them
}

// A catalog load grows the live heap from nothing to the catalog's size,
// and at GOGC=100 the collector runs a cycle at every doubling, marking
// (with write barriers on) everything loaded so far: a sixth of a large
// load's CPU. While a load runs the percentage is at least loadGCPercent,
// so a load collects a few times instead of a dozen; the heap may peak at
// a few times the catalog's size once, while loading.
const loadGCPercent = 400

// boostGCForLoad raises the GC percentage to loadGCPercent until the
// returned function is called (unless GOGC is set in the environment: the
// operator's choice wins).
func boostGCForLoad() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	g := &gcFloors
	g.Lock()
	defer g.Unlock()
	if g.loads == 0 {
		g.loadPrev = currentGCPercent()
	}
	g.loads++
	if currentGCPercent() < loadGCPercent {
		debug.SetGCPercent(loadGCPercent)
	}
	return func() {
		g.Lock()
		defer g.Unlock()
		if g.loads--; g.loads == 0 {
			// The floor loop, if one runs, sets its own at its next tick.
			debug.SetGCPercent(g.loadPrev)
		}
	}
}

// runGCFloor keeps the collector's target at least floor bytes until ctx
// ends. It does nothing when floor is 0 or GOGC is set in the environment
// (the operator's choice wins).
func runGCFloor(ctx context.Context, floor uint64) {
	if floor == 0 || os.Getenv("GOGC") != "" {
		return
	}
	me := &floor
	g := &gcFloors
	g.Lock()
	if g.floors == nil {
		g.floors = map[*uint64]bool{}
	}
	if len(g.floors) == 0 {
		g.prev = currentGCPercent()
	}
	g.floors[me] = true
	g.Unlock()
	defer func() {
		g.Lock()
		delete(g.floors, me)
		if len(g.floors) == 0 {
			debug.SetGCPercent(g.prev)
		}
		g.Unlock()
	}()
	tick := time.NewTicker(gcFloorInterval)
	defer tick.Stop()
	for {
		if live, ok := readMetric("/gc/heap/live:bytes"); ok {
			g.Lock()
			var hi uint64
			for f := range g.floors {
				hi = max(hi, *f)
			}
			// Compare with the runtime's setting, not the last one made
			// here: anything else in the process may have changed it.
			p := gcPercentFor(live, hi)
			if g.loads > 0 {
				p = max(p, loadGCPercent)
			}
			if cur := currentGCPercent(); p != cur {
				debug.SetGCPercent(p)
			}
			g.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readMetric reads one uint64 runtime metric.
func readMetric(name string) (uint64, bool) {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return sample[0].Value.Uint64(), true
}

// currentGCPercent is the runtime's GC percentage, read without setting it.
func currentGCPercent() int {
	p, ok := readMetric("/gc/gogc:percent")
	if !ok {
		return 100
	}
	return int(p)
}
