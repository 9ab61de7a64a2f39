package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// The statement texts below follow testdata/shapes/inventory.md (what
// DuckLake 1.1-dev1 sends a PostgreSQL catalog) and
// ducklake-catalog-protocol.md §3.6/§3.7/§3.10. The commit batch is one
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

func nullOr(v int64, ok bool) string {
	if !ok {
		return "NULL"
	}
	return strconv.FormatInt(v, 10)
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
	return fmt.Sprintf("v%012d", r)
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

func (f fileSpec) insertSQL(q string) string {
	return fmt.Sprintf("INSERT INTO %s.ducklake_data_file VALUES (%d, %d, %d, NULL, NULL, %s, true, 'parquet', %d, %d, %d, %s, NULL, NULL, NULL, %s, 1)",
		q, f.id, f.table, f.begin, quoteLiteral(f.path), f.records, f.size, f.footer,
		nullOr(f.rowIDStart, f.hasStart), nullOr(f.partialMax, f.hasPartial))
}

// statsSQL is the file's ducklake_file_column_stats insert: one row per
// column, min/max derived from the row ids it holds.
func (f fileSpec) statsSQL(q string) string {
	lo, hi := f.rowIDs[0].Lo, f.rowIDs[len(f.rowIDs)-1].Hi-1
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s.ducklake_file_column_stats VALUES ", q)
	for i, c := range f.statsColumn {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d, %d, %d, %d, %d, 0, %s, %s, NULL, NULL)", f.id, f.table, c.id,
			f.records*8/int64(len(f.statsColumn))+16, f.records, quoteLiteral(c.value(lo)), quoteLiteral(c.value(hi)))
	}
	return b.String()
}

func snapshotSQL(q string, id, schemaVersion, nextCatalogID, nextFileID int64) string {
	return fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, id, schemaVersion, nextCatalogID, nextFileID)
}

func changesSQL(q string, id int64, changes, message string) string {
	return fmt.Sprintf("INSERT INTO %s.ducklake_snapshot_changes VALUES (%d, %s, NULL, %s, NULL)", q, id, quoteLiteral(changes), quoteLiteral(message))
}

func inList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

func joinBatch(stmts []string) string { return strings.Join(stmts, ";") + ";" }
