package sql

import (
	"context"
	"testing"
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
