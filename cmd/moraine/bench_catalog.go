package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/catalog/verbs"
	"github.com/moraine-db/moraine/internal/datum"
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
// reads on both (runCatalogVsPG), moraine's served in-process or, with
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
		o := catalogVsPG{postgres: *pg, reps: *reps, rounds: *rounds, jsonOut: *jsonOut, pngOut: *pngOut, cpuprofile: *cpuprofile,
			shape: bench.LakeShape{Tables: *tables, Files: *files, Stats: *stats, FilesPerCommit: max(1, (*files+*snaps-1) / *snaps)}}
		var err error
		if o.process, err = processExe(*process); err != nil {
			fmt.Fprintln(stderr, "bench catalog:", err)
			return 1
		}
		if err := runCatalogVsPG(ctx, o, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "bench catalog:", err)
			return 1
		}
		return 0
	}
	if err := runCatalogBench(ctx, *files, *snaps, *stats, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "bench catalog:", err)
		return 1
	}
	return 0
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func runCatalogBench(ctx context.Context, files, snaps, nstats int, cpuprofile string) error {
	start := time.Now()
	srv := catalog.NewServer(catalog.Options{})
	lake, err := verbs.Init(ctx, srv.Database("lake"), "public", "s3://bench/")
	if err != nil {
		return err
	}
	c := lake.Begin()
	cols := make([]verbs.Column, nstats)
	for i := range cols {
		cols[i] = verbs.Column{Name: fmt.Sprintf("c%d", i), Type: "int64"}
	}
	tid, colIDs := c.CreateTable(0, "main", "events", cols)
	if _, err := c.Commit(ctx); err != nil {
		return err
	}
	perSnap := (files + snaps - 1) / snaps
	done := 0
	for s := 0; s < snaps && done < files; s++ {
		c := lake.Begin()
		for i := 0; i < perSnap && done < files; i++ {
			st := make([]verbs.ColumnStats, nstats)
			for j := range st {
				st[j] = verbs.ColumnStats{ColumnID: colIDs[j], SizeBytes: 4096 + int64(j), ValueCount: 1000,
					NullCount: int64(done % 7), Min: fmt.Sprint(done * 10), Max: fmt.Sprint(done*10 + 999)}
			}
			c.AddDataFile(verbs.DataFile{TableID: tid, RecordCount: 1000, FileSize: 1 << 20, FooterSize: 4096,
				Path: fmt.Sprintf("ducklake-%08d-0196f1a2-7b3c-7d4e-8f90-%012d.parquet", done, done), Stats: st})
			done++
		}
		if _, err := c.Commit(ctx); err != nil {
			return err
		}
	}
	built := time.Since(start)
	fmt.Printf("built %d data files, %d stats rows, %d snapshots through the verbs in %.1fs wall, %.1fs CPU\n",
		done, done*nstats, lake.Snapshot()+1, built.Seconds(), cpuTime().Seconds())
	fmt.Printf("heap of the catalog as built by commits: %.1f MiB (%d bytes per data file)\n",
		float64(heapInUse())/(1<<20), int64(heapInUse())/int64(done))

	// The keyspace form, sorted as a store scan returns it, in one buffer.
	var buf []byte
	var offs [][4]int
	if err := srv.Pairs(func(k, v []byte) error {
		o := [4]int{len(buf), len(k), 0, len(v)}
		buf = append(buf, k...)
		o[2] = len(buf)
		buf = append(buf, v...)
		offs = append(offs, o)
		return nil
	}); err != nil {
		return err
	}
	key := func(i int) []byte { return buf[offs[i][0] : offs[i][0]+offs[i][1]] }
	sort.Slice(offs, func(i, j int) bool { return bytes.Compare(key(i), key(j)) < 0 })
	fmt.Printf("keyspace form: %d pairs, %.1f MiB\n", len(offs), float64(len(buf))/(1<<20))
	srv, lake = nil, nil
	base := heapInUse()

	it := &offsetIter{buf: buf, offs: offs}
	stopProfile, err := startProfiles(cpuprofile, "")
	if err != nil {
		return err
	}
	t0, c0 := time.Now(), cpuTime()
	re, err := catalog.Load(ctx, it, catalog.Options{})
	stopProfile()
	if err != nil {
		return err
	}
	load, loadCPU := time.Since(t0), cpuTime()-c0
	after := heapInUse()
	db, _ := re.Lookup("lake")
	df, err := db.Current().Table("public", "ducklake_data_file")
	if err != nil {
		return err
	}
	// A projected full read: decode every column of every row.
	t1, c1 := time.Now(), cpuTime()
	var vals []datum.Value
	n := 0
	df.Scan(func(_ catalog.CTID, r datum.Row) bool {
		vals, err = r.Decode(df.Types(), vals)
		n++
		return err == nil
	})
	if err != nil {
		return err
	}
	read, readCPU := time.Since(t1), cpuTime()-c1
	held := int64(after) - int64(base)
	fmt.Printf("load: %.2fs wall, %.2fs CPU on %d cores (%d pairs, %.0f pairs/s wall)\n",
		load.Seconds(), loadCPU.Seconds(), runtime.GOMAXPROCS(0), len(offs), float64(len(offs))/load.Seconds())
	fmt.Printf("heap in use by the reloaded catalog: %.1f MiB\n", float64(held)/(1<<20))
	fmt.Printf("full read of ducklake_data_file (every column decoded): %d rows in %.3fs wall, %.3fs CPU = %.2fM rows/s wall, %.2fM rows/CPU-s\n",
		n, read.Seconds(), readCPU.Seconds(), float64(n)/read.Seconds()/1e6, float64(n)/readCPU.Seconds()/1e6)
	fmt.Printf("bytes_per_file=%d\n", held/int64(done))
	runtime.KeepAlive(re)
	runtime.KeepAlive(buf)
	return nil
}

// cpuTime is the process's user+system CPU time; the benchmark machine is
// shared, so CPU time is reported beside wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type offsetIter struct {
	buf  []byte
	offs [][4]int
	i    int
}

func (o *offsetIter) Next() bool { o.i++; return o.i <= len(o.offs) }
func (o *offsetIter) Key() []byte {
	x := o.offs[o.i-1]
	return o.buf[x[0] : x[0]+x[1]]
}
func (o *offsetIter) Value() []byte {
	x := o.offs[o.i-1]
	return o.buf[x[2] : x[2]+x[3]]
}
func (o *offsetIter) Err() error { return nil }
