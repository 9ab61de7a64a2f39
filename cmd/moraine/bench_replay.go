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
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *pg == "" || *rounds < 1 {
		fmt.Fprintln(stderr, "bench replay: --postgres is required and --rounds must be positive")
		return 2
	}
	concurrency, err := parseCounts(*clients)
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: --clients: %v\n", err)
		return 2
	}
	var trs []*replay.Transcript
	for _, n := range strings.Split(*names, ",") {
		tr, err := replay.LoadFixture(strings.TrimSpace(n))
		if err == nil {
			trs = append(trs, tr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench replay: %v\n", err)
			return 2
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench replay: %v\n", err)
		return 1
	}
	// The fixtures' Parquet files were not captured: the row-id hold,
	// which reads them, is off for the replay.
	m, err := bench.StartMoraine(ctx, bench.StoreSpec{Kind: "local", Process: exe, Args: []string{"--row-id-hold=false"}})
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
	rows, err := bench.RunReplay(ctx, trs, concurrency, *rounds, []bench.ReplayTarget{pt, bench.MoraineTarget(m)}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
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
