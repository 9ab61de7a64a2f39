package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/moraine-db/moraine/internal/commit/changes"
)

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
