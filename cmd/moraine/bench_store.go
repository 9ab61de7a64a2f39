package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
	"github.com/moraine-db/moraine/internal/slate"
)

// benchStore is `moraine bench store`: concurrent writers, each writing
// batches of --batch-keys keys and waiting for durability, against a store
// whose PUTs take --put-latency. It prints a table and ends with the line
// "batches/s=<n>". With --postgres it instead times DuckLake commits on an
// in-process moraine over S3 with that PUT latency against PostgreSQL
// (runStoreVsPG) and ends with "ratio_vs_postgres=<x>".

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
		ws, err := parseWriterList(*pgWriters)
		if err != nil || *pgCommits < 1 {
			fmt.Fprintf(stderr, "bench store: --commit-writers/--commits: %v\n", err)
			return 2
		}
		o := storeVsPG{postgres: *pg, putLatency: lat, writers: ws, commits: *pgCommits, jsonOut: *jsonOut, pngOut: *pngOut}
		if o.process, err = processExe(*process); err != nil {
			fmt.Fprintln(stderr, "bench store:", err)
			return 1
		}
		if err := runStoreVsPG(ctx, o, stdout, stderr); err != nil {
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

	res, err := runStoreBench(ctx, store, *writers, *batchKeys, *valueSize, *duration)
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
	row("elapsed", res.elapsed.Round(time.Millisecond))
	row("batches", res.batches)
	row("keys", res.batches*uint64(*batchKeys))
	row("keys/s", fmt.Sprintf("%.0f", float64(res.batches*uint64(*batchKeys))/res.elapsed.Seconds()))
	row("write latency p50", res.p50.Round(time.Microsecond))
	row("write latency p99", res.p99.Round(time.Microsecond))
	row("write latency max", res.max.Round(time.Microsecond))
	row("WAL objects", res.stats.WALObjects)
	row("batches per WAL object", fmt.Sprintf("%.1f", float64(res.stats.Batches)/max(1, float64(res.stats.WALObjects))))
	row("WAL bytes", res.stats.WALBytes)
	row("flushes", res.stats.Flushes)
	row("compactions", res.stats.Compactions)
	row("manifest writes", res.stats.ManifestWrites)
	tw.Flush()
	fmt.Fprintf(stdout, "batches/s=%.0f\n", float64(res.batches)/res.elapsed.Seconds())
	return 0
}

type storeBenchResult struct {
	batches       uint64
	elapsed       time.Duration
	p50, p99, max time.Duration
	stats         slate.Stats
}

func runStoreBench(ctx context.Context, store objstore.Store, writers, batchKeys, valueSize int, d time.Duration) (storeBenchResult, error) {
	db, err := slate.Open(ctx, store, slate.Options{})
	if err != nil {
		return storeBenchResult{}, err
	}
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lat := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := make([]byte, 0, 32)
			for i := 0; runCtx.Err() == nil; i++ {
				b := slate.NewBatch()
				for k := 0; k < batchKeys; k++ {
					key = fmt.Appendf(key[:0], "w%04d/%010d/%04d", w, i, k)
					b.Put(key, value)
				}
				t0 := time.Now()
				// The write itself is not bound to the run's deadline: a
				// batch in flight when time is up still counts once durable.
				if _, err := db.Write(ctx, b); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := db.Stats()
	closeErr := db.Close(ctx)
	for _, err := range errs {
		if err != nil {
			return storeBenchResult{}, fmt.Errorf("write: %w", err)
		}
	}
	if closeErr != nil {
		return storeBenchResult{}, fmt.Errorf("close: %w", closeErr)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	res := storeBenchResult{batches: uint64(len(all)), elapsed: elapsed, stats: st}
	if len(all) > 0 {
		res.p50 = all[len(all)/2]
		res.p99 = all[len(all)*99/100]
		res.max = all[len(all)-1]
	}
	return res, nil
}
