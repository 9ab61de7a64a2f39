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

	pgCfg, drop, err := workload.FreshDatabaseConfig(ctx, o.Postgres, "moraine_bench_catalog")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() { _ = drop(context.Background()) }()
	pg, err := pgconn.ConnectConfig(ctx, pgCfg.Copy())
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
	// The fork of this catalog on each: PostgreSQL's CREATE DATABASE …
	// TEMPLATE copies the database; moraine's branches it (one record).
	pg.Close(context.Background())
	if err := timeForks(ctx, m, o.Postgres, pgCfg.Database, stdout); err != nil {
		return err
	}
	if err := timeMerge(ctx, m, stdout); err != nil {
		return err
	}
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

// timeForks times CREATE DATABASE … TEMPLATE of the lake on moraine (a
// branch; its added resident heap when moraine runs in-process) and of the
// PostgreSQL database pgDB holding the same catalog (a copy; its size), and
// drops both forks.
func timeForks(ctx context.Context, m *Moraine, pgAdmin, pgDB string, w io.Writer) error {
	run := func(conninfo, sql string) (time.Duration, error) {
		c, err := pgconn.Connect(ctx, conninfo)
		if err != nil {
			return 0, err
		}
		defer c.Close(context.Background())
		t := time.Now()
		_, err = c.Exec(ctx, sql).ReadAll()
		return time.Since(t), err
	}
	var heapBefore uint64
	if m.Server != nil {
		heapBefore = heapInUse()
	}
	mt, err := run(m.ConnInfo("postgres"), "CREATE DATABASE bench_fork TEMPLATE lake")
	if err != nil {
		return fmt.Errorf("moraine: fork: %w", err)
	}
	added := "in a child process"
	if m.Server != nil {
		added = fmt.Sprintf("%+d bytes resident", int64(heapInUse())-int64(heapBefore))
	}
	if _, err := run(m.ConnInfo("postgres"), "DROP DATABASE bench_fork"); err != nil {
		return fmt.Errorf("moraine: drop the fork: %w", err)
	}
	pt, err := run(pgAdmin, "CREATE DATABASE bench_fork TEMPLATE "+quoteIdent(pgDB))
	if err != nil {
		return fmt.Errorf("postgres: fork: %w", err)
	}
	c, err := pgconn.Connect(ctx, pgAdmin)
	if err != nil {
		return err
	}
	res, err := c.Exec(ctx, "SELECT pg_size_pretty(pg_database_size('bench_fork'))").ReadAll()
	c.Close(context.Background())
	size := "?"
	if err == nil && len(res) == 1 && len(res[0].Rows) == 1 {
		size = string(res[0].Rows[0][0])
	}
	if _, err := run(pgAdmin, "DROP DATABASE bench_fork"); err != nil {
		return fmt.Errorf("postgres: drop the fork: %w", err)
	}
	fmt.Fprintf(w, "fork (CREATE DATABASE … TEMPLATE): moraine %s (a branch, %s), PostgreSQL %s (a copy of %s): %.0f×\n",
		mt.Round(time.Microsecond), added, pt.Round(time.Millisecond), size, float64(pt)/float64(mt))
	return nil
}

// timeMerge forks the lake into a writable branch, commits ten one-file
// inserts on it (DuckLake's statements for them) and times ALTER DATABASE
// … MERGE_INTO back into the lake (docs/branches.md, "Merging").
func timeMerge(ctx context.Context, m *Moraine, w io.Writer) error {
	c, err := pgconn.Connect(ctx, m.ConnInfo("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE bench_merge TEMPLATE lake LOCATION 's3://bench-merge/'").ReadAll(); err != nil {
		return fmt.Errorf("moraine: writable fork: %w", err)
	}
	b, err := pgconn.Connect(ctx, m.ConnInfo("bench_merge"))
	if err != nil {
		return err
	}
	const commits = 10
	for i := 0; i < commits; i++ {
		res, err := b.Exec(ctx, "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM ducklake_snapshot); SELECT min(table_id) FROM ducklake_table").ReadAll()
		if err != nil || len(res) != 2 || len(res[0].Rows) != 1 || len(res[1].Rows) != 1 {
			b.Close(context.Background())
			return fmt.Errorf("moraine: the branch's head: %v", err)
		}
		r, tid := res[0].Rows[0], string(res[1].Rows[0][0])
		var snap, nextFile int64
		fmt.Sscan(string(r[0]), &snap)
		fmt.Sscan(string(r[3]), &nextFile)
		sql := fmt.Sprintf("BEGIN; INSERT INTO ducklake_snapshot VALUES (%d, NOW(), %s, %s, %d); "+
			"INSERT INTO ducklake_data_file VALUES (%d, %s, %d, NULL, NULL, 'merge-%d.parquet', true, 'parquet', 10, 1000, 100, NULL, NULL, NULL, NULL, NULL, 1); "+
			"INSERT INTO ducklake_snapshot_changes VALUES (%d, 'inserted_into_table:%s', NULL, NULL, NULL); COMMIT",
			snap+1, r[1], r[2], nextFile+1, nextFile, tid, snap+1, nextFile, snap+1, tid)
		if _, err := b.Exec(ctx, sql).ReadAll(); err != nil {
			b.Close(context.Background())
			return fmt.Errorf("moraine: commit on the branch: %w", err)
		}
	}
	b.Close(context.Background())
	t := time.Now()
	if _, err := c.Exec(ctx, "ALTER DATABASE bench_merge MERGE_INTO lake").ReadAll(); err != nil {
		return fmt.Errorf("moraine: merge: %w", err)
	}
	fmt.Fprintf(w, "merge (ALTER DATABASE … MERGE_INTO) of a writable branch's %d one-file commits into the lake: %s\n", commits, time.Since(t).Round(time.Microsecond))
	return nil
}
