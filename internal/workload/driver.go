// Package workload is a DuckLake-shaped commit workload driver. It talks to a
// catalog server (PostgreSQL, or moraine posing as one) over the PostgreSQL
// protocol and sends what DuckDB with DuckLake sends for a data-file commit,
// message for message as the captured conversations show it
// (testdata/fixtures, e.g. s01_basic; docs/reference/ducklake-catalog-protocol.md §4,
// docs/reference/postgres-scanner-wire.md §5.2):
//
//  1. `SELECT 1`: the postgres extension's pool takes an idle connection
//     for the DuckLake transaction and checks it;
//  2. BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;
//  3. the latest snapshot with the postgres_query template: Parse+Sync and
//     Describe+Sync (libpq's PQprepare and PQdescribePrepared, two round
//     trips), then the same SELECT wrapped in a binary COPY;
//  4. whole-table binary COPY scans of the column and table statistics, and
//     of the table and schema paths (DuckLake's data paths for the new file);
//  5. ONE simple Query holding the whole write set, beginning with
//     INSERT INTO ducklake_snapshot VALUES (base+1, NOW(), …);
//  6. COMMIT;
//  7. `SELECT 1` and `DISCARD ALL`: the pool checks and resets the
//     connection it gets back.
//
// On an error whose lowercased text contains `primary key`, `unique`,
// `conflict` or `concurrent` the writer rolls back (the pool gets the
// connection back), sleeps retry_wait × U(0.5,1) × backoff^attempt, takes
// the connection again, begins, runs the conflict query (the whole-table
// scans of §3.7, in DuckDB's order), applies DuckLake's conflict matrix
// (internal/commit/changes) to the change sets committed since its original
// base, and retries on the newest base with recomputed ids and statistics.
// Any other error, a true conflict, or exhausted retries ends that commit.
//
// Writers register one data file per commit (file_column_stats rows, table
// stats updates, row_id_start from next_row_id). An optional compactor
// concurrently lands merge-shaped commits (RFC 0008): the merged file is
// inserted backdated to its first source's begin_snapshot, sources and their
// stats are hard-deleted and scheduled for deletion, next_row_id is not
// touched. The Parquet files are never written: the driver exercises the
// catalog only.
//
// Every commit carries a unique tag in snapshot_changes.commit_message (a
// column DuckLake fills from ducklake_set_commit_message), which lets
// Result.Verify check that each acknowledged commit landed exactly once.
package workload

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// serverRunQueue reads the server's scheduler latency histogram, or nil
// when there is no way to (Config.ServerRunQueue) or the reading failed.
func (d *driver) serverRunQueue(ctx context.Context) *metrics.Float64Histogram {
	if d.cfg.ServerRunQueue == nil {
		return nil
	}
	h, err := d.cfg.ServerRunQueue(ctx)
	if err != nil {
		return nil
	}
	return h
}

// ErrRetriesExhausted marks a commit that still lost after MaxRetries
// retries (DuckLake: "Exceeded the maximum retry count").
var ErrRetriesExhausted = errors.New("workload: exceeded the maximum retry count")

type driver struct {
	cfg    Config
	q      string // quoted metadata schema
	cols   []column
	tables []int64
	// text holds the statements every commit sends, built once: like
	// the batch, they are built on the commit chain.
	text struct {
		latestInner, latestCopy, tableStats, columnStats         string
		tablePaths, schemaPaths, snapshots, snapshotIDs, changes string
	}

	// stopped is closed when the run stops (Run), for the writers, whose
	// context cannot be cancelled.
	stopped <-chan struct{}
	// began holds each writer's commit in progress: the UnixNano of its
	// first pool take, 0 between commits (Result.Unanswered).
	began []atomic.Int64

	mu struct {
		sync.Mutex
		landed []Landed
		// inDoubt holds the commits whose COMMIT went unanswered.
		inDoubt []Landed
		files   map[int64]Landed // acknowledged data files by id
		res     Result
		win     window
		// committed marks the writers with a commit acknowledged in
		// the window (Result.WritersCommitted).
		committed []bool
	}
}

// window is the timed stretch of a run (Run): it opens on the Warmup-th
// writer commit's outcome (acknowledged or failed) and closes on the
// Writers×CommitsPerWriter-th after that, while every writer keeps
// committing throughout.
type window struct {
	outcomes      int       // writer commits that ended so far
	open, closed  bool      // the window has opened; it has closed
	from, to      time.Time // when it opened and closed
	opened, ended chan struct{}
}

func (d *driver) dial(ctx context.Context) (*pgconn.PgConn, error) {
	if d.cfg.Dial != nil {
		return d.cfg.Dial(ctx)
	}
	return pgconn.Connect(ctx, d.cfg.ConnString)
}

// Prepare creates a fresh catalog (Init) and, in one DuckLake-shaped commit,
// cfg.Tables tables of cfg.Columns columns each in schema main.
func Prepare(ctx context.Context, cfg Config) error { return prepare(ctx, cfg, true) }

// PrepareTables creates the workload's tables t1…tN in a DuckLake catalog
// that already exists (one commit, as DuckLake creates tables), so that
// Run can drive commits into a catalog built otherwise.
func PrepareTables(ctx context.Context, cfg Config) error { return prepare(ctx, cfg, false) }

func prepare(ctx context.Context, cfg Config, initCatalog bool) error {
	d := newDriver(cfg)
	conn, err := d.dial(ctx)
	if err != nil {
		return fmt.Errorf("workload: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if initCatalog {
		if err := Init(ctx, conn, d.cfg.Schema, d.cfg.DataPath); err != nil {
			return err
		}
	}
	_, err = d.createTables(ctx, conn)
	return err
}

func newDriver(cfg Config) *driver {
	cfg = cfg.WithDefaults()
	d := &driver{cfg: cfg, q: quoteIdent(cfg.Schema), cols: tableColumns(cfg.Columns)}
	d.text.latestInner = latestSnapshotInner(d.q)
	d.text.latestCopy = latestSnapshotCopy(d.q)
	d.text.tableStats = localScan(d.q, "ducklake_table_stats", "table_id", "record_count", "file_size_bytes", "next_row_id")
	d.text.columnStats = localScan(d.q, "ducklake_table_column_stats", "table_id", "column_id", "contains_null", "contains_nan", "min_value", "max_value", "extra_stats")
	d.text.tablePaths = localScan(d.q, "ducklake_table", "schema_id", "table_id", "path", "path_is_relative")
	d.text.schemaPaths = localScan(d.q, "ducklake_schema", "schema_id", "path", "path_is_relative")
	d.text.snapshots = localScan(d.q, "ducklake_snapshot", "snapshot_id", "schema_version", "next_catalog_id", "next_file_id")
	d.text.snapshotIDs = localScan(d.q, "ducklake_snapshot", "snapshot_id")
	d.text.changes = localScan(d.q, "ducklake_snapshot_changes", "snapshot_id", "changes_made")
	d.mu.files = map[int64]Landed{}
	d.began = make([]atomic.Int64, cfg.Writers)
	d.mu.committed = make([]bool, cfg.Writers)
	return d
}

// Outcome is what Run returned, delivered by Go.
type Outcome struct {
	Result *Result
	Err    error
}

// Go runs Run on a goroutine of its own and delivers its outcome on the
// returned channel (buffered: nobody has to receive it). Tests that stop
// or fence the server under a running workload use it.
func Go(ctx context.Context, cfg Config) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() {
		res, err := Run(ctx, cfg)
		ch <- Outcome{res, err}
	}()
	return ch
}

// Run drives cfg.Writers writers, each committing without pause from its
// start until the run's timed window has closed, against a catalog made by
// Prepare (and the compactor, if enabled, throughout). The window opens when
// cfg.Warmup writer commits have ended (acknowledged, or failed after
// DuckLake's retries) and closes when cfg.Writers×cfg.CommitsPerWriter more
// have: the Result's figures are the window's. No writer waits for the
// others at either edge, so the window sees the writers as a steady stream
// of commits does — not all starting at once, which on PostgreSQL collides
// every writer on the same snapshot id and spreads their retries out only
// over thousands of commits. It
// returns an error only for failures outside DuckLake's protocol
// (connection loss, an unexpected server error); lost races that end in a
// true conflict or exhausted retries are counted in Result.Failed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	d := newDriver(cfg)
	conn, err := d.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("workload: connect: %w", err)
	}
	tables, err := d.loadTables(ctx, conn)
	conn.Close(context.Background())
	if err != nil {
		return nil, err
	}
	d.tables = tables

	conns := make([]*pgconn.PgConn, d.cfg.Writers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	for i := range conns {
		if conns[i], err = d.dial(ctx); err != nil {
			return nil, fmt.Errorf("workload: connect writer %d: %w", i, err)
		}
	}
	var compConn *pgconn.PgConn
	if d.cfg.Compactor {
		if compConn, err = d.dial(ctx); err != nil {
			return nil, fmt.Errorf("workload: connect compactor: %w", err)
		}
		defer compConn.Close(context.Background())
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.stopped = runCtx.Done()
	d.mu.Lock()
	win := &d.mu.win
	win.opened, win.ended = make(chan struct{}), make(chan struct{})
	if d.cfg.Warmup == 0 {
		d.openWindowLocked(time.Now())
	}
	d.mu.Unlock()
	// The window's CPU and run-queue readings are taken off the writers'
	// path (the server's run queue is an HTTP request away).
	type reading struct {
		cpu cpuSample
		srv *metrics.Float64Histogram
	}
	readings := make(chan [2]reading, 1)
	go func() {
		var r [2]reading
		for i, edge := range [2]chan struct{}{win.opened, win.ended} {
			select {
			case <-edge:
			case <-runCtx.Done():
				readings <- r
				return
			}
			r[i] = reading{cpu: readCPU(), srv: d.serverRunQueue(runCtx)}
		}
		readings <- r
	}()
	errs := make(chan error, d.cfg.Writers+1)
	var writers sync.WaitGroup
	for i := range conns {
		writers.Add(1)
		go func() {
			defer writers.Done()
			// pgconn watches a cancellable context around every call
			// (context.AfterFunc on it, so on the run's context, whose
			// lock all writers then share), and a commit makes a dozen
			// calls. A writer talks through a context that cannot be
			// cancelled instead, and a stopped run closes its connection,
			// which ends the call in flight.
			unhook := context.AfterFunc(runCtx, func() { _ = conns[i].Conn().Close() })
			defer unhook()
			if err := d.writer(context.WithoutCancel(runCtx), conns[i], i); err != nil {
				if runCtx.Err() != nil {
					// The run stopped first (the caller, or another
					// writer that failed): what this one hit is the
					// closed connection.
					err = context.Cause(runCtx)
				}
				errs <- fmt.Errorf("writer %d: %w", i, err)
				cancel()
			}
		}()
	}
	stopCompactor := make(chan struct{})
	var compactor sync.WaitGroup
	if compConn != nil {
		compactor.Add(1)
		go func() {
			defer compactor.Done()
			if err := d.compactor(runCtx, compConn, stopCompactor); err != nil {
				errs <- fmt.Errorf("compactor: %w", err)
				cancel()
			}
		}()
	}
	writers.Wait()
	d.mu.Lock()
	// Writers that stopped on an error end the window where they stopped.
	d.openWindowLocked(time.Now())
	d.closeWindowLocked(time.Now())
	d.mu.Unlock()
	r := <-readings
	close(stopCompactor)
	compactor.Wait()
	close(errs)

	d.mu.Lock()
	res := d.mu.res
	res.Config = d.cfg
	res.Elapsed = win.to.Sub(win.from)
	res.CPU, res.CPUMeasured = r[1].cpu.since(r[0].cpu)
	res.CPU.ServerRunQueue = runQueueSince(r[0].srv, r[1].srv)
	res.timedFrom, res.timedTo = win.from, win.to
	res.landed = d.mu.landed
	res.inDoubt = d.mu.inDoubt
	res.tableIDs = d.tables
	d.mu.Unlock()
	if err := <-errs; err != nil {
		return &res, err
	}
	return &res, nil
}

// stopErr reports that the run stopped: ctx is done or, for a writer
// (whose context cannot be cancelled), the run is.
func (d *driver) stopErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-d.stopped:
		return context.Canceled
	default:
		return nil
	}
}

// openWindowLocked opens the timed window at t, once. REQUIRES: d.mu held.
func (d *driver) openWindowLocked(t time.Time) {
	w := &d.mu.win
	if !w.open {
		w.open, w.from = true, t
		close(w.opened)
	}
}

// closeWindowLocked closes the timed window at t, once, and notes the
// writer commits still under way then (Result.Unanswered). REQUIRES: d.mu
// held.
func (d *driver) closeWindowLocked(t time.Time) {
	w := &d.mu.win
	if w.closed {
		return
	}
	w.closed, w.to = true, t
	close(w.ended)
	for i := range d.began {
		if b := d.began[i].Load(); b != 0 && b < t.UnixNano() {
			d.mu.res.Unanswered = append(d.mu.res.Unanswered, t.Sub(time.Unix(0, b)))
		}
	}
	for _, c := range d.mu.committed {
		if c {
			d.mu.res.WritersCommitted++
		}
	}
}

// countOutcome files a writer commit's outcome (acknowledged, or failed
// after DuckLake's retries), decided at now, under the window: the window
// opens on the Warmup-th outcome and closes on the last one it counts, so
// a run whose commits fail still ends; what happens outside the window is
// not timed.
func (d *driver) countOutcome(writer int, now time.Time, out outcome, err error, lat time.Duration) {
	if err != nil {
		return // the run is over (Run reports err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w, res := &d.mu.win, &d.mu.res
	w.outcomes++
	if !w.open {
		if !out.failed {
			res.Warmup++
		}
		if w.outcomes == d.cfg.Warmup {
			d.openWindowLocked(now)
		}
		return
	}
	if w.closed {
		return
	}
	res.Retries += out.retries
	if out.failed {
		res.Failed++
		if out.conflict {
			res.Conflicts++
		}
	} else {
		res.Commits++
		res.Latencies = append(res.Latencies, lat)
		d.mu.committed[writer] = true
	}
	if res.Commits+res.Failed == d.cfg.Writers*d.cfg.CommitsPerWriter {
		d.closeWindowLocked(now)
	}
}

// windowClosed reports whether the timed window has closed.
func (d *driver) windowClosed() bool {
	select {
	case <-d.mu.win.ended:
		return true
	default:
		return false
	}
}
