package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moraine-db/moraine/internal/commit/changes"
)

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
