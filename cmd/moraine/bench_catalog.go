package main

import (
	"context"
	"fmt"
	"io"

	"github.com/moraine-db/moraine/internal/bench"
)

// benchCatalog builds a catalog of --files data files (--stats column-stats
// rows each) over --snapshots snapshots through the verbs, turns it into
// its keyspace pairs, reloads it with catalog.Load, and reports the load
// time, the heap the reloaded catalog holds, bytes per data file and the
// rate of a full decoding read of ducklake_data_file. The last line is
// bytes_per_file=<n>.
//
// With --postgres it instead builds the same catalog in an in-process
// moraine and in PostgreSQL and times DuckLake's attach and first-query
// reads on both (bench.RunCatalogVsPG), moraine's served in-process or, with
// --process, by a child `moraine serve` process on the built store; the
// last line is ratio_vs_postgres=<x>.

func benchCatalogMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench catalog [flags]", stdout, stderr)
	files := fs.Int("files", 1000000, "data files to register")
	snaps := fs.Int("snapshots", 10000, "snapshots to spread them over")
	stats := fs.Int("stats", 8, "column-stats rows per data file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the reload (with --postgres: of this process while both systems' reads are timed; -tagignore system=postgres leaves PostgreSQL's client out) to this file")
	pg := fs.String("postgres", "", "PostgreSQL conninfo: compare DuckLake's catalog reads against it (else: moraine-only load/heap figures)")
	tables := fs.Int("tables", 10000, "user tables (with --postgres)")
	reps := fs.Int("reps", 3, "runs of each read; the fastest counts (with --postgres)")
	rounds := fs.Int("rounds", 1, "time every read this many times on both systems, the two taking turns at going first; the ratio is the median of the rounds' (with --postgres)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file (with --postgres)")
	pngOut := fs.String("png", "", "write a bar chart of the read times to this PNG file (with --postgres)")
	follow := fs.Bool("follow", false, "reload as a replica does, indexing rows to follow a writer (without --postgres)")
	process := fs.Bool("process", false, "serve moraine's reads from a child `moraine serve` process on the built store, as deployed, instead of in-process (with --postgres; --cpuprofile then profiles the reading clients only)")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *files < 1 || *snaps < 1 || *stats < 1 || *tables < 1 || *reps < 1 || *rounds < 1 {
		fmt.Fprintln(stderr, "bench catalog: --files, --snapshots, --stats, --tables, --reps and --rounds must be positive")
		return 2
	}
	if *process && *pg == "" {
		fmt.Fprintln(stderr, "bench catalog: --process goes with --postgres")
		return 2
	}
	if *pg != "" {
		o := bench.CatalogVsPG{Postgres: *pg, Reps: *reps, Rounds: *rounds, JSONOut: *jsonOut, PNGOut: *pngOut, CPUProfile: *cpuprofile,
			Shape: bench.LakeShape{Tables: *tables, Files: *files, Stats: *stats, FilesPerCommit: max(1, (*files+*snaps-1) / *snaps)}}
		var err error
		if o.Process, err = processExe(*process); err != nil {
			fmt.Fprintln(stderr, "bench catalog:", err)
			return 1
		}
		if err := bench.RunCatalogVsPG(ctx, o, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "bench catalog:", err)
			return 1
		}
		return 0
	}
	if err := bench.RunCatalogLoad(ctx, stdout, *files, *snaps, *stats, *cpuprofile, *follow); err != nil {
		fmt.Fprintln(stderr, "bench catalog:", err)
		return 1
	}
	return 0
}
