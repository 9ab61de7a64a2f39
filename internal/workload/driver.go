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
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/moraine-db/moraine/internal/commit/changes"
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

// Config describes one workload run.
type Config struct {
	// ConnString is a libpq conninfo or URL; Dial, when set, is used instead.
	ConnString string
	Dial       func(ctx context.Context) (*pgconn.PgConn, error)

	Schema   string // metadata schema; default "public"
	DataPath string // ducklake_metadata data_path; default "/lake/workload/", or DataDir + "/"
	// DataDir, when set, makes the driver write every data file it
	// registers as a real Parquet file under DataDir/main/t<i>/ (merged
	// files with embedded row ids when they are not row-id adjacent), so a
	// server that holds compactions to their row ids (RFC 0008) can read
	// them. Without it no file is written.
	DataDir string

	Writers          int // concurrent writers; default 4
	CommitsPerWriter int // the timed window counts Writers×CommitsPerWriter commits; default 10
	Tables           int // default 4
	Columns          int // user columns per table = stats rows per file; default 8
	RowsPerFile      int // mean records per data file; default 100

	// Warmup commits come first, untimed: the timed window opens when
	// that many writer commits have ended, whichever writers made them,
	// and counts Writers×CommitsPerWriter more (Run); Result
	// counts only the window's (every commit is in Landed and verified). A
	// server's first commits pay for what a running one already has —
	// memory the process has not touched yet, connections' first
	// statements — which is not what a steady stream of commits costs.
	Warmup int
	// ServerRunQueue, when set, reads the server's scheduler latency
	// histogram (a server in another process); the timed window then
	// reports how long the server's goroutines waited to run
	// (CPUUse.ServerRunQueue). A failed reading leaves it unmeasured.
	ServerRunQueue func(ctx context.Context) (*metrics.Float64Histogram, error)

	Compactor      bool          // run a concurrent merge compactor
	CompactPause   time.Duration // pause between compactor rounds; default 10ms
	MergeFiles     int           // max sources per merge; default 4
	MergeMaxRows   int64         // only files smaller than this merge; default RowsPerFile×MergeFiles
	MergeEmbedsIDs bool          // merged files embed row ids (row_id_start NULL), as the bundled DuckLake does

	MaxRetries   int           // DuckLake's ducklake_max_retry_count; default 10
	RetryWait    time.Duration // ducklake_retry_wait_ms; default 100ms
	RetryBackoff float64       // ducklake_retry_backoff; default 1.5

	Seed uint64 // randomness seed (table choice, file sizes, backoff jitter)
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.DataPath == "" {
		c.DataPath = "/lake/workload/"
		if c.DataDir != "" {
			c.DataPath = filepath.ToSlash(c.DataDir) + "/"
		}
	}
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.CommitsPerWriter <= 0 {
		c.CommitsPerWriter = 10
	}
	if c.Tables <= 0 {
		c.Tables = 4
	}
	if c.Columns <= 0 {
		c.Columns = 8
	}
	if c.RowsPerFile <= 0 {
		c.RowsPerFile = 100
	}
	if c.CompactPause <= 0 {
		c.CompactPause = 10 * time.Millisecond
	}
	if c.MergeFiles < 2 {
		c.MergeFiles = 4
	}
	if c.MergeMaxRows <= 0 {
		c.MergeMaxRows = int64(c.RowsPerFile * c.MergeFiles)
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	} else if c.MaxRetries == 0 {
		c.MaxRetries = 10
	}
	if c.RetryWait <= 0 {
		c.RetryWait = 100 * time.Millisecond
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 1.5
	}
	return c
}

// ErrRetriesExhausted marks a commit that still lost after MaxRetries
// retries (DuckLake: "Exceeded the maximum retry count").
var ErrRetriesExhausted = errors.New("workload: exceeded the maximum retry count")

// Landed is one acknowledged commit.
type Landed struct {
	Tag      string
	Snapshot int64
	Kind     string // "setup", "insert" or "merge"
	Table    int64
	File     int64   // the data file it registered (insert, merge)
	Path     string  // that file's path: under DataDir when set, else relative to its table
	Sources  []int64 // merge: the files it consumed
	Begin    int64   // begin_snapshot written for File
	RowIDs   []Span  // row ids File holds
	Records  int64
	Attempts int
	// Writer and Nth name a writer's commit: its writer (from 0) and its
	// place in that writer's sequence (from 0); Writer is -1 for the
	// setup and the compactor's commits.
	Writer, Nth int
	// Began is when a writer's commit took its connection from the pool
	// for its first attempt; Answered is when the answer to the batch that
	// landed arrived.
	Began, Answered time.Time
	// Phases of a writer's commit landed at its first attempt (zero
	// otherwise): Result.ChainPhases breaks the chain link down with them.
	Phases Phases
}

// Phases time a writer's commit: when the pool took the connection, and
// when the latest snapshot, the statistics and the data paths had been
// read. The batch's answer is Landed.Answered.
type Phases struct {
	Began, Pinned, StatsRead, PathsRead time.Time
}

// Result is what a run measured and acknowledged.
type Result struct {
	Config    Config
	Elapsed   time.Duration   // wall time of the timed window (Run)
	Latencies []time.Duration // per writer commit acknowledged in the window, the pool's take to COMMIT ack, retries included
	Commits   int             // writer commits acknowledged in the window
	Warmup    int             // writer commits acknowledged before it (untimed)
	Failed    int             // writer commits in the window that hit a true conflict or exhausted retries
	Retries   int             // retries (attempts beyond the first) of the writer commits that ended in the window
	Conflicts int             // true conflicts among them
	// WritersCommitted is how many writers had a commit acknowledged in
	// the window. Unanswered holds, for every writer commit begun before
	// the window closed and not yet ended then, its age at the close —
	// its first pool take to the window's end, back-off sleeps included.
	// Latencies only count commits that ended in the window; a writer
	// that keeps losing the race sleeps in DuckLake's back-off across it
	// (PostgreSQL: ten retries sleep about eight seconds in all), and
	// these two say so.
	WritersCommitted int
	Unanswered       []time.Duration
	// CPU is what the timed window cost in CPU time, when CPUMeasured.
	CPU         CPUUse
	CPUMeasured bool

	Merges         int // acknowledged compactor commits
	MergeRetries   int
	MergeConflicts int
	MergeFailed    int

	landed    []Landed
	inDoubt   []Landed
	tableIDs  []int64
	timedFrom time.Time // the timed window's start
	timedTo   time.Time // and its end
}

// CommitsPerSec is acknowledged writer commits per second of wall time.
func (r *Result) CommitsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of commit latency,
// nearest-rank.
func (r *Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.Latencies...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// ChainLinks returns, for every commit of the timed window whose snapshot's
// predecessor also landed in it, the time from the predecessor's batch
// answer to its own, sorted. DuckLake's commits form a chain (each takes
// snapshot base+1 from the head it read), so a link is what one commit
// adds to the chain: the next writer's reads and batch after the
// previous batch, plus whatever it waited for (a lock, a back-off).
func (r *Result) ChainLinks() []time.Duration {
	at := r.answeredBySnapshot()
	var out []time.Duration
	for s, l := range at {
		if prev, ok := at[s-1]; ok {
			out = append(out, l.Answered.Sub(prev.Answered))
		}
	}
	slices.Sort(out)
	return out
}

// answeredBySnapshot indexes by snapshot the commits whose batch was
// answered in the timed window: the ends of its chain links.
func (r *Result) answeredBySnapshot() map[int64]Landed {
	at := make(map[int64]Landed, len(r.landed))
	for _, l := range r.landed {
		if !l.Answered.IsZero() && !l.Answered.Before(r.timedFrom) && !l.Answered.After(r.timedTo) {
			at[l.Snapshot] = l
		}
	}
	return at
}

// ChainPhases breaks the chain links of the timed window down (see
// ChainLinks), for every link whose commit landed at its first attempt: from
// the predecessor's batch answer to the commit's latest-snapshot answer
// (Wait; negative when the snapshot was answered first, as when the
// predecessor's seal woke it while its own answer was on the way), its
// statistics reads, its path reads, and its batch. A link is Late when its
// writer took its connection from the pool only after the predecessor's
// batch was answered. On moraine, whose writers queue for the snapshot
// behind the commit under way, a late link means nobody was queued: every
// writer was still in the tail of its last commit (mostly waiting for it to
// be durable). On PostgreSQL every link is late by construction: a writer
// that began earlier read the old snapshot and fails on its key.
func (r *Result) ChainPhases() []LinkPhases {
	at := r.answeredBySnapshot()
	var out []LinkPhases
	for s, l := range at {
		prev, ok := at[s-1]
		ph := l.Phases
		if !ok || ph.Began.IsZero() {
			continue
		}
		out = append(out, LinkPhases{
			Snapshot: s,
			Wait:     ph.Pinned.Sub(prev.Answered),
			Stats:    ph.StatsRead.Sub(ph.Pinned),
			Paths:    ph.PathsRead.Sub(ph.StatsRead),
			Batch:    l.Answered.Sub(ph.PathsRead),
			Link:     l.Answered.Sub(prev.Answered),
			Late:     ph.Began.After(prev.Answered),
		})
	}
	slices.SortFunc(out, func(a, b LinkPhases) int { return cmp.Compare(a.Snapshot, b.Snapshot) })
	return out
}

// WriterCycles follows each writer from one commit to its next, for every
// commit answered in the timed window that landed at its first attempt
// and whose writer's previous commit landed too: Tail, from the previous
// commit's batch answer until the writer began this one (the COMMIT's wait
// for durability and the pool's round trips), and ToSnapshot, from then
// until its latest-snapshot answer (the pool's take, BEGIN, the prepare,
// and the wait for the commit under way). With the link's own reads and
// batch (ChainPhases) they make up a writer's whole cycle: on moraine,
// whose writers queue behind the chain, they tell a rate bound by the
// chain (long ToSnapshot) from one bound by the writers' tails (late
// links).
func (r *Result) WriterCycles() []WriterCycle {
	type key struct{ writer, nth int }
	answered := make(map[key]time.Time, len(r.landed))
	for _, l := range r.landed {
		if l.Writer >= 0 {
			answered[key{l.Writer, l.Nth}] = l.Answered
		}
	}
	var out []WriterCycle
	for _, l := range r.landed {
		ph := l.Phases
		if l.Writer < 0 || ph.Began.IsZero() || l.Answered.Before(r.timedFrom) || l.Answered.After(r.timedTo) {
			continue
		}
		prev, ok := answered[key{l.Writer, l.Nth - 1}]
		if !ok {
			continue
		}
		out = append(out, WriterCycle{Writer: l.Writer, Nth: l.Nth,
			Tail: ph.Began.Sub(prev), ToSnapshot: ph.Pinned.Sub(ph.Began)})
	}
	slices.SortFunc(out, func(a, b WriterCycle) int {
		if c := cmp.Compare(a.Writer, b.Writer); c != 0 {
			return c
		}
		return cmp.Compare(a.Nth, b.Nth)
	})
	return out
}

// WriterCycle is one step of a writer's cycle (Result.WriterCycles).
type WriterCycle struct {
	Writer, Nth      int
	Tail, ToSnapshot time.Duration
}

// LinkPhases is one chain link broken down (Result.ChainPhases).
type LinkPhases struct {
	Snapshot                        int64
	Wait, Stats, Paths, Batch, Link time.Duration
	Late                            bool
}

// Landed returns the acknowledged commits in acknowledgement order.
func (r *Result) Landed() []Landed { return append([]Landed(nil), r.landed...) }

// InDoubt returns the commits whose COMMIT got no answer — the connection
// failed during it, because the server went away (a fenced or killed
// writer) or because the run stopped and closed it — or was answered with
// a shutdown error (57P: a fenced server): each may have landed or not,
// and Verify accepts either, whole.
func (r *Result) InDoubt() []Landed { return append([]Landed(nil), r.inDoubt...) }

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
func Prepare(ctx context.Context, cfg Config) error {
	d := newDriver(cfg)
	conn, err := d.dial(ctx)
	if err != nil {
		return fmt.Errorf("workload: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if err := Init(ctx, conn, d.cfg.Schema, d.cfg.DataPath); err != nil {
		return err
	}
	_, err = d.createTables(ctx, conn)
	return err
}

func newDriver(cfg Config) *driver {
	cfg = cfg.withDefaults()
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
// over thousands of commits (docs/benchmarks.md, fourteenth session). It
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

// snapshot is DuckLake's view of where the catalog is.
type snapshot struct{ id, schemaVersion, nextCatalogID, nextFileID int64 }

type tableStat struct{ records, nextRowID, size int64 }

// stats are the statistics a commit reads, kept for the one table it
// commits to. DuckDB builds them for every table from the same whole-table
// reads; the driver reads what DuckDB reads but decodes only the rows it
// uses: the client's own work is not what the benchmark measures, and in
// the benchmark's process it would compete with the server for the CPU
// (with 1 000 tables, 9 000 rows a commit).
type stats struct {
	of     int64 // the table
	tables map[int64]tableStat
	cols   map[[2]int64][2]string // (table, column) → (min, max)
}

// latestSnapshot runs the postgres_query template: Parse, then Describe, of
// the inner SELECT, then the wrapped binary COPY.
func (d *driver) latestSnapshot(ctx context.Context, conn *pgconn.PgConn) (snapshot, error) {
	if err := Describe(ctx, conn, d.text.latestInner); err != nil {
		return snapshot{}, fmt.Errorf("latest snapshot: describe: %w", err)
	}
	var snap snapshot
	err := copyRows(ctx, conn, d.text.latestCopy, func(rows [][][]byte) error {
		if len(rows) != 1 {
			return fmt.Errorf("%d rows: No snapshot found in DuckLake", len(rows))
		}
		v, err := int8s(rows[0], 4)
		if err != nil {
			return err
		}
		snap = snapshot{v[0], v[1], v[2], v[3]}
		return nil
	})
	if err != nil {
		return snapshot{}, fmt.Errorf("latest snapshot: %w", err)
	}
	return snap, nil
}

// Describe prepares sql as the unnamed statement the way DuckDB's postgres
// extension does through libpq's PQprepare and PQdescribePrepared:
// Parse+Sync, then Describe+Sync, each waited for — two round trips where
// pgconn's Prepare would make one. It returns the first error the server
// reported.
func Describe(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	fe := conn.Frontend()
	for _, m := range [...]pgproto3.FrontendMessage{&pgproto3.Parse{Query: sql}, &pgproto3.Describe{ObjectType: 'S'}} {
		fe.Send(m)
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			return err
		}
		if err := awaitReady(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// awaitReady reads the answers to what was sent up to ReadyForQuery and
// returns the first error the server reported among them.
func awaitReady(ctx context.Context, conn *pgconn.PgConn) error {
	var first error
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			return first
		}
	}
}

// poolTake and poolReturn are what DuckDB's postgres extension sends when
// its connection pool hands a connection to a DuckLake transaction and gets
// it back (docs/reference/postgres-scanner-wire.md §5.2, default settings): a health check
// `SELECT 1` each way, and `DISCARD ALL` to reset the returned session.
func poolTake(ctx context.Context, conn *pgconn.PgConn) error {
	if err := selectOne(ctx, conn); err != nil {
		return fmt.Errorf("pool health check: %w", err)
	}
	return nil
}

func poolReturn(ctx context.Context, conn *pgconn.PgConn) error {
	if err := selectOne(ctx, conn); err != nil {
		return fmt.Errorf("pool health check: %w", err)
	}
	if err := exec(ctx, conn, "DISCARD ALL"); err != nil {
		return fmt.Errorf("pool reset: %w", err)
	}
	return nil
}

// selectOne runs `SELECT 1`, which must answer one row (libpq's TUPLES_OK
// is what the pool checks).
func selectOne(ctx context.Context, conn *pgconn.PgConn) error {
	mrr := conn.Exec(ctx, "SELECT 1")
	n := 0
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			n++
		}
		if _, err := rr.Close(); err != nil {
			mrr.Close()
			return err
		}
	}
	if err := mrr.Close(); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("SELECT 1 answered %d rows", n)
	}
	return nil
}

func copyOut(ctx context.Context, conn *pgconn.PgConn, sql string) ([][][]byte, error) {
	var buf bytes.Buffer
	if _, err := conn.CopyTo(ctx, &buf, sql); err != nil {
		return nil, err
	}
	return decodeCopy(buf.Bytes())
}

// copyScratch is the memory a COPY read decodes into, reused across the
// reads every commit makes (copyRows): the driver runs in the benchmark's
// process, and its garbage would be collected on the system's time.
type copyScratch struct {
	buf   bytes.Buffer
	rows  [][][]byte
	cells [][]byte
}

var copyScratches = sync.Pool{New: func() any { return new(copyScratch) }}

// copyRows is copyOut for reads whose rows fn consumes before it returns:
// the rows point into reused memory.
func copyRows(ctx context.Context, conn *pgconn.PgConn, sql string, fn func(rows [][][]byte) error) error {
	sc := copyScratches.Get().(*copyScratch)
	defer copyScratches.Put(sc)
	sc.buf.Reset()
	if _, err := conn.CopyTo(ctx, &sc.buf, sql); err != nil {
		return err
	}
	rows, cells, err := decodeCopyInto(sc.buf.Bytes(), sc.rows[:0], sc.cells[:0])
	if err != nil {
		return err
	}
	sc.rows, sc.cells = rows, cells
	return fn(rows)
}

// int8s decodes the first n fields of row as non-null BIGINTs.
func int8s(row [][]byte, n int) ([]int64, error) {
	if len(row) < n {
		return nil, fmt.Errorf("%w: %d fields, want %d", errCopyFormat, len(row), n)
	}
	out := make([]int64, n)
	for i := range out {
		v, ok, err := int8(row[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: unexpected NULL in field %d", errCopyFormat, i)
		}
		out[i] = v
	}
	return out, nil
}

// newStats returns stats for table, sized so that filling them never
// rehashes: the reads run on the commit chain (between the next writer's
// latest-snapshot read and its batch).
func (d *driver) newStats(table int64) *stats {
	return &stats{of: table, tables: make(map[int64]tableStat, 1), cols: make(map[[2]int64][2]string, len(d.cols))}
}

// readStats reads the column and then the table statistics, in the order
// DuckDB reads them for a commit.
func (d *driver) readStats(ctx context.Context, conn *pgconn.PgConn, table int64) (*stats, error) {
	st := d.newStats(table)
	if err := d.readColumnStats(ctx, conn, st); err != nil {
		return nil, err
	}
	if err := d.readTableStats(ctx, conn, st); err != nil {
		return nil, err
	}
	return st, nil
}

func (d *driver) readTableStats(ctx context.Context, conn *pgconn.PgConn, st *stats) error {
	err := copyRows(ctx, conn, d.text.tableStats, func(rows [][][]byte) error {
		for _, r := range rows {
			mine, err := st.mine(r)
			if err != nil {
				return err
			}
			if !mine {
				continue
			}
			v, err := int8s(r, 4)
			if err != nil {
				return err
			}
			st.tables[v[0]] = tableStat{records: v[1], size: v[2], nextRowID: v[3]}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read table stats: %w", err)
	}
	return nil
}

func (d *driver) readColumnStats(ctx context.Context, conn *pgconn.PgConn, st *stats) error {
	err := copyRows(ctx, conn, d.text.columnStats, func(rows [][][]byte) error {
		for _, r := range rows {
			if len(r) < 6 {
				return errCopyFormat
			}
			mine, err := st.mine(r)
			if err != nil {
				return err
			}
			if !mine {
				continue
			}
			v, err := int8s(r, 2)
			if err != nil {
				return errors.Join(err, errCopyFormat)
			}
			st.cols[[2]int64{v[0], v[1]}] = [2]string{string(r[4]), string(r[5])}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read column stats: %w", err)
	}
	return nil
}

// mine reports whether a statistics row (its table id first) is of the
// table the stats are kept for.
func (st *stats) mine(row [][]byte) (bool, error) {
	if len(row) == 0 {
		return false, errCopyFormat
	}
	t, ok, err := int8(row[0])
	if err != nil || !ok {
		return false, errors.Join(err, errCopyFormat)
	}
	return t == st.of, nil
}

// readPaths reads the table and schema paths, from which DuckLake builds
// the new file's path, as it does before every commit that adds files.
// Every table needs a path, and the metadata schema's main schema one.
func (d *driver) readPaths(ctx context.Context, conn *pgconn.PgConn) error {
	for _, q := range [...]struct{ what, sql string }{{"table", d.text.tablePaths}, {"schema", d.text.schemaPaths}} {
		err := copyRows(ctx, conn, q.sql, func(rows [][][]byte) error {
			if len(rows) == 0 {
				return fmt.Errorf("no %s rows", q.what)
			}
			for _, r := range rows {
				if len(r) < 3 || r[len(r)-2] == nil {
					return fmt.Errorf("%s row without a path: %w", q.what, errCopyFormat)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s paths: %w", q.what, err)
		}
	}
	return nil
}

// conflictQuery is DuckLake's retry read (§3.7) as DuckDB runs it over a
// PostgreSQL catalog: whole-table scans of table stats, snapshots and
// snapshot changes, reduced client-side. It returns the change sets committed
// after origBase, in snapshot order, and fresh statistics.
func (d *driver) conflictQuery(ctx context.Context, conn *pgconn.PgConn, origBase, table int64) (changes.Set, *stats, error) {
	st := d.newStats(table)
	if err := d.readTableStats(ctx, conn, st); err != nil {
		return nil, nil, err
	}
	// The scans grow with the catalog (every snapshot, every snapshot's
	// changes): they decode into reused memory, as the per-commit reads do.
	drain := func([][][]byte) error { return nil }
	for _, q := range [...]string{d.text.snapshots, d.text.snapshotIDs} {
		if err := copyRows(ctx, conn, q, drain); err != nil {
			return nil, nil, fmt.Errorf("conflict query: snapshots: %w", err)
		}
	}
	type change struct {
		id int64
		s  string
	}
	var later []change
	err := copyRows(ctx, conn, d.text.changes, func(rows [][][]byte) error {
		for _, r := range rows {
			if len(r) < 2 {
				return fmt.Errorf("row: %w", errCopyFormat)
			}
			id, ok, err := int8(r[0])
			if err != nil || !ok {
				return fmt.Errorf("row: %w", errors.Join(err, errCopyFormat))
			}
			if id > origBase && r[1] != nil {
				later = append(later, change{id, string(r[1])})
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("conflict query: changes: %w", err)
	}
	if err := d.readColumnStats(ctx, conn, st); err != nil {
		return nil, nil, err
	}
	sort.Slice(later, func(i, j int) bool { return later[i].id < later[j].id })
	var theirs changes.Set
	for _, c := range later {
		set, err := changes.Parse(c.s)
		if err != nil {
			return nil, nil, fmt.Errorf("conflict query: snapshot %d: %w", c.id, err)
		}
		theirs = append(theirs, set...)
	}
	return theirs, st, nil
}

// retryable is DuckLake's test on the error text (§4.3).
func retryable(err error) bool {
	s := strings.ToLower(err.Error())
	for _, w := range []string{"primary key", "unique", "conflict", "concurrent"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// plan is one transaction's intended change, rebuilt on every attempt.
type plan struct {
	kind   string
	tag    string
	writer int // Landed.Writer and Landed.Nth
	nth    int
	table  int64 // the table whose statistics the batch uses (stats)
	mine   changes.Set
	paths  bool // the batch adds files: DuckLake reads the data paths first
	build  func(base snapshot, st *stats) (batch string, landed Landed)
	phases Phases // of the first attempt (writer commits)
}

// outcome of commitTail.
type outcome struct {
	landed   Landed
	retries  int
	conflict bool
	failed   bool
}

// commitTail sends plan's batch in the transaction the caller began (base
// and st read in it) and runs DuckLake's retry loop, giving the connection
// back to the pool and taking it again around each back-off. The last
// transaction has ended (committed or rolled back) when it returns; giving
// the connection back after it is the caller's. It returns a non-nil error
// only for failures outside the protocol.
func (d *driver) commitTail(ctx context.Context, conn *pgconn.PgConn, rng *rand.Rand, base snapshot, st *stats, p plan) (outcome, error) {
	origBase := base.id
	var out outcome
	for attempt := 0; ; attempt++ {
		batch, l := p.build(base, st)
		err := exec(ctx, conn, batch)
		if err == nil {
			l.Answered = time.Now()
			l.Tag, l.Kind, l.Attempts, l.Began = p.tag, p.kind, attempt+1, p.phases.Began
			l.Writer, l.Nth = p.writer, p.nth
			if attempt == 0 {
				l.Phases = p.phases
			}
			if err = exec(ctx, conn, "COMMIT"); err == nil {
				d.recordLanded(l)
				out.landed = l
				return out, nil
			}
			if commitInDoubt(err) {
				d.recordInDoubt(l)
			}
		}
		_ = exec(ctx, conn, "ROLLBACK")
		if err := d.stopErr(ctx); err != nil {
			return out, err
		}
		if !retryable(err) {
			return out, fmt.Errorf("commit %s (snapshot %d): %w", p.tag, base.id+1, err)
		}
		if attempt >= d.cfg.MaxRetries {
			out.failed = true
			return out, nil
		}
		if err := poolReturn(ctx, conn); err != nil {
			return out, err
		}
		wait := float64(d.cfg.RetryWait) * (0.5 + 0.5*rng.Float64()) * math.Pow(d.cfg.RetryBackoff, float64(attempt))
		select {
		case <-time.After(time.Duration(wait)):
		case <-ctx.Done():
			return out, ctx.Err()
		case <-d.stopped:
			return out, context.Canceled
		}
		out.retries++
		if err := poolTake(ctx, conn); err != nil {
			return out, err
		}
		if err := exec(ctx, conn, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return out, fmt.Errorf("retry begin: %w", err)
		}
		theirs, newStats, err := d.conflictQuery(ctx, conn, origBase, p.table)
		if err == nil {
			if cerr := changes.Classify(p.mine, theirs, changes.SchemaNames{0: "main"}); cerr != nil {
				_ = exec(ctx, conn, "ROLLBACK")
				out.conflict, out.failed = true, true
				return out, nil
			}
			base, err = d.latestSnapshot(ctx, conn)
		}
		if err == nil && p.paths {
			err = d.readPaths(ctx, conn)
		}
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return out, fmt.Errorf("retry of %s: %w", p.tag, err)
		}
		st = newStats
	}
}

// commitInDoubt reports whether a COMMIT that returned err may have landed
// all the same: it got no answer (the connection failed during it — the
// server went away, or a stopped run closed it), or the server answered
// that it is shutting down (class 57P: a fenced moraine answers 57P01 to a
// commit whose store write may have landed before the fence overtook its
// acknowledgement; docs/operations.md, Failover). Any other answer refuses
// the commit.
func commitInDoubt(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
}

// recordInDoubt notes a commit whose COMMIT may have landed though it was
// not acknowledged (Result.InDoubt).
func (d *driver) recordInDoubt(l Landed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.inDoubt = append(d.mu.inDoubt, l)
}

func (d *driver) recordLanded(l Landed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.landed = append(d.mu.landed, l)
	if l.Kind == "insert" || l.Kind == "merge" {
		d.mu.files[l.File] = l
	}
}

// begin takes the connection from the pool, begins the DuckLake
// transaction and reads its snapshot.
func (d *driver) begin(ctx context.Context, conn *pgconn.PgConn) (snapshot, error) {
	if err := poolTake(ctx, conn); err != nil {
		return snapshot{}, err
	}
	if err := exec(ctx, conn, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return snapshot{}, fmt.Errorf("begin: %w", err)
	}
	base, err := d.latestSnapshot(ctx, conn)
	if err != nil {
		_ = exec(ctx, conn, "ROLLBACK")
		return snapshot{}, err
	}
	return base, nil
}

// createTables lands the setup commit: tables t1…tN with their columns.
func (d *driver) createTables(ctx context.Context, conn *pgconn.PgConn) (Landed, error) {
	base, err := d.begin(ctx, conn)
	if err != nil {
		return Landed{}, err
	}
	var mine changes.Set
	for i := 1; i <= d.cfg.Tables; i++ {
		mine = append(mine, changes.Entry{Kind: changes.CreatedTable, Schema: "main", Name: fmt.Sprintf("t%d", i)})
	}
	p := plan{kind: "setup", tag: "setup", writer: -1, mine: mine, build: func(base snapshot, _ *stats) (string, Landed) {
		s := base.id + 1
		stmts := []string{snapshotSQL(d.q, s, base.schemaVersion+1, base.nextCatalogID+int64(d.cfg.Tables), base.nextFileID)}
		for i := 0; i < d.cfg.Tables; i++ {
			tid := base.nextCatalogID + int64(i)
			name := fmt.Sprintf("t%d", i+1)
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_table VALUES (%d, '%s', %d, NULL, 0, %s, %s, true)",
				d.q, tid, uuidString(newUUID()), s, quoteLiteral(name), quoteLiteral(name+"/")))
			var cols []string
			for _, c := range d.cols {
				cols = append(cols, fmt.Sprintf("(%d, %d, NULL, %d, %d, %s, %s, NULL, 'NULL', true, NULL, 'literal', 'duckdb')",
					c.id, s, tid, c.id, quoteLiteral(c.name), quoteLiteral(c.typ)))
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_column VALUES %s", d.q, strings.Join(cols, ",")))
		}
		for i := 0; i < d.cfg.Tables; i++ {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", d.q, s, base.schemaVersion+1, base.nextCatalogID+int64(i)))
		}
		stmts = append(stmts, changesSQL(d.q, s, mine.String(), "setup"))
		return joinBatch(stmts), Landed{Snapshot: s}
	}}
	out, err := d.commitTail(ctx, conn, rand.New(rand.NewPCG(d.cfg.Seed, 0)), base, nil, p)
	if err != nil {
		return Landed{}, fmt.Errorf("create tables: %w", err)
	}
	if out.failed {
		return Landed{}, fmt.Errorf("create tables: %w", ErrRetriesExhausted)
	}
	return out.landed, nil
}

// loadTables reads the ids of tables t1…tN (current rows of ducklake_table).
func (d *driver) loadTables(ctx context.Context, conn *pgconn.PgConn) ([]int64, error) {
	rows, err := copyOut(ctx, conn, localScan(d.q, "ducklake_table", "table_id", "end_snapshot", "table_name"))
	if err != nil {
		return nil, fmt.Errorf("workload: load tables: %w", err)
	}
	byName := map[string]int64{}
	for _, r := range rows {
		if len(r) < 3 {
			return nil, fmt.Errorf("workload: load tables: %w", errCopyFormat)
		}
		id, _, err := int8(r[0])
		if err != nil {
			return nil, fmt.Errorf("workload: load tables: %w", err)
		}
		if r[1] == nil {
			byName[string(r[2])] = id
		}
	}
	var ids []int64
	for i := 1; i <= d.cfg.Tables; i++ {
		id, ok := byName[fmt.Sprintf("t%d", i)]
		if !ok {
			return nil, fmt.Errorf("workload: table t%d missing (run Prepare first)", i)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// writer lands insert commits on conn as writer w, tagged w<w>-c<i>, until
// the run's timed window has closed (Run).
func (d *driver) writer(ctx context.Context, conn *pgconn.PgConn, w int) error {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, uint64(w)+1))
	for c := 0; !d.windowClosed(); c++ {
		table := d.tables[rng.IntN(len(d.tables))]
		rows := int64(d.cfg.RowsPerFile/2 + rng.IntN(d.cfg.RowsPerFile+1))
		path := "ducklake-" + uuidString(newUUID()) + ".parquet"
		tag := fmt.Sprintf("w%d-c%d", w, c)
		var size int64
		if d.cfg.DataDir != "" {
			// DuckLake writes the Parquet file before it commits.
			var err error
			if size, err = writeDataFile(d.localPath(table, path), d.cols, rows, nil); err != nil {
				return err
			}
		}
		p := plan{kind: "insert", tag: tag, writer: w, nth: c, table: table, paths: true,
			mine: changes.Set{{Kind: changes.InsertedIntoTable, ID: table}},
			build: func(base snapshot, st *stats) (string, Landed) {
				return d.insertBatch(base, st, table, rows, size, path, tag)
			},
		}
		start := time.Now()
		d.began[w].Store(start.UnixNano())
		base, err := d.begin(ctx, conn)
		if err != nil {
			return err
		}
		p.phases = Phases{Began: start, Pinned: time.Now()}
		st, err := d.readStats(ctx, conn, table)
		p.phases.StatsRead = time.Now()
		if err == nil {
			err = d.readPaths(ctx, conn)
		}
		p.phases.PathsRead = time.Now()
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return err
		}
		out, err := d.commitTail(ctx, conn, rng, base, st, p)
		ended := time.Now()
		d.began[w].Store(0)
		lat := ended.Sub(start)
		if err == nil {
			// The transaction is over for DuckDB (and for the latency);
			// the pool takes its connection back before the next one.
			err = poolReturn(ctx, conn)
		}
		d.countOutcome(w, ended, out, err, lat)
		if err != nil {
			return err
		}
	}
	return nil
}

// insertBatch is an ordinary insert commit: one new data file in table.
func (d *driver) insertBatch(base snapshot, st *stats, table, rows, size int64, path, tag string) (string, Landed) {
	s := base.id + 1
	ts, hasStats := st.tables[table]
	start := ts.nextRowID
	f := fileSpec{
		id: base.nextFileID, table: table, begin: s, path: path, records: rows,
		size: rows*int64(8*len(d.cols)) + 400, footer: int64(200 + 40*len(d.cols)),
		rowIDStart: start, hasStart: true,
		rowIDs: []Span{{start, start + rows}}, statsColumn: d.cols,
	}
	if size > 0 {
		f.size = size
	}
	w := &stmtBuf{b: make([]byte, 0, 4096)}
	appendSnapshot(w, d.q, s, base.schemaVersion, base.nextCatalogID, base.nextFileID+1)
	w.end()
	if hasStats {
		w.str("UPDATE ").str(d.q).str(".ducklake_table_stats SET record_count=").int(ts.records + rows).
			str(", file_size_bytes=").int(ts.size + f.size).str(", next_row_id=").int(start + rows).
			str(" WHERE table_id=").int(table).end()
		for _, c := range d.cols {
			lo, hi := c.value(start), c.value(start+rows-1)
			if old, ok := st.cols[[2]int64{table, c.id}]; ok {
				if c.less(old[0], lo) {
					lo = old[0]
				}
				if c.less(hi, old[1]) {
					hi = old[1]
				}
			}
			w.str("UPDATE ").str(d.q).str(".ducklake_table_column_stats SET contains_null=CAST(false AS BOOLEAN), contains_nan=CAST(NULL AS BOOLEAN), min_value=").
				lit(lo).str(", max_value=").lit(hi).str(", extra_stats=NULL WHERE table_id=").int(table).str(" AND column_id=").int(c.id).end()
		}
	} else {
		w.str("INSERT INTO ").str(d.q).str(".ducklake_table_stats VALUES (").int(table).str(", ").int(rows).str(", ").
			int(start + rows).str(", ").int(f.size).str(")").end()
		w.str("INSERT INTO ").str(d.q).str(".ducklake_table_column_stats VALUES ")
		for i, c := range d.cols {
			if i > 0 {
				w.str(",")
			}
			w.str("(").int(table).str(", ").int(c.id).str(", false, NULL, ").lit(c.value(start)).str(", ").
				lit(c.value(start + rows - 1)).str(", NULL)")
		}
		w.end()
	}
	f.appendInsert(w, d.q)
	f.appendStats(w.end(), d.q)
	appendChanges(w.end(), d.q, s, changes.Set{{Kind: changes.InsertedIntoTable, ID: table}}.String(), tag)
	w.end()
	return w.String(), Landed{Snapshot: s, Table: table, File: f.id, Path: d.localPath(table, path), Begin: s, RowIDs: f.rowIDs, Records: rows}
}

// liveFile is one current data file as the compactor's candidate scan saw it.
type liveFile struct {
	id, table, begin, records, size int64
	rowIDStart                      int64
	hasStart                        bool
	partialMax                      int64
	hasPartial                      bool
	path                            string
}

func (d *driver) compactor(ctx context.Context, conn *pgconn.PgConn, stop <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, 1<<32))
	for round := 0; ; round++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.CompactPause):
		}
		table := d.tables[round%len(d.tables)]
		base, err := d.begin(ctx, conn)
		if err != nil {
			return err
		}
		sources, err := d.mergeCandidates(ctx, conn, table)
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return err
		}
		if len(sources) < 2 {
			// Nothing to do: DuckLake commits the empty metadata transaction.
			if err := exec(ctx, conn, "COMMIT"); err != nil {
				return fmt.Errorf("empty compaction commit: %w", err)
			}
			if err := poolReturn(ctx, conn); err != nil {
				return err
			}
			continue
		}
		tag := fmt.Sprintf("compactor-%d", round)
		m, err := d.planMerge(table, sources)
		if err == nil {
			err = d.readPaths(ctx, conn)
		}
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return err
		}
		p := plan{kind: "merge", tag: tag, writer: -1, nth: round, table: table, paths: true,
			mine:  changes.Set{{Kind: changes.MergeAdjacent, ID: table}},
			build: func(base snapshot, _ *stats) (string, Landed) { return d.mergeBatch(base, table, sources, m, tag) },
		}
		out, err := d.commitTail(ctx, conn, rng, base, nil, p)
		if err == nil {
			err = poolReturn(ctx, conn)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		d.mu.Lock()
		d.mu.res.MergeRetries += out.retries
		switch {
		case out.failed:
			d.mu.res.MergeFailed++
			if out.conflict {
				d.mu.res.MergeConflicts++
			}
		default:
			d.mu.res.Merges++
		}
		d.mu.Unlock()
	}
}

// mergeCandidates scans ducklake_data_file (DuckDB streams the whole table)
// and picks a run of up to MergeFiles small live files of table, ordered as
// DuckLake orders them (begin_snapshot, row_id_start, data_file_id). Unless
// merged files embed their row ids, the run must be row-id adjacent.
func (d *driver) mergeCandidates(ctx context.Context, conn *pgconn.PgConn, table int64) ([]liveFile, error) {
	rows, err := copyOut(ctx, conn, localScan(d.q, "ducklake_data_file", "data_file_id", "table_id", "begin_snapshot", "end_snapshot",
		"path", "path_is_relative", "record_count", "file_size_bytes", "row_id_start", "partial_max"))
	if err != nil {
		return nil, fmt.Errorf("compaction candidates: %w", err)
	}
	var files []liveFile
	for _, r := range rows {
		if len(r) < 10 {
			return nil, fmt.Errorf("compaction candidates: %w", errCopyFormat)
		}
		v, err := int8s(r, 3)
		if err != nil {
			return nil, fmt.Errorf("compaction candidates: %w", err)
		}
		if v[1] != table || r[3] != nil {
			continue
		}
		f := liveFile{id: v[0], table: v[1], begin: v[2], path: string(r[4])}
		var errs [4]error
		f.records, _, errs[0] = int8(r[6])
		f.size, _, errs[1] = int8(r[7])
		f.rowIDStart, f.hasStart, errs[2] = int8(r[8])
		f.partialMax, f.hasPartial, errs[3] = int8(r[9])
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("compaction candidates: %w", err)
		}
		if f.records >= d.cfg.MergeMaxRows {
			continue
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.begin != b.begin {
			return a.begin < b.begin
		}
		if a.rowIDStart != b.rowIDStart {
			return a.rowIDStart < b.rowIDStart
		}
		return a.id < b.id
	})
	var best []liveFile
	for i := 0; i < len(files) && len(best) < 2; i++ {
		run := []liveFile{files[i]}
		for j := i + 1; j < len(files) && len(run) < d.cfg.MergeFiles; j++ {
			prev := run[len(run)-1]
			if !d.cfg.MergeEmbedsIDs && (!prev.hasStart || !files[j].hasStart || prev.rowIDStart+prev.records != files[j].rowIDStart) {
				break
			}
			run = append(run, files[j])
		}
		if len(run) >= 2 {
			best = run
		}
	}
	return best, nil
}

// mergeOut is the merged file a compaction registers; it depends only on
// the sources, so it is computed (and, with DataDir, written) once before
// the commit and reused by every attempt.
type mergeOut struct {
	path       string // relative to the table
	records    int64
	size       int64
	partialMax int64
	spans      []Span
}

func (d *driver) planMerge(table int64, sources []liveFile) (mergeOut, error) {
	m := mergeOut{path: "ducklake-" + uuidString(newUUID()) + ".parquet", partialMax: math.MinInt64}
	d.mu.Lock()
	for _, src := range sources {
		m.records += src.records
		m.size += src.size
		pm := src.begin
		if src.hasPartial {
			pm = src.partialMax
		}
		m.partialMax = max(m.partialMax, pm)
		if src.hasStart {
			m.spans = append(m.spans, Span{src.rowIDStart, src.rowIDStart + src.records})
		} else {
			m.spans = append(m.spans, d.mu.files[src.id].RowIDs...)
		}
	}
	d.mu.Unlock()
	m.spans = normalize(m.spans)
	m.size = m.size * 9 / 10
	if d.cfg.DataDir != "" {
		var embed []int64
		if d.cfg.MergeEmbedsIDs {
			embed = expandSpans(m.spans)
		}
		size, err := writeDataFile(d.localPath(table, m.path), d.cols, m.records, embed)
		if err != nil {
			return mergeOut{}, err
		}
		m.size = size
	}
	return m, nil
}

// mergeBatch is a merge_adjacent commit (RFC 0008; §3.10): hard-delete the
// sources and everything keyed by their ids, schedule their paths, insert
// the merged file backdated to the first source's begin_snapshot.
func (d *driver) mergeBatch(base snapshot, table int64, sources []liveFile, m mergeOut, tag string) (string, Landed) {
	s := base.id + 1
	ids := make([]int64, len(sources))
	for i, src := range sources {
		ids[i] = src.id
	}
	f := fileSpec{
		id: base.nextFileID, table: table, begin: sources[0].begin, path: m.path, records: m.records,
		size: m.size, footer: int64(200 + 40*len(d.cols)),
		partialMax: m.partialMax, hasPartial: len(sources) > 1,
		rowIDs: m.spans, statsColumn: d.cols,
	}
	if !d.cfg.MergeEmbedsIDs {
		f.rowIDStart, f.hasStart = sources[0].rowIDStart, sources[0].hasStart
	}
	list := inList(ids)
	var dels []string
	for _, t := range []string{"ducklake_data_file", "ducklake_file_column_stats", "ducklake_delete_file", "ducklake_file_partition_value", "ducklake_file_variant_stats"} {
		dels = append(dels, fmt.Sprintf("DELETE FROM %s.%s\nWHERE data_file_id IN (%s)", d.q, t, list))
	}
	var sched []string
	for _, src := range sources {
		sched = append(sched, fmt.Sprintf("(%d, %s, true, NOW())", src.id, quoteLiteral("main/"+d.tableDir(table)+src.path)))
	}
	batch := snapshotSQL(d.q, s, base.schemaVersion, base.nextCatalogID, base.nextFileID+1) + ";\n" +
		strings.Join(dels, ";\n\n") + ";\n" +
		fmt.Sprintf("INSERT INTO %s.ducklake_files_scheduled_for_deletion VALUES %s", d.q, strings.Join(sched, ", ")) + ";" +
		joinBatch([]string{f.insertSQL(d.q), f.statsSQL(d.q),
			changesSQL(d.q, s, changes.Set{{Kind: changes.MergeAdjacent, ID: table}}.String(), tag)})
	return batch, Landed{Snapshot: s, Table: table, File: f.id, Path: d.localPath(table, m.path), Sources: ids, Begin: f.begin, RowIDs: m.spans, Records: m.records}
}

// tableDir is the table's path relative to schema main ("t<i>/").
func (d *driver) tableDir(table int64) string {
	for i, id := range d.tables {
		if id == table {
			return fmt.Sprintf("t%d/", i+1)
		}
	}
	return fmt.Sprintf("t%d/", table)
}

// localPath is where a table's data file lives under DataDir (or, without
// DataDir, the catalog's relative path).
func (d *driver) localPath(table int64, file string) string {
	if d.cfg.DataDir == "" {
		return file
	}
	return filepath.Join(d.cfg.DataDir, "main", d.tableDir(table), file)
}

// normalize sorts spans and coalesces touching ones.
func normalize(in []Span) []Span {
	s := append([]Span(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i].Lo < s[j].Lo })
	var out []Span
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1].Hi == x.Lo {
			out[n-1].Hi = x.Hi
			continue
		}
		out = append(out, x)
	}
	return out
}
