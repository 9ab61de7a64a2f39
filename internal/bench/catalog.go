package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/catalog/verbs"
	"github.com/moraine-db/moraine/internal/workload"
)

// LakeShape is the size of the catalog `bench catalog` builds.
type LakeShape struct {
	Tables         int // user tables
	Files          int // data files; each commit registers its files in one table, round-robin over the tables
	Stats          int // columns per table = ducklake_file_column_stats rows per file
	FilesPerCommit int // data files registered per snapshot
}

// BuildLake creates a DuckLake catalog of the given shape in db through the
// catalog verbs (the same rows DuckLake's own inserts write). On a served
// stack every commit goes through the commit pipeline and is durable when
// BuildLake returns. progress, when set, gets a line now and then.
func BuildLake(ctx context.Context, db *catalog.Database, shape LakeShape, progress io.Writer) error {
	if shape.Tables < 1 || shape.Files < 0 || shape.Stats < 1 || shape.FilesPerCommit < 1 {
		return errors.New("build lake: tables, stats and files per commit must be positive")
	}
	lake, err := verbs.Init(ctx, db, "public", "s3://bench/")
	if err != nil {
		return fmt.Errorf("build lake: %w", err)
	}
	cols := make([]verbs.Column, shape.Stats)
	for i := range cols {
		cols[i] = verbs.Column{Name: fmt.Sprintf("c%d", i), Type: "int64"}
	}
	type tbl struct {
		id   int64
		cols []int64
	}
	tables := make([]tbl, 0, shape.Tables)
	// Tables are created in batches of 1000 per snapshot, as a bulk DDL
	// script would.
	for len(tables) < shape.Tables {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := lake.Begin()
		for i := 0; i < 1000 && len(tables) < shape.Tables; i++ {
			id, colIDs := c.CreateTable(0, "main", fmt.Sprintf("t%06d", len(tables)), cols)
			tables = append(tables, tbl{id, colIDs})
		}
		if _, err := c.Commit(ctx); err != nil {
			return fmt.Errorf("build lake: create tables: %w", err)
		}
	}
	start := time.Now()
	// Each commit is one INSERT into one table, as DuckLake commits an
	// insert: its files all belong to that table.
	for done, commit := 0, 0; done < shape.Files; commit++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := lake.Begin()
		t := tables[commit%len(tables)]
		for i := 0; i < shape.FilesPerCommit && done < shape.Files; i++ {
			st := make([]verbs.ColumnStats, shape.Stats)
			for j := range st {
				st[j] = verbs.ColumnStats{ColumnID: t.cols[j], SizeBytes: 4096 + int64(j), ValueCount: 1000,
					NullCount: int64(done % 7), Min: fmt.Sprint(done * 10), Max: fmt.Sprint(done*10 + 999)}
			}
			c.AddDataFile(verbs.DataFile{TableID: t.id, RecordCount: 1000, FileSize: 1 << 20, FooterSize: 4096,
				Path: fmt.Sprintf("ducklake-%08d-0196f1a2-7b3c-7d4e-8f90-%012d.parquet", done, done), Stats: st})
			done++
		}
		if _, err := c.Commit(ctx); err != nil {
			return fmt.Errorf("build lake: add files: %w", err)
		}
		if progress != nil && done%100000 < shape.FilesPerCommit {
			fmt.Fprintf(progress, "moraine: %d/%d data files registered (%.0fs)\n", done, shape.Files, time.Since(start).Seconds())
		}
	}
	return nil
}

// CopyLake copies every ducklake_* table of schema "public" from src to dst
// as binary COPY: `COPY (SELECT <cols> FROM t) TO STDOUT (FORMAT "binary")`
// on src piped into `COPY t (<cols>) FROM STDIN (FORMAT BINARY)` on dst, after
// emptying the table on dst. The column lists come from dst's
// information_schema, so both sides agree on order and types. It returns
// the rows copied. The tables to copy are those dst has.
func CopyLake(ctx context.Context, src, dst *pgconn.PgConn) (int64, error) {
	res, err := dst.Exec(ctx, `SELECT table_name, string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'ducklake%'
		GROUP BY table_name ORDER BY table_name`).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("copy lake: list columns: %w", err)
	}
	var total int64
	for _, r := range res[0].Rows {
		table, cols := string(r[0]), string(r[1])
		q := `"public".` + quoteIdent(table)
		if _, err := dst.Exec(ctx, "TRUNCATE "+q).ReadAll(); err != nil {
			return total, fmt.Errorf("copy lake: %s: %w", table, err)
		}
		pr, pw := io.Pipe()
		outErr := make(chan error, 1)
		go func() {
			_, err := src.CopyTo(ctx, pw, "COPY (SELECT "+cols+" FROM "+q+` ) TO STDOUT (FORMAT "binary")`)
			pw.CloseWithError(err)
			outErr <- err
		}()
		tag, err := dst.CopyFrom(ctx, pr, "COPY "+q+" ("+cols+") FROM STDIN (FORMAT BINARY)")
		pr.CloseWithError(err)
		if oerr := <-outErr; oerr != nil {
			return total, fmt.Errorf("copy lake: read %s from moraine: %w", table, oerr)
		}
		if err != nil {
			return total, fmt.Errorf("copy lake: write %s: %w", table, err)
		}
		total += tag.RowsAffected()
	}
	return total, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Read is one statement DuckLake sends when it attaches a catalog or runs a
// first query against it.
type Read struct {
	Name  string // short label
	Phase string // "attach" or "first query"
	SQL   string // a COPY … TO STDOUT (FORMAT "binary")
	// Describe, when set, is first prepared as the unnamed statement the
	// way DuckDB does it (workload.Describe: Parse+Sync, Describe+Sync).
	Describe string
}

const latestSnapshotInner = "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id\n\t\t FROM \"public\".ducklake_snapshot WHERE snapshot_id = (\n\t\t     SELECT MAX(snapshot_id) FROM \"public\".ducklake_snapshot\n\t\t )"

func scan(table string, cols ...string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteIdent(c)
	}
	return "COPY (SELECT " + strings.Join(q, ", ") + ` FROM "public".` + quoteIdent(table) + ` ) TO STDOUT (FORMAT "binary")`
}

// Reads are the statements, verbatim in shape, of testdata/shapes/inventory.md's
// "Catalog reads" group that DuckLake sends on attach (latest snapshot, then
// the catalog load of §29–§53) and on a first query of a table (the
// whole-table reads of ducklake_data_file and ducklake_file_column_stats;
// filter pushdown is off on DuckLake's metadata connection, so these are
// full scans).
var Reads = []Read{
	{Name: "latest snapshot", Phase: "attach", Describe: latestSnapshotInner,
		SQL: `COPY (SELECT "snapshot_id", "schema_version", "next_catalog_id", "next_file_id" FROM (` + latestSnapshotInner + `) AS __unnamed_subquery ) TO STDOUT (FORMAT "binary")`},
	{Name: "inlined_data_tables", Phase: "attach", SQL: scan("ducklake_inlined_data_tables", "table_id", "table_name", "schema_version")},
	{Name: "tag", Phase: "attach", SQL: scan("ducklake_tag", "object_id", "begin_snapshot", "end_snapshot", "key", "value")},
	{Name: "table_column_stats", Phase: "attach", SQL: scan("ducklake_table_column_stats", "table_id", "column_id", "contains_null", "contains_nan", "min_value", "max_value", "extra_stats")},
	{Name: "table_stats", Phase: "attach", SQL: scan("ducklake_table_stats", "table_id", "record_count", "file_size_bytes", "next_row_id")},
	{Name: "partition_info", Phase: "attach", SQL: scan("ducklake_partition_info", "partition_id", "begin_snapshot", "end_snapshot", "table_id")},
	{Name: "macro", Phase: "attach", SQL: scan("ducklake_macro", "begin_snapshot", "end_snapshot", "schema_id", "macro_id", "macro_name")},
	{Name: "schema", Phase: "attach", SQL: scan("ducklake_schema", "begin_snapshot", "end_snapshot", "schema_id", "schema_uuid", "schema_name", "path", "path_is_relative")},
	{Name: "view", Phase: "attach", SQL: scan("ducklake_view", "begin_snapshot", "end_snapshot", "view_id", "view_uuid", "schema_id", "view_name", "dialect", "sql", "column_aliases")},
	{Name: "partition_column", Phase: "attach", SQL: scan("ducklake_partition_column", "partition_id", "partition_key_index", "column_id", "transform")},
	{Name: "sort_info", Phase: "attach", SQL: scan("ducklake_sort_info", "sort_id", "begin_snapshot", "end_snapshot", "table_id")},
	{Name: "column", Phase: "attach", SQL: scan("ducklake_column", "table_id", "begin_snapshot", "end_snapshot", "column_id", "column_name", "column_type", "initial_default", "default_value", "nulls_allowed", "parent_column", "default_value_type", "column_order")},
	{Name: "table", Phase: "attach", SQL: scan("ducklake_table", "table_id", "begin_snapshot", "end_snapshot", "schema_id", "table_uuid", "table_name", "path", "path_is_relative")},
	{Name: "column_tag", Phase: "attach", SQL: scan("ducklake_column_tag", "table_id", "column_id", "begin_snapshot", "end_snapshot", "key", "value")},
	{Name: "data_file (whole table)", Phase: "first query", SQL: scan("ducklake_data_file", "data_file_id", "table_id", "begin_snapshot", "end_snapshot", "path", "path_is_relative", "file_size_bytes", "footer_size", "row_id_start", "partial_max", "mapping_id")},
	{Name: "file_column_stats (whole table)", Phase: "first query", SQL: scan("ducklake_file_column_stats", "data_file_id", "table_id", "column_id", "column_size_bytes", "value_count", "null_count", "min_value", "max_value", "contains_nan", "extra_stats")},
}

// ReadTiming is one statement's measurement on one system: the fastest of
// the repetitions (the machine is shared; the minimum is the least noisy).
type ReadTiming struct {
	Rows  int64         `json:"rows"`
	Bytes int64         `json:"bytes"`
	Time  time.Duration `json:"-"`
	MS    float64       `json:"ms"`
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TimeReadsPaired times every read on both systems, keeping the fastest of
// reps runs of each: a read runs reps times on one system and then reps
// times on the other (moraine's first if moraineFirst) before the next
// read begins. Timing all of one system's reads after the other's put
// seconds between the two timings of a read, and on a shared machine
// whose speed drifts over seconds (a shared VM's whole-table reads
// moved by a third from one minute to the next) that drift fell on one
// system only. Each system's reads run under the pprof label
// system=postgres or system=moraine, so that a CPU profile of the run can
// leave the other system's client out (-tagignore system=postgres).
func TimeReadsPaired(ctx context.Context, pg, mo *pgconn.PgConn, reads []Read, reps int, moraineFirst bool) (pgT, moT []ReadTiming, err error) {
	pgT, moT = make([]ReadTiming, len(reads)), make([]ReadTiming, len(reads))
	sides := []struct {
		name string
		conn *pgconn.PgConn
		out  []ReadTiming
	}{{"postgres", pg, pgT}, {"moraine", mo, moT}}
	if moraineFirst {
		sides[0], sides[1] = sides[1], sides[0]
	}
	for i, r := range reads {
		for _, s := range sides {
			pprof.Do(ctx, pprof.Labels("system", s.name), func(ctx context.Context) {
				s.out[i], err = timeRead(ctx, s.conn, r, reps)
			})
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	return pgT, moT, nil
}

// timeRead runs r reps times on conn and returns the fastest run.
func timeRead(ctx context.Context, conn *pgconn.PgConn, r Read, reps int) (ReadTiming, error) {
	best := ReadTiming{Time: -1}
	for rep := 0; rep < max(1, reps); rep++ {
		cw := &countingWriter{}
		t0 := time.Now()
		if r.Describe != "" {
			if err := workload.Describe(ctx, conn, r.Describe); err != nil {
				return ReadTiming{}, fmt.Errorf("%s: describe: %w", r.Name, err)
			}
		}
		tag, err := conn.CopyTo(ctx, cw, r.SQL)
		if err != nil {
			return ReadTiming{}, fmt.Errorf("%s: %w", r.Name, err)
		}
		d := time.Since(t0)
		if best.Time < 0 || d < best.Time {
			best = ReadTiming{Rows: tag.RowsAffected(), Bytes: cw.n, Time: d}
		}
	}
	best.MS = float64(best.Time) / float64(time.Millisecond)
	return best, nil
}

// CatalogRow is one statement in the catalog report.
type CatalogRow struct {
	Name     string     `json:"name"`
	Phase    string     `json:"phase"`
	Postgres ReadTiming `json:"postgres"`
	Moraine  ReadTiming `json:"moraine"`
	// Speedup is PostgreSQL's time over moraine's (> 1: moraine is faster).
	Speedup float64 `json:"speedup"`
}

// CatalogReport is `moraine bench catalog --postgres`.
type CatalogReport struct {
	Benchmark  string    `json:"benchmark"`
	Machine    string    `json:"machine"`
	Shape      LakeShape `json:"shape"`
	BuildSec   float64   `json:"moraine_build_sec"`
	CopySec    float64   `json:"postgres_load_sec"`
	CopiedRows int64     `json:"rows_copied"`
	Reps       int       `json:"repetitions"`
	// Rows are the reads of the median round (MedianRound), the whole run
	// for a single round.
	Rows []CatalogRow `json:"reads"`
	// RoundRatios are every round's ratio_vs_postgres, in the order run;
	// with more than one, RatioVsPG is their median.
	RoundRatios []float64     `json:"round_ratios"`
	PhaseMS     [2][2]float64 `json:"-"`
	RatioVsPG   float64       `json:"ratio_vs_postgres"`
	RowsMatched bool          `json:"rows_matched"`
}

// NewCatalogReport pairs the two systems' timings. ratio_vs_postgres is
// PostgreSQL's total read time over moraine's (> 1: moraine is faster).
// It fails if the two systems returned different row counts for a read:
// then they did not hold the same catalog and the timings mean nothing.
func NewCatalogReport(machine string, shape LakeShape, reps int, pg, mo []ReadTiming) (*CatalogReport, error) {
	rep := &CatalogReport{Benchmark: "catalog", Machine: machine, Shape: shape, Reps: reps, RowsMatched: true}
	var pgTotal, moTotal time.Duration
	for i, r := range Reads {
		if pg[i].Rows != mo[i].Rows {
			return nil, fmt.Errorf("%s: postgres returned %d rows, moraine %d: the catalogs differ", r.Name, pg[i].Rows, mo[i].Rows)
		}
		row := CatalogRow{Name: r.Name, Phase: r.Phase, Postgres: pg[i], Moraine: mo[i]}
		if mo[i].Time > 0 {
			row.Speedup = float64(pg[i].Time) / float64(mo[i].Time)
		}
		rep.Rows = append(rep.Rows, row)
		pgTotal += pg[i].Time
		moTotal += mo[i].Time
	}
	if moTotal > 0 {
		rep.RatioVsPG = float64(pgTotal) / float64(moTotal)
	}
	return rep, nil
}

func rate(n int64, ms float64) string {
	if ms <= 0 {
		return "-"
	}
	v := float64(n) / (ms / 1000)
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// MedianRound reports the rounds of one run (each a NewCatalogReport over
// the same catalog, in the order run) as one: the median round's reads,
// every round's ratio, and their median as ratio_vs_postgres — the commit
// benchmark's --rounds method, so that a burst of the shared machine's
// load in one round does not decide the figure.
func MedianRound(rounds []*CatalogReport) *CatalogReport {
	ratios := make([]float64, len(rounds))
	for i, r := range rounds {
		ratios[i] = r.RatioVsPG
	}
	// The round whose ratio is nearest the median (for an even count, the
	// median lies between two rounds; the lower one is shown).
	mid := Median(ratios)
	pick := rounds[0]
	for _, r := range rounds {
		if d, best := math.Abs(r.RatioVsPG-mid), math.Abs(pick.RatioVsPG-mid); d < best || d == best && r.RatioVsPG < pick.RatioVsPG {
			pick = r
		}
	}
	out := *pick
	out.RoundRatios, out.RatioVsPG = ratios, mid
	return &out
}

// WriteTable prints one line per read with both systems, a total per phase,
// and ends with `ratio_vs_postgres=<x>`.
func (r *CatalogReport) WriteTable(w io.Writer) error {
	tw := newTab(w)
	fmt.Fprintln(tw, "read\tphase\trows\twire bytes\tpg ms\tmoraine ms\tpg rows/s\tmoraine rows/s\tpg/moraine\t")
	phases := map[string][2]float64{}
	var order []string
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%.2f\t%.2f\t%s\t%s\t%.2fx\t\n", x.Name, x.Phase, x.Moraine.Rows,
			x.Postgres.Bytes, x.Moraine.Bytes, x.Postgres.MS, x.Moraine.MS,
			rate(x.Postgres.Rows, x.Postgres.MS), rate(x.Moraine.Rows, x.Moraine.MS), x.Speedup)
		p, ok := phases[x.Phase]
		if !ok {
			order = append(order, x.Phase)
		}
		phases[x.Phase] = [2]float64{p[0] + x.Postgres.MS, p[1] + x.Moraine.MS}
	}
	sort.Strings(order)
	var all [2]float64
	for _, ph := range order {
		p := phases[ph]
		all[0] += p[0]
		all[1] += p[1]
		fmt.Fprintf(tw, "TOTAL %s\t\t\t\t%.2f\t%.2f\t\t\t%.2fx\t\n", ph, p[0], p[1], p[0]/max(p[1], 1e-9))
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t\t%.2f\t%.2f\t\t\t%.2fx\t\n", all[0], all[1], all[0]/max(all[1], 1e-9))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "wire bytes are postgres/moraine; times are the fastest of", r.Reps, "runs; pg/moraine > 1 means moraine is faster")
	if len(r.RoundRatios) > 1 {
		parts := make([]string, len(r.RoundRatios))
		for i, x := range r.RoundRatios {
			parts[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(w, "the reads above are the median round's; ratio round by round: %s; median %.3f\n", strings.Join(parts, " "), r.RatioVsPG)
	}
	_, err := fmt.Fprintf(w, "ratio_vs_postgres=%.3f\n", r.RatioVsPG)
	return err
}
