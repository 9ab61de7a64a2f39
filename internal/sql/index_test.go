package sql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
)

// TestIndexedFromTaken pins which statements the index access paths answer
// (and how many rows they hand on): TestDifferential proves the answers
// equal PostgreSQL's, this proves the paths are actually taken, so that the
// latest-snapshot read stays O(log n).
func TestIndexedFromTaken(t *testing.T) {
	ctx := context.Background()
	ex, s := lakeSession(t, `CREATE TABLE ducklake_snapshot (snapshot_id BIGINT PRIMARY KEY, note VARCHAR);
CREATE TABLE ducklake_pair (a BIGINT, b BIGINT, PRIMARY KEY (a, b));
CREATE TABLE ducklake_plain (a BIGINT);
CREATE TABLE ducklake_named (k VARCHAR PRIMARY KEY);
INSERT INTO ducklake_snapshot VALUES (-4, 'a'), (9, 'b'), (2, 'c'), (30, 'd');
INSERT INTO ducklake_pair VALUES (1, 1), (1, 2);
INSERT INTO ducklake_named VALUES ('x'), ('y')`)
	for _, tc := range []struct {
		sql     string
		indexed bool
		rows    int
	}{
		{`SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM ducklake_snapshot)`, true, 1},
		{`SELECT max(snapshot_id) FROM ducklake_snapshot`, true, 2},
		{`SELECT max(snapshot_id), min(snapshot_id) FROM public.ducklake_snapshot`, true, 2},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = 9 AND note = 'zzz'`, true, 1},
		{`SELECT * FROM ducklake_snapshot WHERE 2 = snapshot_id`, true, 1},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = 5`, true, 0},
		{`SELECT * FROM ducklake_pair WHERE b = 2 AND a = 1`, true, 1},
		{`SELECT * FROM ducklake_named WHERE k = 'y'`, true, 1},
		// Not answerable from the index: scanned.
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = NULL`, false, 0},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id > 5`, false, 0},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = 3.0`, false, 0},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = 2 OR snapshot_id = 9`, false, 0},
		{`SELECT * FROM ducklake_snapshot WHERE snapshot_id = random()::bigint`, false, 0},
		{`SELECT * FROM ducklake_snapshot a WHERE a.snapshot_id = (SELECT max(b.snapshot_id) FROM ducklake_snapshot b WHERE b.note = a.note)`, false, 0},
		{`SELECT * FROM ducklake_pair WHERE a = 1`, false, 0},
		{`SELECT * FROM ducklake_plain WHERE a = 1`, false, 0},
		{`SELECT max(note) FROM ducklake_snapshot`, false, 0},
		{`SELECT count(*) FROM ducklake_snapshot`, false, 0},
		{`SELECT max(snapshot_id), count(*) FROM ducklake_snapshot`, false, 0},
		{`SELECT max(k) FROM ducklake_named`, false, 0},
		{`SELECT max(b) FROM ducklake_pair`, false, 0},
	} {
		stmts, err := ex.cache.parse(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		x := &exec{ctx: ctx, s: s, lits: stmts[0].lits}
		r, ok, err := x.indexedFrom(stmts[0].node.GetSelectStmt(), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if ok != tc.indexed {
			t.Errorf("%s: indexed=%v, want %v", tc.sql, ok, tc.indexed)
			continue
		}
		if ok && len(r.rows) != tc.rows {
			t.Errorf("%s: %d rows from the index, want %d", tc.sql, len(r.rows), tc.rows)
		}
	}
}

// TestLakeTablesEncoded: lake tables expose their stored rows, so the
// binary COPY fast path (copyplan.go) is taken for DuckLake's whole-table
// reads rather than silently falling back to decoding every cell.
func TestLakeTablesEncoded(t *testing.T) {
	_, s := lakeSession(t, `CREATE TABLE ducklake_data_file (data_file_id BIGINT PRIMARY KEY, path VARCHAR)`)
	tb, ok := s.view().Lookup("public", "ducklake_data_file")
	if !ok {
		t.Fatal("table missing")
	}
	if _, ok := any(tb).(encodedTable); !ok {
		t.Fatal("*memcat.Table does not implement encodedTable: the binary COPY fast path is off")
	}
	if _, _, ok := tb.EncodedRows(); !ok {
		t.Fatal("a lake table reports no encoded rows")
	}
}

// TestIndexedTargetTaken pins which UPDATE/DELETE WHERE clauses read their
// candidate rows from the key index, how many, and that they come in ctid
// order (TestDifferential proves the statements' effects equal
// PostgreSQL's).
func TestIndexedTargetTaken(t *testing.T) {
	ctx := context.Background()
	ex, s := lakeSession(t, `CREATE TABLE ducklake_snapshot (snapshot_id BIGINT PRIMARY KEY, note VARCHAR);
CREATE TABLE ducklake_pair (a BIGINT, b BIGINT, PRIMARY KEY (a, b));
CREATE TABLE ducklake_plain (a BIGINT);
CREATE TABLE ducklake_table_column_stats (table_id BIGINT, column_id BIGINT, min_value VARCHAR);
INSERT INTO ducklake_snapshot VALUES (-4, 'a'), (9, 'b'), (2, 'c'), (30, 'd');
INSERT INTO ducklake_pair VALUES (1, 1), (1, 2);
INSERT INTO ducklake_plain VALUES (5), (6), (7);
INSERT INTO ducklake_table_column_stats VALUES (2, 1, 'a'), (1, 2, 'b'), (NULL, 1, 'c'), (1, 1, 'd'), (0, 1, 'e')`)
	for _, tc := range []struct {
		where   string
		indexed bool
		ids     []int64 // first column of the candidate rows, in order
	}{
		{`FROM ducklake_snapshot WHERE snapshot_id = 9`, true, []int64{9}},
		// 9 was inserted before 2: ctid order, not key or list order.
		{`FROM ducklake_snapshot WHERE snapshot_id IN (30, 2, 30, NULL, 77, 9)`, true, []int64{9, 2, 30}},
		{`FROM ducklake_snapshot WHERE note = 'x' AND snapshot_id IN (9)`, true, []int64{9}},
		{`FROM ducklake_snapshot WHERE snapshot_id IN (NULL)`, true, nil},
		{`FROM ducklake_pair WHERE a = 1 AND b = 2`, true, []int64{1}},
		// The lookup index of a table without a key: a prefix of its
		// columns or an IN list on the first, in ctid order; a NULL id
		// shares id 0's entry (the WHERE clause drops it later).
		{`FROM ducklake_table_column_stats WHERE column_id = 1 AND table_id = 1`, true, []int64{1}},
		{`FROM ducklake_table_column_stats WHERE table_id = 1`, true, []int64{1, 1}},
		{`FROM ducklake_table_column_stats WHERE table_id IN (1, 2) AND column_id = 1`, true, []int64{2, 1, 1}},
		{`FROM ducklake_table_column_stats WHERE table_id = 0 AND column_id = 1`, true, []int64{0, 0}},
		{`FROM ducklake_table_column_stats WHERE table_id = 7`, true, nil},
		// A TID scan, on any lake table: the rows at the ctids (in ctid
		// order, once each, none for a ctid with no row or NULL), before
		// any key path (the WHERE clause checks the rest later).
		{`FROM ducklake_plain WHERE ctid = '(0,2)'`, true, []int64{6}},
		{`FROM ducklake_plain WHERE '(0,1)' = ctid`, true, []int64{5}},
		{`FROM ducklake_plain WHERE ctid IN ('(0,3)', '(0,1)', NULL, '(0,99)', '(0,3)')`, true, []int64{5, 7}},
		{`FROM ducklake_plain WHERE a = 6 AND ctid IN ('(0,1)')`, true, []int64{5}},
		{`FROM ducklake_snapshot WHERE snapshot_id = 30 AND ctid = '(0,2)'`, true, []int64{9}},
		{`FROM ducklake_plain WHERE ctid IN (NULL)`, true, nil},
		// Scanned.
		{`FROM ducklake_plain WHERE ctid IN ('(0,1)', 'junk')`, false, nil},
		{`FROM ducklake_plain WHERE ctid > '(0,1)'`, false, nil},
		{`FROM ducklake_plain WHERE ctid IN ('(0,1)') OR a = 7`, false, nil},
		{`FROM ducklake_table_column_stats WHERE column_id = 1`, false, nil},
		{`FROM ducklake_table_column_stats WHERE table_id = NULL`, false, nil},
		{`FROM ducklake_table_column_stats WHERE table_id > 1`, false, nil},
		{`FROM ducklake_snapshot WHERE snapshot_id NOT IN (9)`, false, nil},
		{`FROM ducklake_snapshot WHERE snapshot_id IN (9, length(note))`, false, nil},
		{`FROM ducklake_snapshot WHERE snapshot_id IN (9.5)`, false, nil},
		{`FROM ducklake_snapshot WHERE snapshot_id IN (9) OR note = 'a'`, false, nil},
		{`FROM ducklake_pair WHERE a IN (1)`, false, nil},
		{`FROM ducklake_plain WHERE a IN (1)`, false, nil},
	} {
		sql := "SELECT * " + tc.where
		stmts, err := ex.cache.parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		sel := stmts[0].node.GetSelectStmt()
		x := &exec{ctx: ctx, s: s, lits: stmts[0].lits}
		tb, qual, ok, err := x.storedTable(sel.FromClause[0].GetRangeVar())
		if !ok || err != nil {
			t.Fatalf("%s: not a stored table: %v", sql, err)
		}
		r, ok, err := x.indexedTarget(tb, qual, sel.WhereClause)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if ok != tc.indexed {
			t.Errorf("%s: indexed=%v, want %v", sql, ok, tc.indexed)
			continue
		}
		if !ok {
			continue
		}
		var ids []int64
		last := int64(-1)
		for _, row := range r.rows {
			ids = append(ids, row[0].I)
			if c := row[len(row)-1].I; c <= last {
				t.Errorf("%s: rows not in ctid order", sql)
			} else {
				last = c
			}
		}
		if !slices.Equal(ids, tc.ids) {
			t.Errorf("%s: rows %v, want %v", sql, ids, tc.ids)
		}
	}
}

// BenchmarkUpdateByKey: DuckLake ending one data file by id on a catalog of
// 100 000 files — the key index against the scan it replaces (the "scan"
// variant hides the key from the index by wrapping the column in an
// expression), and the same row found by its ctid ("tid").
func BenchmarkUpdateByKey(b *testing.B) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	setup := `CREATE TABLE ducklake_data_file (data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, path VARCHAR)`
	if out := runSQL(ctx, s, setup, ""); strings.Contains(out, "ERROR") {
		b.Fatal(out)
	}
	const n = 100_000
	for start := 0; start < n; start += 5000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO ducklake_data_file VALUES ")
		for i := start; i < start+5000; i++ {
			if i > start {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "(%d, %d, 1, NULL, 'f%d.parquet')", i, i%100, i)
		}
		if out := runSQL(ctx, s, sb.String(), ""); strings.Contains(out, "ERROR") {
			b.Fatal(out)
		}
	}
	benchOneRowUpdate(b, s, n, "UPDATE ducklake_data_file SET end_snapshot = 2 WHERE end_snapshot IS NULL AND ", []benchWhere{
		{"index", "data_file_id IN (%d)"},
		{"scan", "data_file_id + 0 IN (%d)"},
		// The TID scan (tidTarget), as DuckDB's deletes by ctid reach it.
		{"tid", "ctid = (SELECT ctid FROM ducklake_data_file WHERE data_file_id = %d)"},
	})
}

// benchWhere is one variant of a benchmarked UPDATE's WHERE; its %d is the
// row picked.
type benchWhere struct{ name, where string }

// benchOneRowUpdate times update+where, which must change exactly one row,
// in a rolled-back transaction, for each variant of where, picking rows
// spread over 0..n-1.
func benchOneRowUpdate(b *testing.B, s *Session, n int, update string, variants []benchWhere) {
	ctx := context.Background()
	for _, bc := range variants {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				q := fmt.Sprintf("BEGIN; "+update+bc.where+"; ROLLBACK", i)
				if out := runSQL(ctx, s, q, ""); !strings.Contains(out, "UPDATE 1") {
					b.Fatalf("%s: %s", q, out)
				}
			}
		})
	}
}

// BenchmarkDeleteFileStats: a compaction's `DELETE FROM
// ducklake_file_column_stats WHERE data_file_id IN (…)` (four files) on a
// catalog of 20 000 files × 8 columns — a table without an index — with
// the IN list prefiltering the scan ("prefilter") and hidden from it by an
// expression ("scan").
func BenchmarkDeleteFileStats(b *testing.B) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	setup := `CREATE TABLE ducklake_file_column_stats (data_file_id BIGINT, table_id BIGINT, column_id BIGINT, value_count BIGINT, min_value VARCHAR, max_value VARCHAR)`
	if out := runSQL(ctx, s, setup, ""); strings.Contains(out, "ERROR") {
		b.Fatal(out)
	}
	const files, columns = 20_000, 8
	for start := 0; start < files; start += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO ducklake_file_column_stats VALUES ")
		for f := start; f < start+1000; f++ {
			for c := range columns {
				if f > start || c > 0 {
					sb.WriteString(", ")
				}
				fmt.Fprintf(&sb, "(%d, %d, %d, 100, '%d', '%d')", f, f%10, c, f, f+c)
			}
		}
		if out := runSQL(ctx, s, sb.String(), ""); strings.Contains(out, "ERROR") {
			b.Fatal(out)
		}
	}
	for _, bc := range []benchWhere{
		{"prefilter", "data_file_id IN (%d, %d, %d, %d)"},
		{"scan", "data_file_id + 0 IN (%d, %d, %d, %d)"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i = (i + 7919) % (files - 4)
				q := fmt.Sprintf("BEGIN; DELETE FROM ducklake_file_column_stats WHERE "+bc.where+"; ROLLBACK", i, i+1, i+2, i+3)
				if out := runSQL(ctx, s, q, ""); !strings.Contains(out, fmt.Sprintf("DELETE %d", 4*columns)) {
					b.Fatalf("%s: %s", q, out)
				}
			}
		})
	}
}

// TestPrefilteredScan: a scan that skips stored rows failing the integer
// equalities of a WHERE clause returns exactly the rows of the plain scan
// (keep decides the same), for every table shape the prefilter meets —
// NULLs, rows stored before an ADD COLUMN, text and key columns.
func TestPrefilteredScan(t *testing.T) {
	ctx := context.Background()
	ex, s := lakeSession(t, `CREATE TABLE ducklake_table_column_stats (table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, min_value VARCHAR);
INSERT INTO ducklake_table_column_stats VALUES (1, 1, true, 'a'), (1, 2, NULL, NULL), (2, 1, false, 'b'), (NULL, 1, true, 'c'), (2, 2, true, '2');
ALTER TABLE ducklake_table_column_stats ADD COLUMN extra BIGINT;
INSERT INTO ducklake_table_column_stats VALUES (1, 2, true, 'd', 7), (3, 1, false, 'e', NULL)`)
	for _, tc := range []struct {
		where string
		eqs   int // integer filters the prefilter uses (= or IN)
		rows  int
	}{
		{`table_id = 1`, 1, 3},
		{`table_id = 1 AND column_id = 2`, 2, 2},
		{`2 = column_id AND table_id = 2`, 2, 1},
		{`table_id = 1 AND min_value = 'a'`, 1, 1},
		{`extra = 7`, 1, 1},
		{`table_id = 9`, 1, 0},
		{`table_id = NULL`, 0, 0},
		{`table_id = 1 OR column_id = 1`, 0, 6},
		{`table_id = 1.0`, 0, 3},
		{`table_id = (SELECT max(column_id) FROM ducklake_table_column_stats)`, 1, 2},
		// IN lists: out of order, repeats and NULLs, on a column added later.
		{`table_id IN (3, 1, 1, NULL)`, 1, 4},
		{`table_id IN (2) AND column_id IN (2, 1)`, 2, 2},
		{`table_id IN (NULL)`, 1, 0},
		{`extra IN (7, 8)`, 1, 1},
		{`table_id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10) AND column_id = 1`, 2, 3},
		{`table_id NOT IN (1)`, 0, 3},
		{`table_id IN (1, column_id)`, 0, 4},
		{`table_id IN (1) OR column_id = 2`, 0, 4},
	} {
		sql := "SELECT * FROM ducklake_table_column_stats WHERE " + tc.where
		stmts, err := ex.cache.parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		sel := stmts[0].node.GetSelectStmt()
		x := &exec{ctx: ctx, s: s, lits: stmts[0].lits}
		tb, qual, ok := x.lakeRangeVar(sel.FromClause[0])
		if ok {
			t.Fatal("a table without a key counts as indexed")
		}
		tb, qual, ok, err = x.storedTable(sel.FromClause[0].GetRangeVar())
		if !ok || err != nil {
			t.Fatalf("%s: table: %v", sql, err)
		}
		cols := tableCols(tb, qual)
		eqs := x.intFilters(cols, sel.WhereClause)
		if len(eqs) != tc.eqs {
			t.Errorf("%s: %d filters, want %d", sql, len(eqs), tc.eqs)
		}
		e := &env{cols: cols}
		keep := func(row []datum.Value) bool {
			e.row = row
			v, err := x.eval(sel.WhereClause, e)
			return err == nil && truth(v)
		}
		plain, err := tableRelFiltered(tb, qual, nil, keep)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := tableRelFiltered(tb, qual, eqs, keep)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain.rows) != tc.rows {
			t.Errorf("%s: plain scan %d rows, want %d", sql, len(plain.rows), tc.rows)
		}
		if fmt.Sprint(pre.rows) != fmt.Sprint(plain.rows) {
			t.Errorf("%s: prefiltered %v, plain %v", sql, pre.rows, plain.rows)
		}
	}
}

// BenchmarkUpdateColumnStats: DuckLake's per-commit column-stats UPDATE
// on a catalog of 10 000 tables × 8 columns (no primary key): through the
// lookup index, as a scan with the integer prefilter (the index cannot
// serve a WHERE that leaves table_id in an expression), and as a plain
// scan (both columns hidden in expressions).
func BenchmarkUpdateColumnStats(b *testing.B) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	setup := `CREATE TABLE ducklake_table_column_stats (table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR)`
	if out := runSQL(ctx, s, setup, ""); strings.Contains(out, "ERROR") {
		b.Fatal(out)
	}
	const tables = 10_000
	for start := 0; start < tables; start += 500 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO ducklake_table_column_stats VALUES ")
		for i := start; i < start+500; i++ {
			for c := 1; c <= 8; c++ {
				if i > start || c > 1 {
					sb.WriteString(", ")
				}
				fmt.Fprintf(&sb, "(%d, %d, false, false, '1', '99', NULL)", i, c)
			}
		}
		if out := runSQL(ctx, s, sb.String(), ""); strings.Contains(out, "ERROR") {
			b.Fatal(out)
		}
	}
	benchOneRowUpdate(b, s, tables, "UPDATE ducklake_table_column_stats SET min_value = '0', max_value = '100' WHERE ", []benchWhere{
		{"lookup", "table_id = %d AND column_id = 3"},
		{"prefilter", "table_id + 0 = %d AND column_id = 3"},
		{"plain", "table_id + 0 = %d AND column_id + 0 = 3"},
	})
}
