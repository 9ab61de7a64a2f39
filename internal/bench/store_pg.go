package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/workload"
)

// StoreVsPG is `moraine bench store --postgres …`: the durable latency of a
// DuckLake commit (the full commit batch DuckLake sends, acknowledged only
// once durable) on moraine over an S3-protocol store whose PUTs take
// putLatency, beside the same commit on PostgreSQL. PostgreSQL cannot keep
// its catalog on S3, so its figure is its local-disk commit latency (WAL
// fsync on this machine): the comparison is "what the object-store catalog
// costs against a local PostgreSQL", not a like-for-like store.
type StoreVsPG struct {
	Postgres   string
	PutLatency fault.Latency
	Writers    []int
	Commits    int
	JSONOut    string
	PNGOut     string
	Process    string // run moraine as a child process of this executable; "" in-process
}

// storeRow is one measured (system, writers) pair.
type storeRow struct {
	System        string  `json:"system"`
	Store         string  `json:"store"`
	Writers       int     `json:"writers"`
	Commits       int     `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
}

type storeReport struct {
	Benchmark    string     `json:"benchmark"`
	Machine      string     `json:"machine"`
	PutLatencyMS float64    `json:"put_latency_ms"`
	Runs         []storeRow `json:"runs"`
	// RatioVsPG is PostgreSQL's p50 commit latency over moraine's at the
	// lowest writer count (> 1: moraine commits faster).
	RatioVsPG float64 `json:"ratio_vs_postgres"`
	Note      string  `json:"note"`
}

// RunStoreVsPG runs StoreVsPG, printing a table that ends with
// ratio_vs_postgres=<x>.
func RunStoreVsPG(ctx context.Context, o StoreVsPG, stdout, stderr io.Writer) error {
	m, err := StartMoraine(ctx, StoreSpec{Kind: "s3", PutLatency: o.PutLatency, Process: o.Process})
	if err != nil {
		return err
	}
	defer func() {
		if err := m.Stop(); err != nil {
			fmt.Fprintf(stderr, "bench store: stopping moraine: %v\n", err)
		}
	}()
	wrep, err := RunCommits(ctx, CommitsConfig{
		Targets:  []Target{{Name: "postgres", ConnInfo: o.Postgres}, {Name: "moraine", ConnInfo: m.ConnInfo("postgres")}},
		Writers:  o.Writers,
		Commits:  o.Commits,
		Verify:   true,
		Progress: stderr,
		Base:     workload.Config{Tables: 4, RetryWait: 5 * time.Millisecond, Seed: uint64(time.Now().UnixNano())},
	})
	if err != nil {
		return err
	}
	rep := storeReport{Benchmark: "store", Machine: Machine(), PutLatencyMS: float64(o.PutLatency.Min) / 1e6,
		Note: "moraine: in-process S3 (gofakes3) with injected PUT latency; postgres: local disk (PostgreSQL has no S3 catalog)"}
	if o.Process != "" {
		rep.Note = "moraine: a child `moraine serve` process over in-process S3 (gofakes3) with injected PUT latency; postgres: local disk (PostgreSQL has no S3 catalog)"
	}
	lo := o.Writers[0]
	for _, w := range o.Writers {
		lo = min(lo, w)
	}
	var pgP50, moP50 float64
	for _, r := range wrep.Runs {
		store := "local disk (fsync)"
		if r.System == "moraine" {
			store = m.StoreDesc
		}
		rep.Runs = append(rep.Runs, storeRow{System: r.System, Store: store, Writers: r.Writers, Commits: r.Commits,
			CommitsPerSec: r.CommitsPerSec, P50MS: r.P50MS, P99MS: r.P99MS})
		if r.Writers == lo {
			if r.System == "postgres" {
				pgP50 = r.P50MS
			} else {
				moP50 = r.P50MS
			}
		}
	}
	if moP50 <= 0 || pgP50 <= 0 {
		return fmt.Errorf("no p50 for both systems at %d writers", lo)
	}
	rep.RatioVsPG = pgP50 / moP50
	if o.JSONOut != "" {
		if err := WriteJSON(o.JSONOut, rep); err != nil {
			return err
		}
	}
	if o.PNGOut != "" {
		var bars []Bar
		for _, w := range o.Writers {
			var b Bar
			for _, r := range rep.Runs {
				if r.Writers == w && r.System == "postgres" {
					b.Postgres = r.P50MS
				} else if r.Writers == w {
					b.Moraine = r.P50MS
				}
			}
			bars = append(bars, b)
		}
		if err := WriteFile(o.PNGOut, func(w io.Writer) error { return WriteBarsPNG(w, bars) }); err != nil {
			return err
		}
	}
	tw := newTab(stdout)
	fmt.Fprintln(tw, "system\tstore\twriters\tcommits\tcommits/s\tp50 ms\tp99 ms\t")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.2f\t%.2f\t\n", r.System, r.Store, r.Writers, r.Commits, r.CommitsPerSec, r.P50MS, r.P99MS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "note:", rep.Note)
	fmt.Fprintf(stdout, "ratio is postgres p50 / moraine p50 at %d writer(s) (> 1: moraine commits faster)\n", lo)
	_, err = fmt.Fprintf(stdout, "ratio_vs_postgres=%.3f\n", rep.RatioVsPG)
	return err
}
