package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Target is one catalog server the benchmark drives.
type Target struct {
	Name     string // "postgres", "moraine", …
	ConnInfo string
}

// BenchConfig is `moraine bench commits`.
type BenchConfig struct {
	Targets  []Target // the first target named "postgres" is the baseline
	Writers  []int    // writer counts, e.g. 1, 4, 16
	Commits  int      // commits per writer
	Base     Config   // everything else (tables, compactor, retry settings); Writers/CommitsPerWriter/Dial are set per run
	Verify   bool     // read each catalog back and check it after the run
	DataDir  string   // when set, each run writes real Parquet files under DataDir/<system>-w<writers>
	Progress io.Writer
}

// BenchRun is one (target, writer count) measurement.
type BenchRun struct {
	System        string  `json:"system"`
	Writers       int     `json:"writers"`
	Commits       int     `json:"commits"`
	Failed        int     `json:"failed"`
	Retries       int     `json:"retries"`
	Merges        int     `json:"merges"`
	ElapsedMS     float64 `json:"elapsed_ms"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	Verified      bool    `json:"verified"`
}

// BenchReport is the whole benchmark, as printed and as written to JSON.
type BenchReport struct {
	Benchmark     string     `json:"benchmark"`
	Machine       string     `json:"machine"`
	CommitsPer    int        `json:"commits_per_writer"`
	Tables        int        `json:"tables"`
	Compactor     bool       `json:"compactor"`
	Runs          []BenchRun `json:"runs"`
	RatioVsPG     float64    `json:"ratio_vs_postgres"` // NaN (null in JSON) without a second system
	RatioWriters  int        `json:"ratio_writers"`
	BaselineLabel string     `json:"baseline"`
}

// MarshalJSON writes a missing ratio as null.
func (r BenchReport) MarshalJSON() ([]byte, error) {
	type plain BenchReport
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
	dial, drop, err := FreshDatabase(ctx, t.ConnInfo, "moraine_bench")
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
			_ = exec(context.Background(), c, "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE")
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

// RunBench runs every target at every writer count, each on a fresh catalog.
func RunBench(ctx context.Context, bc BenchConfig) (*BenchReport, error) {
	base := bc.Base.withDefaults()
	rep := &BenchReport{
		Benchmark: "commits", Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		CommitsPer: bc.Commits, Tables: base.Tables, Compactor: base.Compactor, RatioVsPG: math.NaN(),
	}
	for _, t := range bc.Targets {
		for _, w := range bc.Writers {
			run, err := benchOne(ctx, bc, t, w)
			if err != nil {
				return rep, fmt.Errorf("%s, %d writers: %w", t.Name, w, err)
			}
			rep.Runs = append(rep.Runs, run)
			if bc.Progress != nil {
				fmt.Fprintf(bc.Progress, "%s writers=%d: %.1f commits/s, p50 %.2fms, p99 %.2fms, %d failed, %d retries\n",
					t.Name, w, run.CommitsPerSec, run.P50MS, run.P99MS, run.Failed, run.Retries)
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
		var pg, other *BenchRun
		for i := range rep.Runs {
			r := &rep.Runs[i]
			if r.Writers != hi {
				continue
			}
			if r.System == rep.BaselineLabel && pg == nil {
				pg = r
			} else if r.System != rep.BaselineLabel && other == nil {
				other = r
			}
		}
		if pg != nil && other != nil && pg.CommitsPerSec > 0 {
			rep.RatioVsPG = other.CommitsPerSec / pg.CommitsPerSec
		}
	}
	return rep, nil
}

func benchOne(ctx context.Context, bc BenchConfig, t Target, writers int) (BenchRun, error) {
	dial, schema, cleanup, err := freshCatalog(ctx, t)
	if err != nil {
		return BenchRun{}, err
	}
	defer cleanup()
	cfg := bc.Base
	cfg.ConnString = ""
	cfg.Dial = dial
	cfg.Schema = schema
	cfg.Writers = writers
	cfg.CommitsPerWriter = bc.Commits
	if bc.DataDir != "" {
		cfg.DataDir = filepath.Join(bc.DataDir, fmt.Sprintf("%s-w%d", t.Name, writers))
		cfg.DataPath = ""
	}
	if err := Prepare(ctx, cfg); err != nil {
		return BenchRun{}, err
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return BenchRun{}, err
	}
	run := BenchRun{
		System: t.Name, Writers: writers, Commits: res.Commits, Failed: res.Failed, Retries: res.Retries, Merges: res.Merges,
		ElapsedMS: ms(res.Elapsed), CommitsPerSec: res.CommitsPerSec(), P50MS: ms(res.Percentile(50)), P99MS: ms(res.Percentile(99)),
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

// WriteTable prints the runs, a ratio line per writer count when there are
// two systems, and ends with `ratio_vs_postgres=<x>` (`n/a` when only one
// system ran).
func (r *BenchReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\twriters\tcommits\tfailed\tretries\tcommits/s\tp50 ms\tp99 ms\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%.2f\t\n", run.System, run.Writers, run.Commits, run.Failed,
			run.Retries, run.CommitsPerSec, run.P50MS, run.P99MS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	runs := map[string]map[int]BenchRun{}
	var systems []string
	var writers []int
	seenW := map[int]bool{}
	for _, run := range r.Runs {
		if runs[run.System] == nil {
			runs[run.System] = map[int]BenchRun{}
			systems = append(systems, run.System)
		}
		runs[run.System][run.Writers] = run
		if !seenW[run.Writers] {
			seenW[run.Writers] = true
			writers = append(writers, run.Writers)
		}
	}
	for _, s := range systems {
		if s == r.BaselineLabel {
			continue
		}
		for _, n := range writers {
			a, okA := runs[s][n]
			b, okB := runs[r.BaselineLabel][n]
			if !okA || !okB || b.CommitsPerSec == 0 || b.P50MS == 0 {
				continue
			}
			fmt.Fprintf(w, "%s/%s writers=%d: commits/s x%.2f, p50 latency x%.2f\n", s, r.BaselineLabel, n,
				a.CommitsPerSec/b.CommitsPerSec, a.P50MS/b.P50MS)
		}
	}
	if math.IsNaN(r.RatioVsPG) {
		_, err := fmt.Fprintln(w, "ratio_vs_postgres=n/a")
		return err
	}
	_, err := fmt.Fprintf(w, "ratio_vs_postgres=%.3f\n", r.RatioVsPG)
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *BenchReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
