package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// The statement texts below follow testdata/shapes/inventory.md (what
// DuckLake 1.1-dev1 sends a PostgreSQL catalog) and
// docs/reference/ducklake-catalog-protocol.md §3.6/§3.7/§3.10. The commit batch is one
// string of `;`-joined statements sent as a single simple Query, beginning
// with the snapshot insert so that a lost race fails on its first statement.

// latestSnapshotInner is the postgres_query template DuckLake uses for the
// latest snapshot; the server first sees it as Parse/Describe, then wrapped
// in a binary COPY.
func latestSnapshotInner(q string) string {
	return "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id\n\t\t FROM " + q +
		".ducklake_snapshot WHERE snapshot_id = (\n\t\t     SELECT MAX(snapshot_id) FROM " + q +
		".ducklake_snapshot\n\t\t )"
}

func latestSnapshotCopy(q string) string {
	return `COPY (SELECT "snapshot_id", "schema_version", "next_catalog_id", "next_file_id" FROM (` +
		latestSnapshotInner(q) + `) AS __unnamed_subquery ) TO STDOUT (FORMAT "binary");`
}

// localScan is how DuckDB's postgres extension reads a whole catalog table
// (filter pushdown is off on DuckLake's metadata connection).
func localScan(q, table string, cols ...string) string {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quoteIdent(c)
	}
	return "COPY (SELECT " + strings.Join(quoted, ", ") + " FROM " + q + "." + quoteIdent(table) +
		` ) TO STDOUT (FORMAT "binary");`
}

// column describes one user column of a workload table. Its values are a
// pure function of the row id, so file and table statistics can be derived
// from row-id ranges alone.
type column struct {
	id      int64
	name    string
	typ     string // DuckLake type name
	integer bool
}

func tableColumns(n int) []column {
	cols := make([]column, n)
	for i := range cols {
		id := int64(i + 1)
		if id%2 == 1 {
			cols[i] = column{id: id, name: fmt.Sprintf("c%d", id), typ: "int64", integer: true}
		} else {
			cols[i] = column{id: id, name: fmt.Sprintf("c%d", id), typ: "varchar"}
		}
	}
	return cols
}

// value renders column c's value for row id r as DuckLake writes stats text.
func (c column) value(r int64) string {
	if c.integer {
		return strconv.FormatInt(r+c.id, 10)
	}
	return "v" + zeroPad(r, 12)
}

// zeroPad renders v (non-negative) with at least width digits, as %0*d.
func zeroPad(v int64, width int) string {
	d := strconv.FormatInt(v, 10)
	if v < 0 || len(d) >= width {
		return d
	}
	return strings.Repeat("0", width-len(d)) + d
}

// less orders two stats values of column c.
func (c column) less(a, b string) bool {
	if c.integer {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return x < y
	}
	return a < b
}

// Span is a half-open row-id range [lo, hi).
type Span struct{ Lo, Hi int64 }

// fileSpec is one data file a commit registers.
type fileSpec struct {
	id          int64
	table       int64
	begin       int64 // begin_snapshot
	path        string
	records     int64
	size        int64
	footer      int64
	rowIDStart  int64
	hasStart    bool
	partialMax  int64
	hasPartial  bool
	rowIDs      []Span // the row ids the file holds, ascending
	statsColumn []column
}

// stmtBuf builds statement texts without fmt: the commit batch is built on
// the commit chain (between the reads and the batch), so the driver's own
// formatting would otherwise count against the system it measures.
type stmtBuf struct{ b []byte }

func (w *stmtBuf) str(s string) *stmtBuf { w.b = append(w.b, s...); return w }
func (w *stmtBuf) int(v int64) *stmtBuf  { w.b = strconv.AppendInt(w.b, v, 10); return w }

// lit appends s as a quoted SQL string literal (quoteLiteral).
func (w *stmtBuf) lit(s string) *stmtBuf {
	w.b = append(w.b, '\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			w.b = append(w.b, '\'')
		}
		w.b = append(w.b, s[i])
	}
	w.b = append(w.b, '\'')
	return w
}

// intOrNull appends v, or NULL when !ok.
func (w *stmtBuf) intOrNull(v int64, ok bool) *stmtBuf {
	if !ok {
		return w.str("NULL")
	}
	return w.int(v)
}

// end closes a statement of a batch (joinBatch's separator).
func (w *stmtBuf) end() *stmtBuf { w.b = append(w.b, ';'); return w }

func (w *stmtBuf) String() string { return string(w.b) }

func (f fileSpec) insertSQL(q string) string {
	var w stmtBuf
	f.appendInsert(&w, q)
	return w.String()
}

func (f fileSpec) appendInsert(w *stmtBuf, q string) {
	w.str("INSERT INTO ").str(q).str(".ducklake_data_file VALUES (").int(f.id).str(", ").int(f.table).str(", ").int(f.begin).
		str(", NULL, NULL, ").lit(f.path).str(", true, 'parquet', ").int(f.records).str(", ").int(f.size).str(", ").int(f.footer).
		str(", ").intOrNull(f.rowIDStart, f.hasStart).str(", NULL, NULL, NULL, ").intOrNull(f.partialMax, f.hasPartial).str(", 1)")
}

// statsSQL is the file's ducklake_file_column_stats insert: one row per
// column, min/max derived from the row ids it holds.
func (f fileSpec) statsSQL(q string) string {
	var w stmtBuf
	f.appendStats(&w, q)
	return w.String()
}

func (f fileSpec) appendStats(w *stmtBuf, q string) {
	lo, hi := f.rowIDs[0].Lo, f.rowIDs[len(f.rowIDs)-1].Hi-1
	w.str("INSERT INTO ").str(q).str(".ducklake_file_column_stats VALUES ")
	for i, c := range f.statsColumn {
		if i > 0 {
			w.str(",")
		}
		w.str("(").int(f.id).str(", ").int(f.table).str(", ").int(c.id).str(", ").
			int(f.records*8/int64(len(f.statsColumn)) + 16).str(", ").int(f.records).str(", 0, ").
			lit(c.value(lo)).str(", ").lit(c.value(hi)).str(", NULL, NULL)")
	}
}

func snapshotSQL(q string, id, schemaVersion, nextCatalogID, nextFileID int64) string {
	var w stmtBuf
	appendSnapshot(&w, q, id, schemaVersion, nextCatalogID, nextFileID)
	return w.String()
}

func appendSnapshot(w *stmtBuf, q string, id, schemaVersion, nextCatalogID, nextFileID int64) {
	w.str("INSERT INTO ").str(q).str(".ducklake_snapshot VALUES (").int(id).str(", NOW(), ").int(schemaVersion).
		str(", ").int(nextCatalogID).str(", ").int(nextFileID).str(")")
}

func changesSQL(q string, id int64, changes, message string) string {
	var w stmtBuf
	appendChanges(&w, q, id, changes, message)
	return w.String()
}

func appendChanges(w *stmtBuf, q string, id int64, changes, message string) {
	w.str("INSERT INTO ").str(q).str(".ducklake_snapshot_changes VALUES (").int(id).str(", ").lit(changes).
		str(", NULL, ").lit(message).str(", NULL)")
}

func inList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

func joinBatch(stmts []string) string { return strings.Join(stmts, ";") + ";" }
