package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/catalog/verbs"
	"github.com/moraine-db/moraine/internal/datum"
)

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// RunCatalogLoad is `moraine bench catalog` without --postgres: it builds a
// catalog of files data files (nstats column-stats rows each) over snaps
// snapshots through the verbs, turns it into its keyspace pairs, reloads it
// with catalog.Load, and prints the load time, the heap the reloaded
// catalog holds, bytes per data file and the rate of a full decoding read
// of ducklake_data_file; the last line is bytes_per_file=<n>. With follow
// the reload is a replica's (catalog.Options.Follow).
func RunCatalogLoad(ctx context.Context, w io.Writer, files, snaps, nstats int, cpuprofile string, follow bool) error {
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
	fmt.Fprintf(w, "built %d data files, %d stats rows, %d snapshots through the verbs in %.1fs wall, %.1fs CPU\n",
		done, done*nstats, lake.Snapshot()+1, built.Seconds(), cpuTime().Seconds())
	fmt.Fprintf(w, "heap of the catalog as built by commits: %.1f MiB (%d bytes per data file)\n",
		float64(heapInUse())/(1<<20), int64(heapInUse())/int64(done))

	// A branch of it: one record in the store, and the parent's version
	// shared in memory.
	heapBefore := heapInUse()
	forkStart := time.Now()
	if _, err := srv.ForkDatabase(ctx, "dev", "lake", catalog.ForkOptions{}); err != nil {
		return err
	}
	forkTime := time.Since(forkStart)
	fmt.Fprintf(w, "fork of the %d-file catalog: %s, %+d bytes resident\n", done, forkTime.Round(time.Microsecond), int64(heapInUse())-int64(heapBefore))

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
	fmt.Fprintf(w, "keyspace form: %d pairs, %.1f MiB\n", len(offs), float64(len(buf))/(1<<20))
	srv, lake = nil, nil
	base := heapInUse()

	it := &offsetIter{buf: buf, offs: offs}
	stopProfile, err := StartProfiles(cpuprofile, "")
	if err != nil {
		return err
	}
	t0, c0 := time.Now(), cpuTime()
	re, err := catalog.Load(ctx, it, catalog.Options{Follow: follow})
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
	fmt.Fprintf(w, "load: %.2fs wall, %.2fs CPU on %d cores (%d pairs, %.0f pairs/s wall)\n",
		load.Seconds(), loadCPU.Seconds(), runtime.GOMAXPROCS(0), len(offs), float64(len(offs))/load.Seconds())
	fmt.Fprintf(w, "heap in use by the reloaded catalog: %.1f MiB\n", float64(held)/(1<<20))
	fmt.Fprintf(w, "full read of ducklake_data_file (every column decoded): %d rows in %.3fs wall, %.3fs CPU = %.2fM rows/s wall, %.2fM rows/CPU-s\n",
		n, read.Seconds(), readCPU.Seconds(), float64(n)/read.Seconds()/1e6, float64(n)/readCPU.Seconds()/1e6)
	fmt.Fprintf(w, "bytes_per_file=%d\n", held/int64(done))
	runtime.KeepAlive(re)
	runtime.KeepAlive(buf)
	return nil
}

// cpuTime is the process's user+system CPU time; the benchmark machine is
// shared, so CPU time is reported beside wall time.
func cpuTime() time.Duration {
	d, _ := rusageCPU(unix.RUSAGE_SELF)
	return d
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
