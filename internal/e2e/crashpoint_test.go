package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/workload"
)

// crashHook crashes the store at the n-th object-store call after it is
// armed (0: never), either dropping that call or, with apply, letting a
// write land before reporting the crash (the process died between the PUT
// and its acknowledgement).
type crashHook struct {
	armed      atomic.Int64 // Seq of the arming call; 0 while disarmed
	armedWrite atomic.Int64 // WriteSeq at arming
	n          int64
	writes     bool // count only writes (Put, PutIfAbsent, Delete)
	apply      bool
	fired      atomic.Bool
	at         atomic.Value // the fault.Call it crashed at
}

func (h *crashHook) hook(c fault.Call) fault.Action {
	base := h.armed.Load()
	if base == 0 || h.n == 0 {
		return fault.Pass
	}
	if h.writes {
		if c.WriteSeq == 0 || c.WriteSeq < h.armedWrite.Load()+h.n {
			return fault.Pass
		}
	} else if c.Seq < base+h.n {
		return fault.Pass
	}
	if !h.fired.Swap(true) {
		h.at.Store(c)
	}
	if h.apply {
		return fault.CrashAfterApply
	}
	return fault.Crash
}

// crashRun is one crash point: a small workload on a fresh store whose
// object store crashes at the n-th call after the catalog is prepared, then
// a restart over the underlying store and the prefix check.
type crashRun struct {
	n       int64
	writes  bool // n counts writes only
	apply   bool
	seed    uint64
	writers int
	commits int
}

type crashOutcome struct {
	ops      int64 // store calls made while armed (for a run without a crash)
	writeOps int64 // of which writes
	fired    bool
	acked    int
	present  int    // unacknowledged commits found present
	where    string // "<op> <key prefix>" of the crashing call
}

const crashColumns = 3

// crashStackOptions shrink the store's thresholds so that a small workload
// also freezes and flushes memtables, compacts L0, rewrites the manifest
// and runs GC: the crash points then land in all of those, not
// only in WAL writes.
func crashStackOptions() server.StackOptions {
	return server.StackOptions{Slate: slate.Options{
		MemtableBytes: 16 << 10, MaxWALsPerMemtable: 4, L0CompactionTrigger: 2, RunMergeWidth: 2,
		// GC runs often but with the default grace: a grace shorter than a
		// compaction lets GC delete the compaction's fresh output before the
		// manifest naming it lands (seen with 1ms: a restart then finds a
		// manifest naming a missing table).
		GCInterval: 5 * time.Millisecond, FencePollInterval: -1,
	}}
}

func (cr crashRun) run(ctx context.Context) (crashOutcome, error) {
	var out crashOutcome
	mem := objstore.NewMem()
	h := &crashHook{n: cr.n, apply: cr.apply, writes: cr.writes}
	var lastSeq, lastWrite atomic.Int64
	fs := fault.New(mem, fault.Config{Hook: func(c fault.Call) fault.Action {
		lastSeq.Store(c.Seq)
		if c.WriteSeq > 0 {
			lastWrite.Store(c.WriteSeq)
		}
		return h.hook(c)
	}})
	srv, err := serveStack(ctx, fs, crashStackOptions())
	if err != nil {
		return out, fmt.Errorf("open: %w", err)
	}
	cfg := workload.Config{
		ConnString: conninfo(srv.addr, "lake"), Writers: cr.writers, CommitsPerWriter: cr.commits, Tables: 2,
		Columns: crashColumns, RowsPerFile: 10, Compactor: true, CompactPause: time.Millisecond,
		RetryWait: time.Millisecond, Seed: cr.seed,
	}
	if err := prepare(ctx, cfg); err != nil {
		srv.close()
		return out, fmt.Errorf("prepare: %w", err)
	}
	h.armedWrite.Store(lastWrite.Load() + 1)
	h.armed.Store(lastSeq.Load() + 1)
	res, runErr := workload.Run(ctx, cfg)
	out.ops = lastSeq.Load() - h.armed.Load() + 1
	out.writeOps = lastWrite.Load() - h.armedWrite.Load() + 1
	out.fired = h.fired.Load()
	if res != nil {
		out.acked = len(res.Landed())
	}
	if !out.fired && runErr != nil {
		srv.close()
		return out, fmt.Errorf("run without a crash: %w", runErr)
	}
	if out.fired && runErr == nil && !fs.Crashed() {
		srv.close()
		return out, errors.New("hook fired but the store is not crashed")
	}
	// The process is gone: drop clients, abandon the stack (its close may
	// fail on the crashed store) and restart over what the store holds.
	cerr := srv.close()
	out.fired = h.fired.Load() // the crash may hit the final flush
	if c, ok := h.at.Load().(fault.Call); ok {
		prefix, _, _ := strings.Cut(c.Key, "/")
		out.where = c.Op.String() + " " + prefix
	}
	if !out.fired && cerr != nil {
		return out, fmt.Errorf("close: %w", cerr)
	}
	again, err := serveStack(ctx, mem, crashStackOptions())
	if err != nil {
		return out, fmt.Errorf("restart: %w", err)
	}
	defer again.close()
	out.present, err = checkAt(ctx, again.addr, "lake", res, crashColumns)
	if err != nil {
		return out, err
	}
	if !out.fired {
		// Nothing was cut short: the full verification holds too.
		if err := verifyAt(ctx, again.addr, "lake", res); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TestCrashPoints injects a crash at many points of the object-store call
// sequence of a small contended workload (3 writers + compactor, store
// thresholds shrunk so that flushes, compactions and GC happen), half of
// them letting the crashing write land unacknowledged, restarts on the
// underlying store and checks that the catalog is exactly the
// acknowledged prefix. The default run covers at least 200 crash points;
// MORAINE_E2E_LONG=1 runs 1000.
func TestCrashPoints(t *testing.T) {
	points := 200
	if long() {
		points = 1000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := crashRun{writers: 3, commits: 8, seed: 1}
	// A run without a crash measures how many store calls the workload makes.
	probe, err := base.run(ctx)
	if err != nil {
		t.Fatalf("probe run: %v", err)
	}
	if probe.ops < 10 {
		t.Fatalf("probe run made only %d store calls", probe.ops)
	}
	rng := rand.New(rand.NewPCG(42, 6))
	start := time.Now()
	var runs, fired, present, acked int
	where := map[string]int{}
	// Runs whose crash point lies past the end of their (timing-dependent)
	// call sequence do not crash; keep going until points crashes happened.
	for ; fired < points && runs < 2*points; runs++ {
		cr := base
		cr.seed = uint64(runs + 2)
		// Half the runs count every call, half only writes (where a crash
		// matters most: WAL, tables, manifest, GC deletes).
		cr.apply, cr.writes = runs%2 == 1, runs%4 >= 2
		if cr.writes {
			cr.n = 1 + rng.Int64N(probe.writeOps)
		} else {
			cr.n = 1 + rng.Int64N(probe.ops)
		}
		out, err := cr.run(ctx)
		if err != nil {
			t.Fatalf("run %d (crash at call %d, apply=%v, seed %d): %v", runs, cr.n, cr.apply, cr.seed, err)
		}
		if out.fired {
			fired++
			where[out.where]++
		}
		present += out.present
		acked += out.acked
	}
	t.Logf("%d crash points in %d runs of ~%d store calls (%d writes) each, in %v; %d acknowledged commits checked, %d unacknowledged commits found present (allowed); crashed at: %v",
		fired, runs, probe.ops, probe.writeOps, time.Since(start).Round(time.Millisecond), acked, present, where)
	if fired < points {
		t.Fatalf("only %d crash points in %d runs", fired, runs)
	}
}
