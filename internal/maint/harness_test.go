// Package maint holds end-to-end tests of DuckLake's maintenance functions
// (merge_adjacent_files, rewrite_data_files, flush_inlined_data,
// expire_snapshots, cleanup_old_files) against an in-process moraine with
// RFC 0008's row-id hold on. Each test sends DuckLake's statement
// sequences (testdata/shapes/inventory.md, fixtures s04/s05) over a real
// pgconn connection, writes real Parquet files into a real data directory,
// reads the catalog back the way DuckDB does (full-table COPY … TO STDOUT
// binary scans, then DuckLake's visibility predicate in the client) and
// runs verify.Check over the persisted store after every step.
package maint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parquet-go/parquet-go"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
	"github.com/moraine-db/moraine/internal/verify"
	"github.com/moraine-db/moraine/internal/workload"
)

const (
	rowIDFieldID = 2147483540 // _ducklake_internal_row_id
	snapFieldID  = 2147483539 // _ducklake_internal_snapshot_id
	q            = `"public"`
)

// lake is one moraine (hold on) with a DuckLake catalog "lake" whose
// data path is a temporary directory, and a table m (id BIGINT) in it.
type lake struct {
	t     testing.TB
	ctx   context.Context
	st    *server.Stack
	conn  *pgconn.PgConn
	data  string // data path (no trailing slash)
	table int64  // table id of m
	// partition is m's partition_id once partitioned by identity(id).
	partition int64
}

func newLake(t testing.TB) *lake {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st, addr := startStack(t, ctx, commit.Options{Hold: &rowids.Checker{}})
	conn, err := pgconn.Connect(ctx, "postgres://moraine@"+addr+"/lake?sslmode=disable")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	l := &lake{t: t, ctx: ctx, st: st, conn: conn, data: t.TempDir()}
	if err := workload.Init(ctx, conn, "public", l.data+"/"); err != nil {
		t.Fatalf("init: %v", err)
	}
	// CREATE TABLE m (id BIGINT): DuckLake's create-table commit.
	l.commit(func(s snap) []string {
		l.table = s.nextCatalog
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, s.id+1, s.schemaVersion+1, s.nextCatalog+1, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_table VALUES (%d, 'a0a0a0a0-0000-4000-8000-000000000001', %d, NULL, 0, 'm', 'm/', true)", q, s.nextCatalog, s.id+1),
			fmt.Sprintf("INSERT INTO %s.ducklake_column VALUES (1, %d, NULL, %d, 1, 'id', 'int64', NULL, 'NULL', true, NULL, 'literal', 'duckdb')", q, s.id+1, s.nextCatalog),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, s.id+1, s.schemaVersion+1, s.nextCatalog),
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot_changes VALUES (%d, 'created_table:\"main\".\"m\"', NULL, NULL, NULL)", q, s.id+1),
		}
	})
	return l
}

// snap is the latest snapshot row, as DuckLake reads it at BEGIN.
type snap struct{ id, schemaVersion, nextCatalog, nextFile int64 }

func (l *lake) exec(sql string) error {
	_, err := l.conn.Exec(l.ctx, sql).ReadAll()
	return err
}

func (l *lake) must(sql string) {
	l.t.Helper()
	if err := l.exec(sql); err != nil {
		l.t.Fatalf("%s: %v", abbrev(sql), err)
	}
}

func abbrev(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// latest is DuckLake's snapshot query (inventory statement 30).
func (l *lake) latest() snap {
	l.t.Helper()
	res, err := l.conn.Exec(l.ctx, fmt.Sprintf("SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM %s.ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM %s.ducklake_snapshot)", q, q)).ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
		l.t.Fatalf("latest snapshot: %v %v", err, res)
	}
	r := res[0].Rows[0]
	var s snap
	for i, p := range []*int64{&s.id, &s.schemaVersion, &s.nextCatalog, &s.nextFile} {
		if _, err := fmt.Sscan(string(r[i]), p); err != nil {
			l.t.Fatalf("latest snapshot column %d: %v", i, err)
		}
	}
	return s
}

// tryCommit runs one DuckLake commit: BEGIN, the snapshot read, the batch
// (one multi-statement Query, as DuckLake sends it), COMMIT.
func (l *lake) tryCommit(build func(s snap) []string) error {
	l.t.Helper()
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	s := l.latest()
	batch := strings.Join(build(s), ";") + ";"
	if err := l.exec(batch); err != nil {
		l.must("ROLLBACK")
		return err
	}
	if err := l.exec("COMMIT"); err != nil {
		_ = l.exec("ROLLBACK")
		return err
	}
	return nil
}

func (l *lake) commit(build func(s snap) []string) {
	l.t.Helper()
	if err := l.tryCommit(build); err != nil {
		l.t.Fatalf("commit: %v", err)
	}
}

// verify runs moraine verify's checker over the persisted store.
func (l *lake) verify(step string) {
	l.t.Helper()
	sn, err := l.st.KV.Snapshot()
	if err != nil {
		l.t.Fatal(err)
	}
	defer sn.Close()
	vs, err := verify.CheckStore(l.ctx, sn)
	if err != nil {
		l.t.Fatalf("%s: verify: %v", step, err)
	}
	for _, v := range vs {
		l.t.Errorf("%s: verify: %s", step, v)
	}
	if len(vs) > 0 {
		l.t.FailNow()
	}
}

// scan is DuckDB's full-table read of a metadata table (COPY (SELECT
// "c1", … FROM "public"."t" ) TO STDOUT (FORMAT "binary")), decoded.
func (l *lake) scan(table string, cols ...string) [][][]byte {
	l.t.Helper()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		if c == "ctid" {
			quoted[i] = c
		} else {
			quoted[i] = `"` + c + `"`
		}
	}
	var buf strings.Builder
	_, err := l.conn.CopyTo(l.ctx, &buf, fmt.Sprintf(`COPY (SELECT %s FROM %s."%s" ) TO STDOUT (FORMAT "binary");`, strings.Join(quoted, ", "), q, table))
	if err != nil {
		l.t.Fatalf("scan %s: %v", table, err)
	}
	rows, err := decodeCopy([]byte(buf.String()))
	if err != nil {
		l.t.Fatalf("scan %s: %v", table, err)
	}
	return rows
}

var errCopy = errors.New("malformed binary COPY")

func decodeCopy(b []byte) ([][][]byte, error) {
	const sig = "PGCOPY\n\xff\r\n\x00"
	if len(b) < 19 || string(b[:11]) != sig {
		return nil, errCopy
	}
	ext := int(binary.BigEndian.Uint32(b[15:19]))
	b = b[19+ext:]
	var out [][][]byte
	for {
		if len(b) < 2 {
			return nil, errCopy
		}
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if n == -1 {
			return out, nil
		}
		row := make([][]byte, n)
		for i := range row {
			if len(b) < 4 {
				return nil, errCopy
			}
			ln := int32(binary.BigEndian.Uint32(b))
			b = b[4:]
			if ln < 0 {
				continue
			}
			if int(ln) > len(b) {
				return nil, errCopy
			}
			row[i] = b[:ln]
			b = b[ln:]
		}
		out = append(out, row)
	}
}

// i8 decodes a binary int8; ok false for NULL.
func i8(b []byte) (int64, bool) {
	if b == nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

func tid(b []byte) string {
	return fmt.Sprintf("'(%d,%d)'", binary.BigEndian.Uint32(b), binary.BigEndian.Uint16(b[4:]))
}

func visibleAt(s, begin int64, end []byte) bool {
	e, ended := i8(end)
	return s >= begin && (!ended || s < e)
}

// catFile is a data file as the catalog serves it.
type catFile struct {
	id, begin  int64
	end        []byte
	path       string
	rowIDStart int64
	hasStart   bool
	records    int64
}

func (l *lake) dataFiles() []catFile {
	var out []catFile
	for _, r := range l.scan("ducklake_data_file", "data_file_id", "table_id", "begin_snapshot", "end_snapshot", "path", "row_id_start", "record_count") {
		if t, _ := i8(r[1]); t != l.table {
			continue
		}
		f := catFile{path: string(r[4]), end: r[3]}
		f.id, _ = i8(r[0])
		f.begin, _ = i8(r[2])
		f.rowIDStart, f.hasStart = i8(r[5])
		f.records, _ = i8(r[6])
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

type catDelete struct {
	id, dataFile, begin int64
	end                 []byte
	path                string
}

func (l *lake) deleteFiles() []catDelete {
	var out []catDelete
	for _, r := range l.scan("ducklake_delete_file", "delete_file_id", "table_id", "begin_snapshot", "end_snapshot", "data_file_id", "path") {
		if t, _ := i8(r[1]); t != l.table {
			continue
		}
		d := catDelete{end: r[3], path: string(r[5])}
		d.id, _ = i8(r[0])
		d.begin, _ = i8(r[2])
		d.dataFile, _ = i8(r[4])
		out = append(out, d)
	}
	return out
}

func (l *lake) live() (files []catFile, deletes []catDelete) {
	s := l.latest().id
	for _, f := range l.dataFiles() {
		if visibleAt(s, f.begin, f.end) {
			files = append(files, f)
		}
	}
	for _, d := range l.deleteFiles() {
		if visibleAt(s, d.begin, d.end) {
			deletes = append(deletes, d)
		}
	}
	return files, deletes
}

// local is the file's path on disk: data path, schema "main/", table "m/";
// or p itself when it is absolute (a branch's view of a file it inherited).
func (l *lake) local(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.data, "main", "m", p)
}

// rows answers SELECT id, rowid FROM m AT (VERSION => s) the way DuckLake
// does: the files and delete files visible at s, each file's rows whose
// (embedded or begin) snapshot is ≤ s, minus deleted positions. It returns
// row id → id.
func (l *lake) rows(s int64) map[int64]int64 {
	l.t.Helper()
	dels := map[int64]map[int64]bool{}
	for _, d := range l.deleteFiles() {
		if !visibleAt(s, d.begin, d.end) {
			continue
		}
		if dels[d.dataFile] == nil {
			dels[d.dataFile] = map[int64]bool{}
		}
		for _, p := range readDeletes(l.t, l.local(d.path)) {
			// A per-row delete snapshot (flush output) applies from it on.
			if !p.hasSnap || p.snap <= s {
				dels[d.dataFile][p.pos] = true
			}
		}
	}
	out := map[int64]int64{}
	for _, name := range l.inlinedTables() {
		for _, r := range l.scan(name, "_ducklake_begin_snapshot", "_ducklake_end_snapshot", "id", "_ducklake_row_id") {
			begin, _ := i8(r[0])
			if !visibleAt(s, begin, r[1]) {
				continue
			}
			id, _ := i8(r[2])
			rid, _ := i8(r[3])
			if _, dup := out[rid]; dup {
				l.t.Fatalf("snapshot %d: inlined row id %d appears twice", s, rid)
			}
			out[rid] = id
		}
	}
	for _, f := range l.dataFiles() {
		if !visibleAt(s, f.begin, f.end) {
			continue
		}
		pf := readData(l.t, l.local(f.path))
		for pos, r := range pf {
			if dels[f.id][int64(pos)] {
				continue
			}
			snapID := f.begin
			if r.hasSnap {
				snapID = r.snap
			}
			if snapID > s {
				continue
			}
			rid := f.rowIDStart + int64(pos)
			if r.hasRowID {
				rid = r.rowID
			} else if !f.hasStart {
				l.t.Fatalf("file %d has neither row_id_start nor embedded row ids", f.id)
			}
			if _, dup := out[rid]; dup {
				l.t.Fatalf("snapshot %d: row id %d appears twice", s, rid)
			}
			out[rid] = r.id
		}
	}
	return out
}

// dataRow is one row of a data file.
type dataRow struct {
	id                int64
	rowID, snap       int64
	hasRowID, hasSnap bool
}

// writeData writes a data file as DuckLake does: column id, and the
// embedded row-id / snapshot-id columns (by field id) when given.
func writeData(t testing.TB, path string, rows []dataRow, embedRowID, embedSnap bool) int64 {
	t.Helper()
	group := parquet.Group{"id": parquet.Optional(parquet.Int(64))}
	if embedRowID {
		group["_ducklake_internal_row_id"] = parquet.FieldID(parquet.Optional(parquet.Int(64)), rowIDFieldID)
	}
	if embedSnap {
		group["_ducklake_internal_snapshot_id"] = parquet.FieldID(parquet.Optional(parquet.Int(64)), snapFieldID)
	}
	schema := parquet.NewSchema("duckdb_schema", group)
	idx := func(name string) int {
		leaf, ok := schema.Lookup(name)
		if !ok {
			return -1
		}
		return leaf.ColumnIndex
	}
	var prows []parquet.Row
	for _, r := range rows {
		row := make(parquet.Row, len(group))
		row[idx("id")] = parquet.Int64Value(r.id).Level(0, 1, idx("id"))
		if embedRowID {
			i := idx("_ducklake_internal_row_id")
			row[i] = parquet.Int64Value(r.rowID).Level(0, 1, i)
		}
		if embedSnap {
			i := idx("_ducklake_internal_snapshot_id")
			row[i] = parquet.Int64Value(r.snap).Level(0, 1, i)
		}
		prows = append(prows, row)
	}
	return writeParquet(t, path, schema, prows)
}

func writeParquet(t testing.TB, path string, schema *parquet.Schema, rows []parquet.Row) int64 {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(f, schema)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// writeDeletes writes a Parquet delete file (file_path, pos).
func writeDeletes(t testing.TB, path, dataPath string, positions []int64) int64 {
	t.Helper()
	schema := parquet.NewSchema("duckdb_schema", parquet.Group{
		"file_path": parquet.String(),
		"pos":       parquet.Int(64),
	})
	fp, _ := schema.Lookup("file_path")
	pp, _ := schema.Lookup("pos")
	var rows []parquet.Row
	for _, p := range positions {
		row := make(parquet.Row, 2)
		row[fp.ColumnIndex] = parquet.ByteArrayValue([]byte(dataPath)).Level(0, 0, fp.ColumnIndex)
		row[pp.ColumnIndex] = parquet.Int64Value(p).Level(0, 0, pp.ColumnIndex)
		rows = append(rows, row)
	}
	return writeParquet(t, path, schema, rows)
}

func openParquet(t testing.TB, path string) (*parquet.File, []parquet.Row) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	// Every row is read here; the schema and metadata the caller uses
	// next are in memory.
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, pf.NumRows())
	for n := 0; n < len(rows); {
		k, err := r.ReadRows(rows[n:])
		n += k
		if err != nil && n < len(rows) {
			t.Fatalf("read rows %s: %v", path, err)
		}
		if k == 0 && n < len(rows) {
			t.Fatalf("read rows %s: short", path)
		}
	}
	return pf, rows
}

func readData(t testing.TB, path string) []dataRow {
	pf, rows := openParquet(t, path)
	col := func(name string) int {
		if leaf, ok := pf.Schema().Lookup(name); ok {
			return leaf.ColumnIndex
		}
		return -1
	}
	ic, rc, sc := col("id"), col("_ducklake_internal_row_id"), col("_ducklake_internal_snapshot_id")
	out := make([]dataRow, len(rows))
	for i, r := range rows {
		for _, v := range r {
			switch v.Column() {
			case ic:
				out[i].id = v.Int64()
			case rc:
				out[i].rowID, out[i].hasRowID = v.Int64(), true
			case sc:
				out[i].snap, out[i].hasSnap = v.Int64(), true
			}
		}
	}
	return out
}

type deletedPos struct {
	pos, snap int64
	hasSnap   bool
}

func readDeletes(t testing.TB, path string) []deletedPos {
	pf, rows := openParquet(t, path)
	leaf, _ := pf.Schema().Lookup("pos")
	sc := -1
	if sl, ok := pf.Schema().Lookup("_ducklake_internal_snapshot_id"); ok {
		sc = sl.ColumnIndex
	}
	var out []deletedPos
	for _, r := range rows {
		var d deletedPos
		for _, v := range r {
			switch v.Column() {
			case leaf.ColumnIndex:
				d.pos = v.Int64()
			case sc:
				d.snap, d.hasSnap = v.Int64(), true
			}
		}
		out = append(out, d)
	}
	return out
}

// writeDeletesAt writes a flush's delete file: (file_path, pos,
// _ducklake_internal_snapshot_id) with per-row delete snapshots.
func writeDeletesAt(t testing.TB, path, dataPath string, dels []deletedPos) int64 {
	t.Helper()
	schema := parquet.NewSchema("duckdb_schema", parquet.Group{
		"file_path":                      parquet.String(),
		"pos":                            parquet.Int(64),
		"_ducklake_internal_snapshot_id": parquet.FieldID(parquet.Int(64), snapFieldID),
	})
	fp, _ := schema.Lookup("file_path")
	pp, _ := schema.Lookup("pos")
	sp, _ := schema.Lookup("_ducklake_internal_snapshot_id")
	var rows []parquet.Row
	for _, d := range dels {
		row := make(parquet.Row, 3)
		row[fp.ColumnIndex] = parquet.ByteArrayValue([]byte(dataPath)).Level(0, 0, fp.ColumnIndex)
		row[pp.ColumnIndex] = parquet.Int64Value(d.pos).Level(0, 0, pp.ColumnIndex)
		row[sp.ColumnIndex] = parquet.Int64Value(d.snap).Level(0, 0, sp.ColumnIndex)
		rows = append(rows, row)
	}
	return writeParquet(t, path, schema, rows)
}

// inlinedTables lists m's registered inlined data tables, oldest schema
// version first.
func (l *lake) inlinedTables() []string {
	type reg struct {
		name string
		ver  int64
	}
	var regs []reg
	for _, r := range l.scan("ducklake_inlined_data_tables", "table_id", "table_name", "schema_version") {
		if t, _ := i8(r[0]); t == l.table {
			v, _ := i8(r[2])
			regs = append(regs, reg{string(r[1]), v})
		}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].ver < regs[j].ver })
	out := make([]string, len(regs))
	for i, r := range regs {
		out[i] = r.name
	}
	return out
}

// tableStats reads m's ducklake_table_stats row (record_count,
// next_row_id, file_size_bytes); ok false before the first insert.
func (l *lake) tableStats() (records, nextRowID, size int64, ok bool) {
	for _, r := range l.scan("ducklake_table_stats", "table_id", "record_count", "next_row_id", "file_size_bytes") {
		if t, _ := i8(r[0]); t == l.table {
			records, _ = i8(r[1])
			nextRowID, _ = i8(r[2])
			size, _ = i8(r[3])
			return records, nextRowID, size, true
		}
	}
	return 0, 0, 0, false
}

func nullOr(v int64, ok bool) string {
	if !ok {
		return "NULL"
	}
	return fmt.Sprint(v)
}

// fileSQL is DuckLake's data-file and file-column-stats inserts.
func (l *lake) fileSQL(id, begin int64, path string, rows []dataRow, size int64, rowIDStart int64, hasStart bool, partialMax int64, hasPartial bool) []string {
	lo, hi := rows[0].id, rows[0].id
	for _, r := range rows {
		lo, hi = min(lo, r.id), max(hi, r.id)
	}
	out := []string{
		fmt.Sprintf("INSERT INTO %s.ducklake_data_file VALUES (%d, %d, %d, NULL, NULL, '%s', true, 'parquet', %d, %d, 200, %s, %s, NULL, NULL, %s, 1)",
			q, id, l.table, begin, path, len(rows), size, nullOr(rowIDStart, hasStart), nullOr(l.partition, l.partition > 0), nullOr(partialMax, hasPartial)),
		fmt.Sprintf("INSERT INTO %s.ducklake_file_column_stats VALUES (%d, %d, 1, %d, %d, 0, '%d', '%d', NULL, NULL)", q, id, l.table, 8*len(rows), len(rows), lo, hi),
	}
	if l.partition > 0 {
		// Identity partitioning on id: every row of the file has one value.
		out = append(out, fmt.Sprintf("INSERT INTO %s.ducklake_file_partition_value VALUES (%d, %d, 0, '%d')", q, id, l.table, rows[0].id))
	}
	return out
}

// statsSQL updates (or creates) m's table stats after adding records rows.
func (l *lake) statsSQL(records, nextRowID, size int64, had bool) []string {
	if !had {
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_table_stats VALUES (%d, %d, %d, %d)", q, l.table, records, nextRowID, size),
			fmt.Sprintf("INSERT INTO %s.ducklake_table_column_stats VALUES (%d, 1, false, NULL, NULL, NULL, NULL)", q, l.table),
		}
	}
	return []string{fmt.Sprintf("UPDATE %s.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d", q, records, size, nextRowID, l.table)}
}

func changesSQL(s int64, changes string) string {
	return fmt.Sprintf("INSERT INTO %s.ducklake_snapshot_changes VALUES (%d, '%s', NULL, NULL, NULL)", q, s, strings.ReplaceAll(changes, "'", "''"))
}

func snapshotSQL(s snap, nextFile int64) string {
	return fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, s.id+1, s.schemaVersion, s.nextCatalog, nextFile)
}

// insert commits INSERT INTO m of ids (one new file, ids consecutive row
// ids from next_row_id) and returns the new snapshot and file id.
func (l *lake) insert(ids ...int64) (snapshot, fileID int64) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		records, next, size, had := l.tableStats()
		fileID, snapshot = s.nextFile, s.id+1
		path := fmt.Sprintf("ducklake-ins-%d.parquet", fileID)
		rows := make([]dataRow, len(ids))
		for i, id := range ids {
			rows[i] = dataRow{id: id}
		}
		n := writeData(l.t, l.local(path), rows, false, false)
		stmts := []string{snapshotSQL(s, s.nextFile+1)}
		stmts = append(stmts, l.statsSQL(records+int64(len(ids)), next+int64(len(ids)), size+n, had)...)
		stmts = append(stmts, l.fileSQL(fileID, snapshot, path, rows, n, next, true, 0, false)...)
		return append(stmts, changesSQL(snapshot, fmt.Sprintf("inserted_into_table:%d", l.table)))
	})
	return snapshot, fileID
}

// update commits UPDATE m SET id = newID WHERE rowid = rowID (a file row
// at pos of data file fileID): a delete file for the old row and a new
// file embedding the original row id, which still takes a row_id_start
// and advances next_row_id (docs/reference/ducklake-catalog-protocol.md §5).
func (l *lake) update(fileID int64, filePath string, pos, rowID, newID int64) (snapshot int64) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		records, next, size, _ := l.tableStats()
		snapshot = s.id + 1
		delID, newFile := s.nextFile, s.nextFile+1
		delPath := fmt.Sprintf("ducklake-del-%d.parquet", delID)
		dsize := writeDeletes(l.t, l.local(delPath), l.local(filePath), []int64{pos})
		path := fmt.Sprintf("ducklake-upd-%d.parquet", newFile)
		rows := []dataRow{{id: newID, rowID: rowID}}
		n := writeData(l.t, l.local(path), rows, true, false)
		stmts := []string{snapshotSQL(s, s.nextFile+2)}
		stmts = append(stmts, l.statsSQL(records+1, next+1, size+n, true)...)
		stmts = append(stmts, l.fileSQL(newFile, snapshot, path, rows, n, next, true, 0, false)...)
		stmts = append(stmts,
			fmt.Sprintf("INSERT INTO %s.ducklake_delete_file VALUES (%d, %d, %d, NULL, %d, '%s', true, 'parquet', 1, %d, 100, NULL, NULL, 1)", q, delID, l.table, snapshot, fileID, delPath, dsize),
			changesSQL(snapshot, fmt.Sprintf("inserted_into_table:%d,deleted_from_table:%d", l.table, l.table)))
		return stmts
	})
	return snapshot
}

// mergeSQL is merge_adjacent_files' commit batch (fixture s04, seq 5510):
// hard-delete the sources from the five per-file tables, schedule them
// (paths relative to the data path), register the output backdated to
// the first source's begin_snapshot.
func (l *lake) mergeSQL(s snap, sources []catFile, outPath string, rows []dataRow, size int64, rowIDStart int64, hasStart bool) []string {
	ids := make([]string, len(sources))
	var sched []string
	partial := int64(0)
	for i, f := range sources {
		ids[i] = fmt.Sprint(f.id)
		sched = append(sched, fmt.Sprintf("(%d, 'main/m/%s', true, NOW())", f.id, f.path))
		partial = max(partial, f.begin)
	}
	in := strings.Join(ids, ", ")
	stmts := []string{snapshotSQL(s, s.nextFile+1)}
	for _, t := range []string{"ducklake_data_file", "ducklake_file_column_stats", "ducklake_delete_file", "ducklake_file_partition_value", "ducklake_file_variant_stats"} {
		stmts = append(stmts, fmt.Sprintf("DELETE FROM %s.%s\nWHERE data_file_id IN (%s);\n", q, t, in))
	}
	stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_files_scheduled_for_deletion VALUES %s", q, strings.Join(sched, ", ")))
	stmts = append(stmts, l.fileSQL(s.nextFile, sources[0].begin, outPath, rows, size, rowIDStart, hasStart, partial, len(sources) > 1)...)
	return append(stmts, changesSQL(s.id+1, fmt.Sprintf("merge_adjacent:%d", l.table)))
}

// mergeRows builds the merged file's rows from the sources as DuckLake
// reads them: every row with its row id and snapshot id.
func (l *lake) mergeRows(sources []catFile) []dataRow {
	var out []dataRow
	for _, f := range sources {
		for pos, r := range readData(l.t, l.local(f.path)) {
			m := dataRow{id: r.id, rowID: f.rowIDStart + int64(pos), snap: f.begin, hasRowID: true, hasSnap: true}
			if r.hasRowID {
				m.rowID = r.rowID
			}
			if r.hasSnap {
				m.snap = r.snap
			}
			out = append(out, m)
		}
	}
	return out
}

// cleanup is ducklake_cleanup_old_files(cleanup_all => true) (fixture s04,
// seq 7435-7459): list the schedule, delete the files, then delete the
// schedule rows through DuckDB's ctid path.
func (l *lake) cleanup() []string {
	l.t.Helper()
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	var removed []string
	for _, r := range l.scan("ducklake_files_scheduled_for_deletion", "data_file_id", "path", "path_is_relative", "schedule_start") {
		p := string(r[1])
		if len(r[2]) == 1 && r[2][0] == 1 {
			p = filepath.Join(l.data, p)
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			l.t.Fatal(err)
		}
		removed = append(removed, p)
	}
	var ctids []string
	for _, r := range l.scan("ducklake_files_scheduled_for_deletion", "data_file_id", "ctid") {
		ctids = append(ctids, tid(r[1]))
	}
	if len(ctids) > 0 {
		l.must(fmt.Sprintf("DELETE FROM %s.ducklake_files_scheduled_for_deletion WHERE ctid IN (%s)", q, strings.Join(ctids, ",")))
	}
	l.must("COMMIT")
	return removed
}

func sameRows(t *testing.T, what string, got, want map[int64]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d\ngot  %v\nwant %v", what, len(got), len(want), got, want)
	}
	for rid, id := range want {
		if g, ok := got[rid]; !ok || g != id {
			t.Fatalf("%s: row id %d holds %d (present %v), want %d\ngot  %v\nwant %v", what, rid, g, ok, id, got, want)
		}
	}
}

// deleteRows commits DELETE FROM m for positions of data file f (no
// earlier delete file on it): one delete file, table stats untouched
// (fixture s04, seq 5826).
func (l *lake) deleteRows(f catFile, positions ...int64) (snapshot, deleteID int64) {
	l.t.Helper()
	l.commit(func(s snap) []string {
		snapshot, deleteID = s.id+1, s.nextFile
		path := fmt.Sprintf("ducklake-%d-delete.parquet", deleteID)
		n := writeDeletes(l.t, l.local(path), l.local(f.path), positions)
		return []string{
			snapshotSQL(s, s.nextFile+1),
			fmt.Sprintf("INSERT INTO %s.ducklake_delete_file VALUES (%d, %d, %d, NULL,  %d, '%s', true, 'parquet', %d, %d, 100, NULL, NULL, 1)", q, deleteID, l.table, snapshot, f.id, path, len(positions), n),
			changesSQL(snapshot, fmt.Sprintf("deleted_from_table:%d", l.table)),
		}
	})
	return snapshot, deleteID
}

// ctidDelete is DuckDB's DELETE over a postgres-attached table: a COPY
// scan of (key, ctid), then DELETE … WHERE ctid IN (…) of the rows whose
// key matches (fixture s04, seq 6564-6580). It returns how many it hit.
func (l *lake) ctidDelete(table, key string, match func(k int64) bool) int {
	l.t.Helper()
	var ctids []string
	for _, r := range l.scan(table, key, "ctid") {
		if k, ok := i8(r[0]); ok && match(k) {
			ctids = append(ctids, tid(r[1]))
		}
	}
	if len(ctids) > 0 {
		l.must(fmt.Sprintf("DELETE FROM %s.%s WHERE ctid IN (%s)", q, table, strings.Join(ctids, ",")))
	}
	return len(ctids)
}

// schedule appends rows to ducklake_files_scheduled_for_deletion through
// DuckDB's binary COPY FROM STDIN (fixture s04, seq 7143).
func (l *lake) schedule(ids []int64, paths []string) {
	l.t.Helper()
	var b []byte
	b = append(b, "PGCOPY\n\xff\r\n\x00"...)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	pgEpoch := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Since(pgEpoch).Microseconds()
	for i, id := range ids {
		b = binary.BigEndian.AppendUint16(b, 4)
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint32(b, uint32(len(paths[i])))
		b = append(b, paths[i]...)
		b = binary.BigEndian.AppendUint32(b, 1)
		if filepath.IsAbs(paths[i]) {
			b = append(b, 0)
		} else {
			b = append(b, 1)
		}
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(now))
	}
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	if _, err := l.conn.CopyFrom(l.ctx, strings.NewReader(string(b)), fmt.Sprintf(`COPY %s."ducklake_files_scheduled_for_deletion" FROM STDIN (FORMAT BINARY)`, q)); err != nil {
		l.t.Fatalf("schedule: %v", err)
	}
}

// scheduledPath is the path expiry schedules for a file row's path and
// path_is_relative: relative to the data path (m's directory joined), or
// absolute as it is.
func scheduledPath(path, relative []byte) string {
	if len(relative) == 1 && relative[0] == 0 {
		return string(path)
	}
	return "main/m/" + string(path)
}

// expire is ducklake_expire_snapshots(versions => victims) (§3.11, fixture
// s04): inside one transaction and without a new snapshot, delete the
// snapshots and their changes, then purge and schedule every data file
// and delete file whose [begin, end) holds no remaining snapshot, all
// through the ctid path. It returns the purged file ids.
func (l *lake) expire(victims ...int64) (purged []int64) {
	l.t.Helper()
	purged, err := l.tryExpire(victims...)
	if err != nil {
		l.t.Fatalf("expire: %v", err)
	}
	return purged
}

// tryExpire is expire, returning what it purged and the COMMIT's error
// (rolled back) instead of failing.
func (l *lake) tryExpire(victims ...int64) (purged []int64, err error) {
	l.t.Helper()
	dead := map[int64]bool{}
	for _, v := range victims {
		dead[v] = true
	}
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	var remaining []int64
	for _, r := range l.scan("ducklake_snapshot", "snapshot_id") {
		if id, _ := i8(r[0]); !dead[id] {
			remaining = append(remaining, id)
		}
	}
	isVictim := func(k int64) bool { return dead[k] }
	if n := l.ctidDelete("ducklake_snapshot", "snapshot_id", isVictim); n != len(victims) {
		l.t.Fatalf("expire: deleted %d snapshots, want %d", n, len(victims))
	}
	l.ctidDelete("ducklake_snapshot_changes", "snapshot_id", isVictim)
	covered := func(begin int64, end []byte) bool {
		for _, s := range remaining {
			if visibleAt(s, begin, end) {
				return true
			}
		}
		return false
	}
	// Data files: DuckDB reads (end, begin, id, table, path, rel).
	gone := map[int64]string{}
	for _, r := range l.scan("ducklake_data_file", "end_snapshot", "begin_snapshot", "data_file_id", "table_id", "path", "path_is_relative") {
		begin, _ := i8(r[1])
		if r[0] != nil && !covered(begin, r[0]) {
			id, _ := i8(r[2])
			gone[id] = scheduledPath(r[4], r[5])
		}
	}
	inGone := func(k int64) bool { _, ok := gone[k]; return ok }
	var ids []int64
	var paths []string
	if len(gone) > 0 {
		l.ctidDelete("ducklake_data_file", "data_file_id", inGone)
		for _, t := range []string{"ducklake_file_column_stats", "ducklake_file_variant_stats", "ducklake_file_partition_value"} {
			l.ctidDelete(t, "data_file_id", inGone)
		}
		for id, p := range gone {
			ids, paths = append(ids, id), append(paths, p)
		}
		l.schedule(ids, paths)
	}
	// Delete files of purged data files or with no remaining snapshot.
	goneDel := map[int64]string{}
	for _, r := range l.scan("ducklake_delete_file", "data_file_id", "end_snapshot", "begin_snapshot", "delete_file_id", "table_id", "path", "path_is_relative") {
		df, _ := i8(r[0])
		begin, _ := i8(r[2])
		if inGone(df) || (r[1] != nil && !covered(begin, r[1])) {
			id, _ := i8(r[3])
			goneDel[id] = scheduledPath(r[5], r[6])
		}
	}
	purged = ids
	if len(goneDel) > 0 {
		l.ctidDelete("ducklake_delete_file", "delete_file_id", func(k int64) bool { _, ok := goneDel[k]; return ok })
		ids, paths = nil, nil
		for id, p := range goneDel {
			ids, paths = append(ids, id), append(paths, p)
		}
		l.schedule(ids, paths)
		purged = append(purged, ids...)
	}
	sort.Slice(purged, func(i, j int) bool { return purged[i] < purged[j] })
	if err := l.exec("COMMIT"); err != nil {
		_ = l.exec("ROLLBACK")
		return purged, err
	}
	return purged, nil
}

// startStack opens moraine on a fresh directory store with the given
// commit options and serves it on a loopback port (trusted, as `moraine
// serve` trusts loopback without a users file).
func startStack(t testing.TB, ctx context.Context, opts commit.Options) (*server.Stack, string) {
	t.Helper()
	st, err := server.OpenStack(ctx, "file://"+t.TempDir(), server.StackOptions{Commit: opts})
	if err != nil {
		t.Fatalf("open stack: %v", err)
	}
	t.Cleanup(func() { st.Close(context.Background()) }) // after the wire server's
	return st, wiretest.Serve(t, sql.New(memcat.On(st.Cat)), map[string]string{"TimeZone": "Etc/UTC"})
}
