package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
)

// benchStore is `moraine bench store`: concurrent writers, each writing
// batches of --batch-keys keys and waiting for durability, against a store
// whose PUTs take --put-latency. It prints a table and ends with the line
// "batches/s=<n>". With --postgres it instead times DuckLake commits on an
// in-process moraine over S3 with that PUT latency against PostgreSQL
// (bench.RunStoreVsPG) and ends with "ratio_vs_postgres=<x>".

func benchStoreMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench store [flags]", stdout, stderr)
	writers := fs.Int("writers", 64, "concurrent writers")
	putLatency := fs.String("put-latency", "50ms", `latency added to every PUT: a duration or "lo-hi"`)
	getLatency := fs.String("get-latency", "0", `latency added to every GET/LIST`)
	batchKeys := fs.Int("batch-keys", 20, "keys per batch")
	valueSize := fs.Int("value-size", 64, "bytes per value")
	duration := fs.Duration("duration", 10*time.Second, "how long to write")
	storeURL := fs.String("store", "mem://", "object store URL (mem://, file:///dir, s3://…)")
	pg := fs.String("postgres", "", "PostgreSQL conninfo: compare DuckLake commit latency on moraine over in-process S3 against it")
	pgWriters := fs.String("commit-writers", "1,16", "with --postgres: DuckLake committer counts")
	pgCommits := fs.Int("commits", 30, "with --postgres: commits per committer")
	jsonOut := fs.String("json", "", "with --postgres: write the results as JSON to this file")
	pngOut := fs.String("png", "", "with --postgres: write a bar chart of p50 latency to this PNG file")
	process := fs.Bool("process", false, "with --postgres: run moraine as a child `moraine serve` process, as deployed, instead of in-process")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *process && *pg == "" {
		fmt.Fprintln(stderr, "bench store: --process goes with --postgres")
		return 2
	}
	if *pg != "" {
		lat, err := fault.ParseLatency(*putLatency)
		if err != nil {
			fmt.Fprintf(stderr, "bench store: --put-latency: %v\n", err)
			return 2
		}
		ws, err := parseCounts(*pgWriters)
		if err != nil || *pgCommits < 1 {
			fmt.Fprintf(stderr, "bench store: --commit-writers/--commits: %v\n", err)
			return 2
		}
		o := bench.StoreVsPG{Postgres: *pg, PutLatency: lat, Writers: ws, Commits: *pgCommits, JSONOut: *jsonOut, PNGOut: *pngOut}
		if o.Process, err = processExe(*process); err != nil {
			fmt.Fprintln(stderr, "bench store:", err)
			return 1
		}
		if err := bench.RunStoreVsPG(ctx, o, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "bench store: %v\n", err)
			return 1
		}
		return 0
	}
	if *writers < 1 || *batchKeys < 1 || *valueSize < 0 || *duration <= 0 {
		fmt.Fprintln(stderr, "bench store: --writers, --batch-keys and --duration must be positive")
		return 2
	}
	putLat, err := fault.ParseLatency(*putLatency)
	if err != nil {
		fmt.Fprintf(stderr, "bench store: --put-latency: %v\n", err)
		return 2
	}
	getLat, err := fault.ParseLatency(*getLatency)
	if err != nil {
		fmt.Fprintf(stderr, "bench store: --get-latency: %v\n", err)
		return 2
	}
	inner, err := objurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintf(stderr, "bench store: %v\n", err)
		return 1
	}
	defer inner.Close()
	read := fault.Rule{Latency: getLat}
	write := fault.Rule{Latency: putLat}
	store := fault.New(inner, fault.Config{Ops: map[fault.Op]fault.Rule{
		fault.OpPut: write, fault.OpPutIfAbsent: write,
		fault.OpGet: read, fault.OpGetRange: read, fault.OpList: read, fault.OpStat: read,
	}})

	res, err := bench.RunStore(ctx, store, *writers, *batchKeys, *valueSize, *duration)
	if err != nil {
		fmt.Fprintf(stderr, "bench store: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("store", *storeURL)
	row("writers", *writers)
	row("batch keys", *batchKeys)
	row("value size", *valueSize)
	row("put latency", putLat)
	row("elapsed", res.Elapsed.Round(time.Millisecond))
	row("batches", res.Batches)
	row("keys", res.Batches*uint64(*batchKeys))
	row("keys/s", fmt.Sprintf("%.0f", float64(res.Batches*uint64(*batchKeys))/res.Elapsed.Seconds()))
	row("write latency p50", res.P50.Round(time.Microsecond))
	row("write latency p99", res.P99.Round(time.Microsecond))
	row("write latency max", res.Max.Round(time.Microsecond))
	row("WAL objects", res.Stats.WALObjects)
	row("batches per WAL object", fmt.Sprintf("%.1f", float64(res.Stats.Batches)/max(1, float64(res.Stats.WALObjects))))
	row("WAL bytes", res.Stats.WALBytes)
	row("flushes", res.Stats.Flushes)
	row("compactions", res.Stats.Compactions)
	row("manifest writes", res.Stats.ManifestWrites)
	tw.Flush()
	fmt.Fprintf(stdout, "batches/s=%.0f\n", float64(res.Batches)/res.Elapsed.Seconds())
	return 0
}
