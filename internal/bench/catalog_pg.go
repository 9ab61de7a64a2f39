package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/workload"
)

// CatalogVsPG is the options of `moraine bench catalog --postgres …`.
type CatalogVsPG struct {
	Postgres        string
	Shape           LakeShape
	Reps            int
	Rounds          int // times every read is timed on both systems; the ratio is the rounds' median
	JSONOut, PNGOut string
	CPUProfile      string // CPU profile of the process while both systems' reads are timed
	Process         string // serve the reads from a child process of this executable; "" in-process
}

// RunCatalogVsPG builds the same DuckLake catalog in an in-process moraine
// (through the verbs, each commit persisted through the commit pipeline on
// a local directory store) and in a fresh PostgreSQL database (DuckLake's
// DDL, then every table piped over binary COPY from moraine into COPY FROM
// STDIN, then VACUUM FREEZE ANALYZE so PostgreSQL's scans do not pay for
// hint bits), and times DuckLake's attach and first-query reads on both.
func RunCatalogVsPG(ctx context.Context, o CatalogVsPG, stdout, stderr io.Writer) error {
	m, err := StartMoraine(ctx, StoreSpec{Kind: "local"})
	if err != nil {
		return err
	}
	defer func() {
		if err := m.Stop(); err != nil {
			fmt.Fprintf(stderr, "bench catalog: stopping moraine: %v\n", err)
		}
	}()
	t0 := time.Now()
	if err := BuildLake(ctx, m.Server.Stack().Cat.Database("lake"), o.Shape, stderr); err != nil {
		return err
	}
	build := time.Since(t0)
	fmt.Fprintf(stdout, "moraine: built %d tables, %d data files, %d stats rows through the verbs on a local directory store in %.1fs\n",
		o.Shape.Tables, o.Shape.Files, o.Shape.Files*o.Shape.Stats, build.Seconds())
	if o.Process != "" {
		t := time.Now()
		if err := m.ServeFromProcess(ctx, o.Process); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "moraine: serving that store from a child `moraine serve` process (stopped, restarted and loaded in %.1fs)\n", time.Since(t).Seconds())
	}

	dial, drop, err := workload.FreshDatabase(ctx, o.Postgres, "moraine_bench_catalog")
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
	copied, err := CopyLake(ctx, mo, pg)
	if err != nil {
		return err
	}
	if _, err := pg.Exec(ctx, "VACUUM (FREEZE, ANALYZE)").ReadAll(); err != nil {
		return fmt.Errorf("postgres: vacuum: %w", err)
	}
	load := time.Since(t1)
	fmt.Fprintf(stdout, "postgres: loaded the same %d rows by binary COPY FROM STDIN (piped from moraine) + VACUUM FREEZE ANALYZE in %.1fs\n",
		copied, load.Seconds())

	stopProfile, err := StartProfiles(o.CPUProfile, "")
	if err != nil {
		return err
	}
	// Settle the process's heap first, as VACUUM settled PostgreSQL's
	// tables: piping the catalog out to PostgreSQL and reading it back left
	// gigabytes of garbage in this process (driver and server share it),
	// and a collection of a heap that size running under the reads timed
	// is the load's cost, not theirs.
	runtime.GC()
	var rounds []*CatalogReport
	for round := 0; round < o.Rounds; round++ {
		// The systems take turns at going first, read by read.
		pgT, moT, err := TimeReadsPaired(ctx, pg, mo, Reads, o.Reps, round%2 == 1)
		if err != nil {
			stopProfile()
			return err
		}
		rep, err := NewCatalogReport(Machine(), o.Shape, o.Reps, pgT, moT)
		if err != nil {
			stopProfile()
			return err
		}
		if o.Rounds > 1 {
			fmt.Fprintf(stderr, "round %d: ratio %.3f\n", round+1, rep.RatioVsPG)
		}
		rounds = append(rounds, rep)
	}
	stopProfile()
	rep := MedianRound(rounds)
	rep.BuildSec, rep.CopySec, rep.CopiedRows = build.Seconds(), load.Seconds(), copied
	if o.JSONOut != "" {
		if err := WriteJSON(o.JSONOut, rep); err != nil {
			return err
		}
	}
	if o.PNGOut != "" {
		bars := make([]Bar, len(rep.Rows))
		for i, r := range rep.Rows {
			bars[i] = Bar{Postgres: r.Postgres.MS, Moraine: r.Moraine.MS}
		}
		if err := WriteFile(o.PNGOut, func(w io.Writer) error { return WriteBarsPNG(w, bars) }); err != nil {
			return err
		}
	}
	return rep.WriteTable(stdout)
}
