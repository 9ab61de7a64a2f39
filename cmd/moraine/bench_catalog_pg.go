package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/workload"
)

// catalogVsPG is the options of `moraine bench catalog --postgres …`.
type catalogVsPG struct {
	postgres        string
	shape           bench.LakeShape
	reps            int
	rounds          int // times every read is timed on both systems; the ratio is the rounds' median
	jsonOut, pngOut string
	cpuprofile      string // CPU profile of the process while both systems' reads are timed
	process         string // serve the reads from a child process of this executable; "" in-process
}

// runCatalogVsPG builds the same DuckLake catalog in an in-process moraine
// (through the verbs, each commit persisted through the commit pipeline on
// a local directory store) and in a fresh PostgreSQL database (DuckLake's
// DDL, then every table piped over binary COPY from moraine into COPY FROM
// STDIN, then VACUUM FREEZE ANALYZE so PostgreSQL's scans do not pay for
// hint bits), and times DuckLake's attach and first-query reads on both.
func runCatalogVsPG(ctx context.Context, o catalogVsPG, stdout, stderr io.Writer) error {
	m, err := bench.StartMoraine(ctx, bench.StoreSpec{Kind: "local"})
	if err != nil {
		return err
	}
	defer func() {
		if err := m.Stop(); err != nil {
			fmt.Fprintf(stderr, "bench catalog: stopping moraine: %v\n", err)
		}
	}()
	t0 := time.Now()
	if err := bench.BuildLake(ctx, m.Server.Stack().Cat.Database("lake"), o.shape, stderr); err != nil {
		return err
	}
	build := time.Since(t0)
	fmt.Fprintf(stdout, "moraine: built %d tables, %d data files, %d stats rows through the verbs on a local directory store in %.1fs\n",
		o.shape.Tables, o.shape.Files, o.shape.Files*o.shape.Stats, build.Seconds())
	if o.process != "" {
		t := time.Now()
		if err := m.ServeFromProcess(ctx, o.process); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "moraine: serving that store from a child `moraine serve` process (stopped, restarted and loaded in %.1fs)\n", time.Since(t).Seconds())
	}

	dial, drop, err := workload.FreshDatabase(ctx, o.postgres, "moraine_bench_catalog")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() { _ = drop(context.Background()) }()
	pg, err := dial(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer pg.Close(context.Background())
	if err := workload.Init(ctx, pg, "public", "s3://bench/"); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	mo, err := pgconn.Connect(ctx, m.ConnInfo("lake"))
	if err != nil {
		return fmt.Errorf("moraine: %w", err)
	}
	defer mo.Close(context.Background())
	t1 := time.Now()
	copied, err := bench.CopyLake(ctx, mo, pg)
	if err != nil {
		return err
	}
	if _, err := pg.Exec(ctx, "VACUUM (FREEZE, ANALYZE)").ReadAll(); err != nil {
		return fmt.Errorf("postgres: vacuum: %w", err)
	}
	load := time.Since(t1)
	fmt.Fprintf(stdout, "postgres: loaded the same %d rows by binary COPY FROM STDIN (piped from moraine) + VACUUM FREEZE ANALYZE in %.1fs\n",
		copied, load.Seconds())

	stopProfile, err := startProfiles(o.cpuprofile, "")
	if err != nil {
		return err
	}
	// Settle the process's heap first, as VACUUM settled PostgreSQL's
	// tables: piping the catalog out to PostgreSQL and reading it back left
	// gigabytes of garbage in this process (driver and server share it),
	// and a collection of a heap that size running under the reads timed
	// is the load's cost, not theirs.
	runtime.GC()
	var rounds []*bench.CatalogReport
	for round := 0; round < o.rounds; round++ {
		// The systems take turns at going first, read by read.
		pgT, moT, err := bench.TimeReadsPaired(ctx, pg, mo, bench.Reads, o.reps, round%2 == 1)
		if err != nil {
			stopProfile()
			return err
		}
		rep, err := bench.NewCatalogReport(bench.Machine(), o.shape, o.reps, pgT, moT)
		if err != nil {
			stopProfile()
			return err
		}
		if o.rounds > 1 {
			fmt.Fprintf(stderr, "round %d: ratio %.3f\n", round+1, rep.RatioVsPG)
		}
		rounds = append(rounds, rep)
	}
	stopProfile()
	rep := bench.MedianRound(rounds)
	rep.BuildSec, rep.CopySec, rep.CopiedRows = build.Seconds(), load.Seconds(), copied
	if o.jsonOut != "" {
		if err := bench.WriteJSON(o.jsonOut, rep); err != nil {
			return err
		}
	}
	if o.pngOut != "" {
		bars := make([]bench.Bar, len(rep.Rows))
		for i, r := range rep.Rows {
			bars[i] = bench.Bar{Postgres: r.Postgres.MS, Moraine: r.Moraine.MS}
		}
		if err := bench.WriteFile(o.pngOut, func(w io.Writer) error { return bench.WriteBarsPNG(w, bars) }); err != nil {
			return err
		}
	}
	return rep.WriteTable(stdout)
}
