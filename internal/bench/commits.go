package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moraine-db/moraine/internal/workload"
)

// Target is one catalog server the benchmark drives.
type Target struct {
	Name     string // "postgres", "moraine", …
	ConnInfo string
	// Start, when set, starts a server of its own for each run (its
	// ConnInfo replaces the Target's). Every run
	// wants a fresh catalog: a server that can drop one is handed a fresh
	// database and drops it afterwards; one that cannot (moraine has no
	// DROP DATABASE or DROP SCHEMA) would carry every earlier run's
	// catalog, resident, into the next.
	Start func(ctx context.Context) (Server, error)
}

// Server is a server a Target started for one run.
type Server struct {
	ConnInfo string
	Stop     func() error
	// Remove, when set, deletes what the stopped server stored. RunCommits
	// calls it when the benchmark ends rather than after the run: deleting
	// a run's thousands of files between runs would make the next run's
	// file creation slower on file systems that skip recently freed inodes
	// (ext4 without a journal, as on the CI machines, walks past every
	// inode freed in the last minutes of its group), so that one run's
	// cleanup would be timed in another's. (A fresh database's few hundred
	// files are dropped after each run: kept, their tables would draw
	// autovacuum into the later runs.)
	Remove func()
	// RunQueue, when set, reads the server's scheduler latency histogram
	// (workload.Config.ServerRunQueue).
	RunQueue func(ctx context.Context) (*metrics.Float64Histogram, error)
}

// CommitsConfig is `moraine bench commits`.
type CommitsConfig struct {
	Targets []Target        // the first target named "postgres" is the baseline
	Writers []int           // writer counts, e.g. 1, 4, 16
	Commits int             // commits per writer
	Base    workload.Config // everything else (tables, compactor, retry settings); Writers/CommitsPerWriter/Dial are set per run
	// Warmup commits end on each run's catalog before its timed window
	// opens (workload.Config.Warmup; the writers do not stop there), on every
	// target alike; 0 times from the first commit.
	Warmup int
	// Rounds repeats every (writer count, target) measurement, the targets
	// taking turns within a round so that the machine's drift falls on
	// both alike; 0 means 1. The ratio is the median of the rounds'.
	Rounds int
	Verify bool // read each catalog back and check it after the run
	// Phases breaks every run's chain link down (Result.ChainPhases) into
	// CommitsRun.Phases, printed as a second table.
	Phases   bool
	DataDir  string // when set, each run writes real Parquet files under DataDir/<system>-w<writers>
	Progress io.Writer
}

// CommitsRun is one (target, writer count) measurement.
type CommitsRun struct {
	System        string  `json:"system"`
	Writers       int     `json:"writers"`
	Round         int     `json:"round"`
	Commits       int     `json:"commits"`
	Warmup        int     `json:"warmup_commits"` // landed untimed before the timed window
	Failed        int     `json:"failed"`
	Retries       int     `json:"retries"`
	Merges        int     `json:"merges"`
	ElapsedMS     float64 `json:"elapsed_ms"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	// LinkP50MS and LinkMeanMS describe the commit chain: the time from one
	// snapshot's batch answer to the next one's (Result.ChainLinks).
	LinkP50MS  float64 `json:"link_p50_ms"`
	LinkMeanMS float64 `json:"link_mean_ms"`
	// WritersCommitted is how many of the writers had a commit
	// acknowledged in the window; Unanswered how many writer commits were
	// still under way when it closed, and UnansweredOldestMS the age of the
	// oldest then (Result.Unanswered): p50 and p99 do not count them.
	WritersCommitted   int     `json:"writers_committed"`
	Unanswered         int     `json:"unanswered_at_end"`
	UnansweredOldestMS float64 `json:"unanswered_oldest_ms"`
	Verified           bool    `json:"verified"`
	// MachineCPUMS and ProcessCPUMS are the timed window's CPU time per
	// writer commit (Result.CPU): the whole machine's, and this process's
	// (the driver; moraine too when it runs in-process). Zero when not
	// measured.
	MachineCPUMS float64 `json:"machine_cpu_ms_per_commit"`
	ProcessCPUMS float64 `json:"process_cpu_ms_per_commit"`
	// MachineBusy is the share of the machine's CPU time that was busy in
	// the timed window (CPUUse.BusyShare): below one, the run was not bound
	// by CPU alone.
	MachineBusy float64 `json:"machine_busy_share"`
	// RunQueueMeanUS and RunQueueP90US are how long this process's
	// goroutines waited for a processor once runnable in the timed window
	// (CPUUse.RunQueue): the driver's, and moraine's too when it runs
	// in-process. Zero when not measured.
	RunQueueMeanUS float64 `json:"runq_wait_mean_us"`
	RunQueueP90US  float64 `json:"runq_wait_p90_us"`
	// ServerRunQueueMeanUS and ServerRunQueueP90US are the same for a
	// server in another process (CPUUse.ServerRunQueue); zero when not
	// measured.
	ServerRunQueueMeanUS float64 `json:"server_runq_wait_mean_us,omitempty"`
	ServerRunQueueP90US  float64 `json:"server_runq_wait_p90_us,omitempty"`
	// Phases is the chain link broken down (CommitsConfig.Phases).
	Phases *PhaseSummary `json:"phases,omitempty"`
}

// PhaseSummary summarizes a run's chain links broken down (workload.LinkPhases):
// the median and mean of each phase in microseconds, and the late links
// (workload.LinkPhases.Late) — how many, and their share of all the links' time;
// and the rest of its writers' cycles (workload.WriterCycle).
type PhaseSummary struct {
	Links     int        `json:"links"`
	Wait      [2]float64 `json:"wait_us"` // [median, mean]
	Stats     [2]float64 `json:"stats_us"`
	Paths     [2]float64 `json:"paths_us"`
	Batch     [2]float64 `json:"batch_us"`
	Link      [2]float64 `json:"link_us"`
	Late      int        `json:"late_links"`
	LateShare float64    `json:"late_time_share"`
	// Tail and ToSnapshot summarize workload.WriterCycle's, [median, mean] µs;
	// zero without any.
	Tail       [2]float64 `json:"tail_us"`
	ToSnapshot [2]float64 `json:"to_snapshot_us"`
}

// SummarizePhases returns nil for no links.
func SummarizePhases(links []workload.LinkPhases, cycles []workload.WriterCycle) *PhaseSummary {
	if len(links) == 0 {
		return nil
	}
	s := &PhaseSummary{Links: len(links),
		Wait:       medianMeanUS(links, func(l workload.LinkPhases) time.Duration { return l.Wait }),
		Stats:      medianMeanUS(links, func(l workload.LinkPhases) time.Duration { return l.Stats }),
		Paths:      medianMeanUS(links, func(l workload.LinkPhases) time.Duration { return l.Paths }),
		Batch:      medianMeanUS(links, func(l workload.LinkPhases) time.Duration { return l.Batch }),
		Link:       medianMeanUS(links, func(l workload.LinkPhases) time.Duration { return l.Link }),
		Tail:       medianMeanUS(cycles, func(c workload.WriterCycle) time.Duration { return c.Tail }),
		ToSnapshot: medianMeanUS(cycles, func(c workload.WriterCycle) time.Duration { return c.ToSnapshot }),
	}
	var all, late time.Duration
	for _, l := range links {
		all += l.Link
		if l.Late {
			s.Late++
			late += l.Link
		}
	}
	if all > 0 {
		s.LateShare = float64(late) / float64(all)
	}
	return s
}

// medianMeanUS is the median and mean of f over xs in microseconds; zero
// for none.
func medianMeanUS[T any](xs []T, f func(T) time.Duration) [2]float64 {
	if len(xs) == 0 {
		return [2]float64{}
	}
	v := make([]time.Duration, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	p50, mean := medianMean(v)
	return [2]float64{us(p50), us(mean)}
}

// CommitsReport is the whole benchmark, as printed and as written to JSON.
type CommitsReport struct {
	Benchmark    string       `json:"benchmark"`
	Machine      string       `json:"machine"`
	CommitsPer   int          `json:"commits_per_writer"`
	Warmup       int          `json:"warmup_commits"`
	Tables       int          `json:"tables"`
	Compactor    bool         `json:"compactor"`
	Runs         []CommitsRun `json:"runs"`
	RatioVsPG    float64      `json:"ratio_vs_postgres"` // NaN (null in JSON) without a second system
	RatioWriters int          `json:"ratio_writers"`
	Rounds       int          `json:"rounds"`
	// RoundRatios are the second system's commits/s over the baseline's at
	// RatioWriters, one per round; RatioVsPG is their median.
	RoundRatios   []float64 `json:"round_ratios"`
	BaselineLabel string    `json:"baseline"`
}

// MarshalJSON writes a missing ratio as null.
func (r CommitsReport) MarshalJSON() ([]byte, error) {
	type plain CommitsReport
	var ratio *float64
	if !math.IsNaN(r.RatioVsPG) && !math.IsInf(r.RatioVsPG, 0) {
		ratio = &r.RatioVsPG
	}
	return json.Marshal(struct {
		plain
		RatioVsPG *float64 `json:"ratio_vs_postgres"`
	}{plain(r), ratio})
}

// freshCatalog gives a run an empty catalog on target: a new database when
// the server allows CREATE DATABASE, else a new metadata schema in the
// database the conninfo names.
func freshCatalog(ctx context.Context, t Target) (dial func(context.Context) (*pgconn.PgConn, error), schema string, cleanup func(), err error) {
	dial, drop, err := workload.FreshDatabase(ctx, t.ConnInfo, "moraine_bench")
	if err == nil {
		return dial, "public", func() { _ = drop(context.Background()) }, nil
	}
	dbErr := err
	cfg, perr := pgconn.ParseConfig(t.ConnInfo)
	if perr != nil {
		return nil, "", nil, perr
	}
	dial = func(ctx context.Context) (*pgconn.PgConn, error) { return pgconn.ConnectConfig(ctx, cfg.Copy()) }
	schema = fmt.Sprintf("bench_%d", time.Now().UnixNano())
	cleanup = func() {
		if c, err := dial(context.Background()); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE").ReadAll()
			c.Close(context.Background())
		}
	}
	// Probe that the target is reachable at all, so that a dead target
	// reports the database error rather than a later one.
	c, err := dial(ctx)
	if err != nil {
		return nil, "", nil, errors.Join(dbErr, err)
	}
	c.Close(context.Background())
	return dial, schema, cleanup, nil
}

// RunCommits runs every target at every writer count, each on a fresh
// catalog, Rounds times: per writer count, round after round, the targets in
// turn.
func RunCommits(ctx context.Context, bc CommitsConfig) (*CommitsReport, error) {
	base := bc.Base.WithDefaults()
	rounds := max(bc.Rounds, 1)
	rep := &CommitsReport{
		Benchmark: "commits", Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		CommitsPer: bc.Commits, Warmup: bc.Warmup, Tables: base.Tables, Compactor: base.Compactor, RatioVsPG: math.NaN(), Rounds: rounds,
	}
	// Every run's catalog is removed at the end (Server.Remove says why).
	var removals []func()
	defer func() {
		for i := len(removals) - 1; i >= 0; i-- {
			removals[i]()
		}
	}()
	for _, w := range bc.Writers {
		for round := 1; round <= rounds; round++ {
			for _, t := range bc.Targets {
				run, err := benchOne(ctx, bc, t, w, &removals)
				if err != nil {
					return rep, fmt.Errorf("%s, %d writers: %w", t.Name, w, err)
				}
				run.Round = round
				rep.Runs = append(rep.Runs, run)
				if bc.Progress != nil {
					fmt.Fprintf(bc.Progress, "%s writers=%d round %d: %.1f commits/s, p50 %.2fms, p99 %.2fms, chain link p50 %.2fms, %d failed, %d retries, %d of %d writers committed, %d unanswered at the end (oldest %.1fms)\n",
						t.Name, w, round, run.CommitsPerSec, run.P50MS, run.P99MS, run.LinkP50MS, run.Failed, run.Retries,
						run.WritersCommitted, w, run.Unanswered, run.UnansweredOldestMS)
				}
			}
		}
	}
	if len(bc.Targets) > 0 && len(bc.Writers) > 0 {
		hi := bc.Writers[0]
		for _, w := range bc.Writers {
			hi = max(hi, w)
		}
		rep.RatioWriters = hi
		rep.BaselineLabel = bc.Targets[0].Name
		rep.RoundRatios = rep.roundRatios(hi)
		if len(rep.RoundRatios) > 0 {
			rep.RatioVsPG = Median(rep.RoundRatios)
		}
	}
	return rep, nil
}

// roundRatios pairs, round by round, the first system other than the
// baseline with the baseline at n writers: its commits/s over the
// baseline's.
func (r *CommitsReport) roundRatios(n int) []float64 {
	type pair struct{ pg, other float64 }
	byRound := map[int]*pair{}
	var order []int
	other := ""
	for _, run := range r.Runs {
		if run.Writers != n {
			continue
		}
		if run.System != r.BaselineLabel {
			if other == "" {
				other = run.System
			}
			if run.System != other {
				continue
			}
		}
		p := byRound[run.Round]
		if p == nil {
			p = &pair{}
			byRound[run.Round] = p
			order = append(order, run.Round)
		}
		if run.System == r.BaselineLabel {
			p.pg = run.CommitsPerSec
		} else {
			p.other = run.CommitsPerSec
		}
	}
	var out []float64
	for _, round := range order {
		if p := byRound[round]; p.pg > 0 && p.other > 0 {
			out = append(out, p.other/p.pg)
		}
	}
	return out
}

// Median of a non-empty slice (the mean of the middle two for an even
// count); xs is not modified.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// medianRun is, for one system and writer count, the run of median
// commits/s across rounds (the lower middle for an even count).
func (r *CommitsReport) medianRun(system string, writers int) (CommitsRun, bool) {
	var runs []CommitsRun
	for _, run := range r.Runs {
		if run.System == system && run.Writers == writers {
			runs = append(runs, run)
		}
	}
	if len(runs) == 0 {
		return CommitsRun{}, false
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].CommitsPerSec < runs[j].CommitsPerSec })
	return runs[(len(runs)-1)/2], true
}

// benchOne measures target t at writers on a fresh catalog, and drops it
// after the run. A server it started is stopped then too, and what the
// server stored is appended to removals for the caller to remove when the
// benchmark ends (Server.Remove).
func benchOne(ctx context.Context, bc CommitsConfig, t Target, writers int, removals *[]func()) (run CommitsRun, err error) {
	var srv Server
	if t.Start != nil {
		if srv, err = t.Start(ctx); err != nil {
			return CommitsRun{}, err
		}
		if srv.Remove != nil {
			*removals = append(*removals, srv.Remove)
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stop %s: %w", t.Name, serr)
			}
		}()
		t.ConnInfo = srv.ConnInfo
	}
	dial, schema, cleanup, err := freshCatalog(ctx, t)
	if err != nil {
		return CommitsRun{}, err
	}
	defer cleanup()
	cfg := bc.Base
	cfg.ConnString = ""
	cfg.Dial = dial
	cfg.Schema = schema
	cfg.Writers = writers
	cfg.CommitsPerWriter = bc.Commits
	cfg.Warmup = bc.Warmup
	cfg.ServerRunQueue = srv.RunQueue
	if bc.DataDir != "" {
		cfg.DataDir = filepath.Join(bc.DataDir, fmt.Sprintf("%s-w%d", t.Name, writers))
		cfg.DataPath = ""
	}
	if err := workload.Prepare(ctx, cfg); err != nil {
		return CommitsRun{}, err
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		return CommitsRun{}, err
	}
	run = CommitsRun{
		System: t.Name, Writers: writers, Commits: res.Commits, Warmup: res.Warmup, Failed: res.Failed, Retries: res.Retries, Merges: res.Merges,
		ElapsedMS: ms(res.Elapsed), CommitsPerSec: res.CommitsPerSec(), P50MS: ms(res.Percentile(50)), P99MS: ms(res.Percentile(99)),
		WritersCommitted: res.WritersCommitted, Unanswered: len(res.Unanswered),
	}
	for _, a := range res.Unanswered {
		run.UnansweredOldestMS = max(run.UnansweredOldestMS, ms(a))
	}
	if links := res.ChainLinks(); len(links) > 0 {
		p50, mean := medianMean(links)
		run.LinkP50MS, run.LinkMeanMS = ms(p50), ms(mean)
	}
	if res.CPUMeasured && res.Commits > 0 {
		run.MachineCPUMS = ms(res.CPU.Machine) / float64(res.Commits)
		run.ProcessCPUMS = ms(res.CPU.Process) / float64(res.Commits)
		run.MachineBusy = res.CPU.BusyShare()
		run.RunQueueMeanUS = us(res.CPU.RunQueue.Mean)
		run.RunQueueP90US = us(res.CPU.RunQueue.P90)
		run.ServerRunQueueMeanUS = us(res.CPU.ServerRunQueue.Mean)
		run.ServerRunQueueP90US = us(res.CPU.ServerRunQueue.P90)
	}
	if bc.Phases {
		run.Phases = SummarizePhases(res.ChainPhases(), res.WriterCycles())
	}
	if bc.Verify {
		conn, err := dial(ctx)
		if err != nil {
			return run, err
		}
		defer conn.Close(context.Background())
		if err := res.Verify(ctx, conn); err != nil {
			return run, err
		}
		run.Verified = true
	}
	return run, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// medianMean returns the median and the mean of sorted, non-empty v.
func medianMean(v []time.Duration) (p50, mean time.Duration) {
	var sum time.Duration
	for _, d := range v {
		sum += d
	}
	return v[len(v)/2], sum / time.Duration(len(v))
}

// unansweredCell is a run's commits still under way when its window
// closed, with the oldest one's age then.
func unansweredCell(run CommitsRun) string {
	if run.Unanswered == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (oldest %.1f ms)", run.Unanswered, run.UnansweredOldestMS)
}

// WriteTable prints the runs, a ratio line per writer count when there are
// two systems, and ends with `ratio_vs_postgres=<x>` (`n/a` when only one
// system ran).
func (r *CommitsReport) WriteTable(w io.Writer) error {
	if r.Warmup > 0 {
		fmt.Fprintf(w, "each run timed after %d untimed warm-up commits on its catalog, over a window of commits its writers make without stopping\n", r.Warmup)
	}
	fmt.Fprintln(w, "p50/p99 count the commits that ended in the window; committed: the writers with a commit acknowledged in it; unanswered: writer commits still under way when it closed (a writer that lost the race sleeps in DuckLake's back-off), with the oldest one's age")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rounds := r.Rounds > 1
	if rounds {
		fmt.Fprintln(tw, "system\twriters\tround\tcommits\tfailed\tretries\tcommits/s\tp50 ms\tp99 ms\tlink p50 ms\tlink mean ms\tcommitted\tunanswered\t")
	} else {
		fmt.Fprintln(tw, "system\twriters\tcommits\tfailed\tretries\tcommits/s\tp50 ms\tp99 ms\tlink p50 ms\tlink mean ms\tcommitted\tunanswered\t")
	}
	for _, run := range r.Runs {
		if rounds {
			fmt.Fprintf(tw, "%s\t%d\t%d\t", run.System, run.Writers, run.Round)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t", run.System, run.Writers)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%d/%d\t%s\t\n", run.Commits, run.Failed,
			run.Retries, run.CommitsPerSec, run.P50MS, run.P99MS, run.LinkP50MS, run.LinkMeanMS,
			run.WritersCommitted, run.Writers, unansweredCell(run))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeCPU(w); err != nil {
		return err
	}
	if err := r.writePhases(w); err != nil {
		return err
	}
	systems, writers := r.axes()
	for _, s := range systems {
		if s == r.BaselineLabel {
			continue
		}
		for _, n := range writers {
			a, okA := r.medianRun(s, n)
			b, okB := r.medianRun(r.BaselineLabel, n)
			if !okA || !okB || b.CommitsPerSec == 0 || b.P50MS == 0 {
				continue
			}
			what := ""
			if rounds {
				what = fmt.Sprintf(" (median runs of %d rounds)", r.Rounds)
			}
			fmt.Fprintf(w, "%s/%s writers=%d: commits/s x%.2f, p50 latency x%.2f (writers committed: %d against %d of %d)%s\n", s, r.BaselineLabel, n,
				a.CommitsPerSec/b.CommitsPerSec, a.P50MS/b.P50MS, a.WritersCommitted, b.WritersCommitted, n, what)
		}
	}
	if rounds && len(r.RoundRatios) > 0 {
		parts := make([]string, len(r.RoundRatios))
		for i, x := range r.RoundRatios {
			parts[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(w, "commits/s ratio at %d writers, round by round: %s; median %.3f\n", r.RatioWriters, strings.Join(parts, " "), r.RatioVsPG)
	}
	if math.IsNaN(r.RatioVsPG) {
		_, err := fmt.Fprintln(w, "ratio_vs_postgres=n/a")
		return err
	}
	_, err := fmt.Fprintf(w, "ratio_vs_postgres=%.3f\n", r.RatioVsPG)
	return err
}

// writeCPU prints the timed windows' CPU time per commit, when measured.
func (r *CommitsReport) writeCPU(w io.Writer) error {
	measured := false
	for _, run := range r.Runs {
		measured = measured || run.ProcessCPUMS > 0
	}
	if !measured {
		return nil
	}
	fmt.Fprintln(w, "CPU time per commit in the timed window, ms: the whole machine's (busy time in /proc/stat) and this process's (the driver, and moraine when it runs in-process); busy: the share of the machine's CPU time that was busy; run queue: how long goroutines waited for a processor once runnable, mean/p90 µs, this process's and a server process's (its /metrics; - where not read)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\twriters\tround\tmachine\tthis process\tbusy\trun queue\tserver run queue\t")
	for _, run := range r.Runs {
		server := "-"
		if run.ServerRunQueueP90US > 0 {
			server = fmt.Sprintf("%.0f/%.0f", run.ServerRunQueueMeanUS, run.ServerRunQueueP90US)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.0f%%\t%.0f/%.0f\t%s\t\n", run.System, run.Writers, run.Round, run.MachineCPUMS, run.ProcessCPUMS, 100*run.MachineBusy, run.RunQueueMeanUS, run.RunQueueP90US, server)
	}
	return tw.Flush()
}

// writePhases prints the runs' chain links broken down, when measured:
// median/mean microseconds of each phase, and the late links.
func (r *CommitsReport) writePhases(w io.Writer) error {
	measured := false
	for _, run := range r.Runs {
		measured = measured || run.Phases != nil
	}
	if !measured {
		return nil
	}
	fmt.Fprintln(w, "chain link by phase, median/mean µs: snapshot answer after the previous batch's, statistics reads, path reads, batch; late: links whose writer took its connection only after the previous batch was answered; the rest of a writer's cycle: tail, from its batch's answer until it began its next commit (COMMIT, durability, the pool), and to snapshot, from then until that commit's latest-snapshot answer (the pool, BEGIN, the prepare, the wait behind the chain)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\twriters\tround\tlinks\twait\tstats\tpaths\tbatch\tlink\tlate\tlate time\ttail\tto snapshot\t")
	pair := func(v [2]float64) string { return fmt.Sprintf("%.0f/%.0f", v[0], v[1]) }
	for _, run := range r.Runs {
		p := run.Phases
		if p == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f%%\t%s\t%s\t\n", run.System, run.Writers, run.Round, p.Links,
			pair(p.Wait), pair(p.Stats), pair(p.Paths), pair(p.Batch), pair(p.Link), p.Late, 100*p.LateShare, pair(p.Tail), pair(p.ToSnapshot))
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (r *CommitsReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
