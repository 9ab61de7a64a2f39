package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/workload"
)

// benchCommits is `moraine bench commits`: the DuckLake-shaped commit
// workload (internal/workload) against PostgreSQL and, when --moraine names
// one, a moraine server, each writer count on a fresh catalog. It prints a
// table and ends with `ratio_vs_postgres=<x>`: moraine's commits/s divided
// by PostgreSQL's at the highest writer count (with --rounds, the median of
// the rounds' ratios). Without --moraine it starts its own moraine on
// --store (with --put-latency on S3 PUTs): in-process, or with --process as
// a child `moraine serve` process of this executable.

func benchCommitsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench commits [flags]", stdout, stderr)
	writersFlag := fs.String("writers", "1,4,16", "comma-separated writer counts")
	commits := fs.Int("commits", 200, "commits per writer")
	warmup := fs.Int("warmup", 400, "commits made untimed before each run's timed window opens; the writers do not stop at its edges (the same on every system); 0 times from the first commit")
	pg := fs.String("postgres", "", "PostgreSQL conninfo (required), e.g. host=127.0.0.1 port=5432 user=postgres dbname=postgres")
	moraine := fs.String("moraine", "", "moraine conninfo; empty: start an in-process moraine on --store")
	store := fs.String("store", "local", "store of the in-process moraine: local (a temp directory) or s3 (in-process S3)")
	process := fs.Bool("process", false, "run each fresh moraine as a child `moraine serve` process, as deployed (its clients then pay the cross-process wake-ups PostgreSQL's pay), instead of in-process")
	putLatency := fs.String("put-latency", "0", `latency added to every S3 PUT of the in-process moraine (--store s3): a duration or "lo-hi"`)
	tables := fs.Int("tables", 4, "tables the writers spread over")
	columns := fs.Int("columns", 8, "columns per table (= stats rows per file)")
	rows := fs.Int("rows", 100, "mean records per data file")
	compactor := fs.Bool("compactor", false, "run a concurrent merge compactor")
	maxRetries := fs.Int("max-retries", 10, "DuckLake ducklake_max_retry_count")
	retryWait := fs.Duration("retry-wait", 100*time.Millisecond, "DuckLake ducklake_retry_wait_ms")
	backoff := fs.Float64("retry-backoff", 1.5, "DuckLake ducklake_retry_backoff")
	dataDir := fs.String("data-dir", "", "write real Parquet data files under this directory (for a server that holds compactions to their row ids)")
	rounds := fs.Int("rounds", 1, "measure every writer count this many times, the systems taking turns; the ratio is the median of the rounds'")
	verify := fs.Bool("verify", true, "read each catalog back and check it after its run")
	phases := fs.Bool("phases", false, "also break each run's commit-chain link down by phase (snapshot wait, statistics reads, path reads, batch) and count the late links, whose writer began only after the previous batch was answered")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	pngOut := fs.String("png", "", "write a bar chart of the results to this PNG file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of this process (driver and in-process moraine) to this file")
	traceOut := fs.String("trace", "", "write a runtime execution trace of this process to this file")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *pg == "" {
		fmt.Fprintln(stderr, "bench commits: --postgres <conninfo> is required")
		return 2
	}
	var writers []int
	for _, s := range strings.Split(*writersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "bench commits: --writers: bad count %q\n", s)
			return 2
		}
		writers = append(writers, n)
	}
	if *commits < 1 || *tables < 1 || *columns < 1 || *rows < 1 || *rounds < 1 {
		fmt.Fprintln(stderr, "bench commits: --commits, --tables, --columns, --rows and --rounds must be positive")
		return 2
	}
	if *warmup < 0 {
		fmt.Fprintln(stderr, "bench commits: --warmup must not be negative")
		return 2
	}
	stop, err := bench.StartProfiles(*cpuprofile, *traceOut)
	if err != nil {
		fmt.Fprintf(stderr, "bench commits: %v\n", err)
		return 1
	}
	defer stop()
	targets := []bench.Target{{Name: "postgres", ConnInfo: *pg}}
	if *process && *moraine != "" {
		fmt.Fprintln(stderr, "bench commits: --process starts its own moraine; it does not go with --moraine")
		return 2
	}
	if *moraine == "" {
		lat, err := fault.ParseLatency(*putLatency)
		if err != nil {
			fmt.Fprintf(stderr, "bench commits: --put-latency: %v\n", err)
			return 2
		}
		if *store != "local" && *store != "s3" {
			fmt.Fprintf(stderr, "bench commits: --store: %q is not local or s3\n", *store)
			return 2
		}
		// A fresh in-process moraine per run, on a fresh store: the
		// counterpart of the fresh PostgreSQL database each run gets.
		spec := bench.StoreSpec{Kind: *store, PutLatency: lat}
		if spec.Process, err = processExe(*process); err != nil {
			fmt.Fprintln(stderr, "bench commits:", err)
			return 1
		}
		where := "in-process"
		if *process {
			where = "a child process"
		}
		var announce sync.Once
		targets = append(targets, bench.Target{Name: "moraine", Start: func(ctx context.Context) (bench.Server, error) {
			m, err := bench.StartMoraine(ctx, spec)
			if err != nil {
				return bench.Server{}, err
			}
			announce.Do(func() { fmt.Fprintf(stdout, "moraine: %s, a fresh server per run, store %s\n", where, m.StoreDesc) })
			srv := bench.Server{ConnInfo: m.ConnInfo("postgres"), Stop: m.Halt, Remove: func() { _ = m.Stop() }}
			if *process {
				srv.RunQueue = m.RunQueue
			}
			return srv, nil
		}})
	} else {
		targets = append(targets, bench.Target{Name: "moraine", ConnInfo: *moraine})
	}
	mr := *maxRetries
	if mr == 0 {
		mr = -1 // workload.Config: 0 means the default, negative means none
	}
	rep, err := bench.RunCommits(ctx, bench.CommitsConfig{
		Targets: targets, Writers: writers, Commits: *commits, Warmup: *warmup, Rounds: *rounds, Verify: *verify, Phases: *phases, Progress: stderr, DataDir: *dataDir,
		Base: workload.Config{
			Tables: *tables, Columns: *columns, RowsPerFile: *rows, Compactor: *compactor,
			MaxRetries: mr, RetryWait: *retryWait, RetryBackoff: *backoff, Seed: uint64(time.Now().UnixNano()),
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "bench commits: %v\n", err)
		return 1
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "bench commits: %v\n", err)
		return 1
	}
	if *jsonOut != "" {
		if err := bench.WriteFile(*jsonOut, rep.WriteJSON); err != nil {
			fmt.Fprintf(stderr, "bench commits: --json: %v\n", err)
			return 1
		}
	}
	if *pngOut != "" {
		if err := bench.WriteFile(*pngOut, rep.WritePNG); err != nil {
			fmt.Fprintf(stderr, "bench commits: --png: %v\n", err)
			return 1
		}
	}
	return 0
}
