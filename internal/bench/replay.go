package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/replay"
)

// The replay benchmark: the captured DuckDB+DuckLake conversations, message
// for message, as fast as the answers allow, against moraine and PostgreSQL
// in turn; the server's CPU per commit is what is compared, read from /proc
// for the server's processes (moraine serve; PostgreSQL's postmaster with
// every backend, ended or running), so the replaying client's own CPU —
// a real DuckDB's, which costs far more — is never counted.

// ReplayTarget is one server the benchmark replays against.
type ReplayTarget struct {
	Name string
	// Addr is where the replayer connects (host:port or conninfo);
	// Admin a conninfo for CREATE and DROP DATABASE.
	Addr, Admin string
	// CPU reads the server's CPU time so far; Threads its running
	// threads' by thread id, to the nanosecond (nil: no per-kind figures).
	CPU     func() (time.Duration, error)
	Threads func(into map[int]time.Duration) error
	// Recorded marks the floor (RecordedTarget): it has no databases to
	// create (no Admin), and commits what the transcript records.
	Recorded bool
}

// PostgresTarget is the PostgreSQL server at conninfo (an admin
// database): its CPU is its postmaster's and its backends', found through
// the parent of this connection's backend. PostgreSQL must run on this
// machine.
func PostgresTarget(ctx context.Context, conninfo string) (ReplayTarget, error) {
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		return ReplayTarget{}, fmt.Errorf("bench: postgres: %w", err)
	}
	defer c.Close(ctx)
	pm, err := ParentPID(int(c.PID()))
	if err != nil {
		return ReplayTarget{}, fmt.Errorf("bench: postgres: its processes must be on this machine: %w", err)
	}
	return ReplayTarget{Name: "postgres", Addr: conninfo, Admin: conninfo,
		CPU:     func() (time.Duration, error) { return ProcessCPU(pm) },
		Threads: func(into map[int]time.Duration) error { return TreeCPU(pm, into) }}, nil
}

// MoraineTarget is a moraine server running as a child process.
func MoraineTarget(m *Moraine) ReplayTarget {
	ci := m.ConnInfo("postgres")
	return ReplayTarget{Name: "moraine", Addr: ci, Admin: ci,
		CPU:     threadsClock(m.PID),
		Threads: func(into map[int]time.Duration) error { return ThreadsCPU(m.PID, into) }}
}

// threadsClock returns a reader of process pid's CPU time to the
// nanosecond: the sum, over its threads, of what each ran between calls
// (schedstat), where /proc/<pid>/stat counts 10 ms ticks — too coarse for
// a conversation of twenty commits of two milliseconds. A thread that ends
// between two calls loses what it ran since the first; a Go server's
// threads live as long as it does.
func threadsClock(pid int) func() (time.Duration, error) {
	var mu sync.Mutex
	var total time.Duration
	last := map[int]time.Duration{}
	return func() (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		now := map[int]time.Duration{}
		if err := ThreadsCPU(pid, now); err != nil {
			return 0, err
		}
		total += CPUSince(last, now)
		last = now
		return total, nil
	}
}

// ReplayRow is one transcript at one concurrency: totals per target over
// every round.
type ReplayRow struct {
	Transcript  string
	Concurrency int
	Commits     map[string]int64 // snapshots the replays committed
	Wall        map[string]time.Duration
	CPU         map[string]time.Duration
	// ByKind splits the server CPU of one-client replays by kind of
	// commit (replay_kinds.go); empty for concurrent ones.
	ByKind map[string]*KindCPU
}

// PerCommit is d spread over the row's commits on target.
func (r ReplayRow) PerCommit(d map[string]time.Duration, target string) time.Duration {
	if n := r.Commits[target]; n > 0 {
		return d[target] / time.Duration(n)
	}
	return 0
}

// ReplayRuns says how often RunReplay replays each transcript.
type ReplayRuns struct {
	Concurrency []int // concurrent replays per measured round, one row each
	Rounds      int   // measured rounds per concurrency and target
	// Warmup unmeasured replays of each transcript precede its rounds on
	// every target, so that neither server's figures include what a fresh
	// process or a cold cache costs once: a server in service has long
	// paid it.
	Warmup int
}

// RunReplay replays each transcript as runs says on every target, the
// targets taking turns round by round. A replay whose answers differ from
// the recorded ones is an error: the figures are only for conversations
// the server served faithfully.
func RunReplay(ctx context.Context, trs []*replay.Transcript, runs ReplayRuns, targets []ReplayTarget, progress io.Writer) ([]ReplayRow, error) {
	var out []ReplayRow
	for _, tr := range trs {
		kinds, err := commitKinds(tr)
		if err != nil {
			return out, err
		}
		for w := 0; w < runs.Warmup; w++ {
			for _, t := range targets {
				if _, _, _, err := replayRound(ctx, tr, 1, "warmup"+strconv.Itoa(w), t, len(kinds), nil); err != nil {
					return out, fmt.Errorf("bench replay: %s warm-up on %s: %w", tr.Name, t.Name, err)
				}
			}
		}
		for _, c := range runs.Concurrency {
			row := ReplayRow{Transcript: tr.Name, Concurrency: c, Commits: map[string]int64{},
				Wall: map[string]time.Duration{}, CPU: map[string]time.Duration{}, ByKind: map[string]*KindCPU{}}
			for r := 0; r < runs.Rounds; r++ {
				for k := range targets {
					t := targets[(k+r)%len(targets)]
					var meter *kindMeter
					if c == 1 && t.Threads != nil {
						meter = newKindMeter(kinds, t.Threads, t.Name, row.ByKind)
					}
					commits, wall, cpu, err := replayRound(ctx, tr, c, strconv.Itoa(r), t, len(kinds), meter)
					if err != nil {
						return out, fmt.Errorf("bench replay: %s ×%d on %s: %w", tr.Name, c, t.Name, err)
					}
					row.Commits[t.Name] += commits
					row.Wall[t.Name] += wall
					row.CPU[t.Name] += cpu
				}
				if progress != nil {
					fmt.Fprintf(progress, "bench replay: %s ×%d round %d of %d done\n", tr.Name, c, r+1, runs.Rounds)
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// replayRound runs c replays of tr at once, each on a fresh database of
// its own (the recorded one on the floor) named after round, and returns
// the snapshots they committed, the wall time and the server's CPU
// between start and end. recorded is the number of commits tr records.
func replayRound(ctx context.Context, tr *replay.Transcript, c int, round string, t ReplayTarget, recorded int, meter *kindMeter) (commits int64, wall, cpu time.Duration, err error) {
	dbs := tr.Databases()
	if len(dbs) != 1 {
		return 0, 0, 0, fmt.Errorf("transcript uses %d databases; the benchmark replays single-lake conversations", len(dbs))
	}
	// The floor serves a database named …_<recorded name> as the recorded
	// one (replay.Recorded).
	names := make([]string, c)
	for i := range names {
		names[i] = "bench_" + round + "_" + strconv.Itoa(i) + "_" + dbs[0]
	}
	if !t.Recorded {
		if err := replay.RecreateDatabases(ctx, t.Admin, names); err != nil {
			return 0, 0, 0, err
		}
		defer dropDatabases(context.Background(), t.Admin, names)
	}
	cpu0, err := t.CPU()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	errs := make([]error, c)
	var wg sync.WaitGroup
	opts := replay.Options{Addr: t.Addr, Timeout: time.Minute}
	if meter != nil {
		if err := meter.restart(); err != nil {
			return 0, 0, 0, err
		}
		opts.Answered = meter.answered
	}
	for i, name := range names {
		wg.Go(func() {
			opts := opts
			opts.Databases = map[string]string{dbs[0]: name}
			res := replay.Replay(ctx, tr, opts)
			if !res.Passed() {
				errs[i] = res.Err
			}
		})
	}
	wg.Wait()
	wall = time.Since(start)
	cpu1, err := t.CPU()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, e := range errs {
		if e != nil {
			return 0, 0, 0, e
		}
	}
	if meter != nil && meter.err != nil {
		return 0, 0, 0, meter.err
	}
	if t.Recorded {
		return int64(recorded * c), wall, cpu1 - cpu0, nil
	}
	for _, name := range names {
		n, err := countSnapshots(ctx, t.Admin, name)
		if err != nil {
			return 0, 0, 0, err
		}
		commits += n
	}
	return commits, wall, cpu1 - cpu0, nil
}

// countSnapshots counts the snapshots of the lake in database db.
func countSnapshots(ctx context.Context, admin, db string) (int64, error) {
	cfg, err := pgconn.ParseConfig(admin)
	if err != nil {
		return 0, err
	}
	cfg.Database = db
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, `SELECT count(*) FROM "public".ducklake_snapshot`).ReadAll()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(rs[0].Rows[0][0]), 10, 64)
}

func dropDatabases(ctx context.Context, admin string, names []string) {
	c, err := pgconn.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer c.Close(ctx)
	for _, n := range names {
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)").ReadAll()
	}
}

// WriteReplayTable prints the rows: per commit, wall time and server CPU
// on each target and their ratios (PostgreSQL ÷ moraine), the floor's CPU
// where it ran and the ratio it bounds (PostgreSQL ÷ floor), then the
// overall CPU ratio as `ratio_vs_postgres=<x>`.
func WriteReplayTable(w io.Writer, rows []ReplayRow) error {
	tw := newTab(w)
	fmt.Fprintln(tw, "transcript\tclients\tcommits\twall/commit PG\twall/commit moraine\twall ratio\tCPU/commit PG\tCPU/commit moraine\tCPU ratio\tCPU/commit floor\tPG ÷ floor\t")
	var pgCPU, moCPU time.Duration
	var pgN, moN int64
	for _, r := range rows {
		pw, mw := r.PerCommit(r.Wall, "postgres"), r.PerCommit(r.Wall, "moraine")
		pc, mc := r.PerCommit(r.CPU, "postgres"), r.PerCommit(r.CPU, "moraine")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%v\t%.2f×\t%v\t%v\t%.2f×\t%s\t\n", r.Transcript, r.Concurrency, r.Commits["moraine"],
			pw.Round(time.Microsecond), mw.Round(time.Microsecond), ratio(pw, mw), pc.Round(time.Microsecond), mc.Round(time.Microsecond), ratio(pc, mc),
			floorCells(pc, r.Commits[Floor], r.CPU[Floor]))
		pgCPU += r.CPU["postgres"]
		moCPU += r.CPU["moraine"]
		pgN += r.Commits["postgres"]
		moN += r.Commits["moraine"]
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if pgN == 0 || moN == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "ratio_vs_postgres=%.2f\n", ratio(pgCPU/time.Duration(pgN), moCPU/time.Duration(moN)))
	return err
}

// floorCells is the floor's CPU per commit and PostgreSQL's ratio to it,
// two tab-separated cells ("-" where the floor did not run).
func floorCells(pg time.Duration, commits int64, cpu time.Duration) string {
	if commits == 0 {
		return "-\t-"
	}
	f := cpu / time.Duration(commits)
	return fmt.Sprintf("%v\t%.2f×", f.Round(time.Microsecond), ratio(pg, f))
}

func ratio(pg, mo time.Duration) float64 {
	if mo <= 0 {
		return 0
	}
	return float64(pg) / float64(mo)
}
