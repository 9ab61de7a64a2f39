package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/replay"
)

// benchRecordedMain is `moraine bench recorded`: the fixtures named by
// --transcripts served with PostgreSQL's recorded answers until a signal
// (internal/bench/recorded.go); bench replay runs it as a child process.
func benchRecordedMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench recorded --transcripts NAMES [flags]", stdout, stderr)
	names := fs.String("transcripts", "", "comma-separated fixture names (required)")
	listen := fs.String("listen", "127.0.0.1:0", "`host:port` to accept replays on")
	dir := fs.String("dir", "", "parent directory of the durable-write file (default: the system's temporary directory)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	trs, err := loadFixtures(*names)
	if err != nil || len(trs) == 0 {
		fmt.Fprintf(stderr, "bench recorded: --transcripts: %v\n", err)
		return 2
	}
	if err := bench.ServeRecorded(ctx, trs, *listen, *dir, newLogger(stderr, *logFormat, "info")); err != nil {
		fmt.Fprintf(stderr, "bench recorded: %v\n", err)
		return 1
	}
	return 0
}

// loadFixtures loads the comma-separated fixtures names.
func loadFixtures(names string) ([]*replay.Transcript, error) {
	var trs []*replay.Transcript
	for n := range strings.SplitSeq(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		tr, err := replay.LoadFixture(n)
		if err != nil {
			return nil, err
		}
		trs = append(trs, tr)
	}
	return trs, nil
}

// benchReplayMain is `moraine bench replay`: the captured conversations of
// the real client, replayed against a fresh moraine serve process and a
// PostgreSQL on this machine, comparing the servers' CPU per commit
// (internal/bench/replay.go).
func benchReplayMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench replay --postgres CONNINFO [flags]", stdout, stderr)
	pg := fs.String("postgres", "", "PostgreSQL conninfo of an admin database on this machine (required)")
	names := fs.String("transcripts", "s11_commit_mix,s05_inlining,s01_basic,s08_contention", "comma-separated fixture names (single-lake conversations)")
	clients := fs.String("clients", "1,16", "comma-separated numbers of concurrent replays, each on a lake of its own")
	rounds := fs.Int("rounds", 3, "replays of each transcript per client count and server")
	warmup := fs.Int("warmup", 1, "unmeasured replays of each transcript on every server before its rounds")
	dir := fs.String("dir", "", "parent `directory` of moraine's store and the floor's durable-write file (default: the system's temporary directory); put it on the disk PostgreSQL's data directory is on")
	floor := fs.Bool("floor", true, "also replay every round against PostgreSQL's recorded answers (`bench recorded`): the CPU any server spends on the conversation's round trips and flushes")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *pg == "" || *rounds < 1 || *warmup < 0 {
		fmt.Fprintln(stderr, "bench replay: --postgres is required, --rounds must be positive and --warmup not negative")
		return 2
	}
	concurrency, err := parseCounts(*clients)
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: --clients: %v\n", err)
		return 2
	}
	trs, err := loadFixtures(*names)
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	// The fixtures' Parquet files were not captured: the row-id hold,
	// which reads them, is off for the replay.
	m, err := bench.StartMoraine(ctx, bench.StoreSpec{Kind: "local", Dir: *dir, Process: exe, Args: []string{"--row-id-hold=false"}})
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	defer m.Stop()
	pt, err := bench.PostgresTarget(ctx, *pg)
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	targets := []bench.ReplayTarget{pt, bench.MoraineTarget(m)}
	if *floor {
		f, err := bench.StartRecorded(ctx, exe, trs, *dir)
		if err != nil {
			fmt.Fprintf(stderr, "bench replay: %v\n", err)
			return 1
		}
		defer f.Stop()
		targets = append(targets, bench.RecordedTarget(f))
	}
	storeDir := *dir
	if storeDir == "" {
		storeDir = os.TempDir()
	}
	create, removeProbe, err := bench.FileCreateCost(storeDir, 256)
	if removeProbe != nil {
		defer removeProbe()
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	runs := bench.ReplayRuns{Concurrency: concurrency, Rounds: *rounds, Warmup: *warmup}
	rows, err := bench.RunReplay(ctx, trs, runs, targets, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	// What a file creation cost beside the store: the store creates one
	// per WAL object, and the price depends on the directory.
	fmt.Fprintf(stdout, "file_create_cpu=%v dir=%s\n\n", create, storeDir)
	if err := bench.WriteReplayKinds(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteReplayTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	return 0
}
