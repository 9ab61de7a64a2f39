package maint

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// inlined is one row of an inlined data table as flush reads it.
type inlined struct {
	rowID, begin, end, id int64
	ended                 bool
}

// TestFlushInlinedDataThenMerge: inlined inserts, an inlined update and
// delete, and an ALTER that supersedes the inlined table; flush_inlined_data
// keeps every row id, empties the inlined tables, the superseded empty one
// is dropped, and time travel to every earlier snapshot answers as before.
// Then a merge over the flush outputs and a file registered after them
// (not row-id adjacent: embedded ids) keeps every row id under the hold.
func TestFlushInlinedDataThenMerge(t *testing.T) {
	l := newLake(t)
	var v1, v2 string
	values := func(rows ...string) string { return strings.Join(rows, ", ") }
	inlineInsert := func(table string, create []string, ids ...int64) {
		l.commit(func(s snap) []string {
			c := s.id + 1
			records, next, size, had := l.tableStats()
			sv := s.schemaVersion
			stmts := []string{}
			if create != nil {
				sv++
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog, s.nextFile))
			stmts = append(stmts, create...)
			stmts = append(stmts, l.statsSQL(records+int64(len(ids)), next+int64(len(ids)), size, had)...)
			var vals []string
			for i, id := range ids {
				vals = append(vals, fmt.Sprintf("(%d, %d, NULL, %d)", next+int64(i), c, id))
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.%s VALUES %s", q, table, values(vals...)))
			return append(stmts, changesSQL(c, fmt.Sprintf("inlined_insert:%d", l.table)))
		})
	}
	// First inlined insert creates the inlined table lazily (§1.4 case 3).
	{
		s := l.latest()
		v1 = fmt.Sprintf("ducklake_inlined_data_%d_%d", l.table, s.schemaVersion+1)
		inlineInsert(v1, []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_inlined_data_tables VALUES (%d, '%s', %d)", q, l.table, v1, s.schemaVersion+1),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s(_ducklake_row_id BIGINT, _ducklake_begin_snapshot BIGINT, _ducklake_end_snapshot BIGINT, id BIGINT)", q, v1),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, s.id+1, s.schemaVersion+1, l.table),
		}, 10, 11, 12)
	}
	inlineInsert(v1, nil, 13, 14)
	endRows := func(c int64, rowIDs ...int64) string {
		var vs []string
		for _, r := range rowIDs {
			vs = append(vs, fmt.Sprintf("(%d)", r))
		}
		return fmt.Sprintf(" WITH deleted_row_list(deleted_row_id) AS ( VALUES %s ) UPDATE %s.%s SET _ducklake_end_snapshot = %d FROM deleted_row_list WHERE _ducklake_row_id=deleted_row_id AND _ducklake_end_snapshot IS NULL AND _ducklake_begin_snapshot != %d", values(vs...), q, v1, c, c)
	}
	// UPDATE m SET id = 111 WHERE id = 11: same row id, new version.
	l.commit(func(s snap) []string {
		c := s.id + 1
		records, next, size, _ := l.tableStats()
		return []string{snapshotSQL(s, s.nextFile), endRows(c, 1),
			fmt.Sprintf("INSERT INTO %s.%s VALUES (1, %d, NULL, 111)", q, v1, c),
			l.statsSQL(records+1, next, size, true)[0],
			changesSQL(c, fmt.Sprintf("inlined_insert:%d,inlined_delete:%d", l.table, l.table))}
	})
	// DELETE FROM m WHERE id = 13 (fixture s05, seq 5466).
	l.commit(func(s snap) []string {
		c := s.id + 1
		return []string{snapshotSQL(s, s.nextFile), endRows(c, 3), changesSQL(c, fmt.Sprintf("inlined_delete:%d", l.table))}
	})
	// ALTER TABLE m ADD COLUMN x BIGINT: a new inlined table under the new
	// schema version supersedes v1 (§1.4 case 2).
	{
		s := l.latest()
		sv := s.schemaVersion + 1
		v2 = fmt.Sprintf("ducklake_inlined_data_%d_%d", l.table, sv)
		l.commit(func(s snap) []string {
			c := s.id + 1
			return []string{
				fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog, s.nextFile),
				fmt.Sprintf("INSERT INTO %s.ducklake_column VALUES (2, %d, NULL, %d, 2, 'x', 'int64', NULL, 'NULL', true, NULL, 'literal', 'duckdb')", q, c, l.table),
				fmt.Sprintf("INSERT INTO %s.ducklake_inlined_data_tables VALUES (%d, '%s', %d)", q, l.table, v2, sv),
				fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s(_ducklake_row_id BIGINT, _ducklake_begin_snapshot BIGINT, _ducklake_end_snapshot BIGINT, id BIGINT, x BIGINT)", q, v2),
				fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, sv, l.table),
				changesSQL(c, fmt.Sprintf("altered_table:%d", l.table)),
			}
		})
	}
	l.commit(func(s snap) []string {
		c := s.id + 1
		records, next, size, _ := l.tableStats()
		return append(l.statsSQL(records+1, next+1, size, true),
			snapshotSQL(s, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.%s VALUES (%d, %d, NULL, 15, NULL)", q, v2, next, c),
			changesSQL(c, fmt.Sprintf("inlined_insert:%d", l.table)))
	})
	l.verify("before flush")
	last := l.latest().id
	before := map[int64]map[int64]int64{}
	for s := int64(2); s <= last; s++ {
		before[s] = l.rows(s)
	}
	if want := map[int64]int64{0: 10, 1: 111, 2: 12, 4: 14, 5: 15}; fmt.Sprint(before[last]) != fmt.Sprint(want) {
		t.Fatalf("rows before flush %v, want %v", before[last], want)
	}
	_, nextBefore, _, _ := l.tableStats()

	// CALL ducklake_flush_inlined_data('lake') (§3.9, fixture s05 seq
	// 5959-6112): read every row with begin <= S, write one Parquet file per
	// inlined table with embedded row and snapshot ids and a delete file of
	// the ended versions, ctid-delete the flushed rows, then commit.
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	s := l.latest()
	c := s.id + 1
	stmts := []string{snapshotSQL(s, s.nextFile+3)}
	fileID := s.nextFile
	records, next, size, _ := l.tableStats()
	stmts = append(stmts, l.statsSQL(records, next, size, true)...)
	var deleteSQL []string
	for _, table := range []string{v1, v2} {
		var rows []inlined
		for _, r := range l.scan(table, "_ducklake_begin_snapshot", "_ducklake_end_snapshot", "id", "_ducklake_row_id") {
			var x inlined
			x.begin, _ = i8(r[0])
			x.end, x.ended = i8(r[1])
			x.id, _ = i8(r[2])
			x.rowID, _ = i8(r[3])
			if x.begin <= s.id {
				rows = append(rows, x)
			}
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].rowID != rows[j].rowID {
				return rows[i].rowID < rows[j].rowID
			}
			return rows[i].begin < rows[j].begin
		})
		path := fmt.Sprintf("ducklake-flush-%d.parquet", fileID)
		var data []dataRow
		var dels []deletedPos
		minSnap, maxSnap, minRow := rows[0].begin, rows[0].begin, rows[0].rowID
		for pos, r := range rows {
			data = append(data, dataRow{id: r.id, rowID: r.rowID, snap: r.begin, hasRowID: true, hasSnap: true})
			minSnap, maxSnap, minRow = min(minSnap, r.begin), max(maxSnap, r.begin), min(minRow, r.rowID)
			if r.ended {
				dels = append(dels, deletedPos{pos: int64(pos), snap: r.end, hasSnap: true})
			}
		}
		n := writeData(t, l.local(path), data, true, true)
		stmts = append(stmts, l.fileSQL(fileID, minSnap, path, data, n, minRow, true, maxSnap, true)...)
		deleteSQL = append(deleteSQL, fmt.Sprintf("DELETE FROM %s.%s WHERE _ducklake_begin_snapshot <= %d", q, table, s.id))
		if len(dels) > 0 {
			dpath := fmt.Sprintf("ducklake-flush-%d-delete.parquet", fileID)
			dn := writeDeletesAt(t, l.local(dpath), l.local(path), dels)
			lo, hi := dels[0].snap, dels[0].snap
			for _, d := range dels {
				lo, hi = min(lo, d.snap), max(hi, d.snap)
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.ducklake_delete_file VALUES (%d, %d, %d, NULL,  %d, '%s', true, 'parquet', %d, %d, 100, NULL, %d, 1)",
				q, fileID+1, l.table, lo, fileID, dpath, len(dels), dn, hi))
		}
		fileID += 2
		l.ctidDelete(table, "_ducklake_begin_snapshot", func(b int64) bool { return b <= s.id })
	}
	stmts = append(stmts, deleteSQL...)
	stmts = append(stmts, changesSQL(c, fmt.Sprintf("inline_flush:%d", l.table)))
	l.must(strings.Join(stmts, ";") + ";")
	l.must("COMMIT")
	// Then, in its own transaction, drop the superseded inlined table
	// that the flush emptied (§1.4).
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	l.must(fmt.Sprintf("DELETE FROM %s.ducklake_inlined_data_tables WHERE table_id = %d AND table_name = '%s'; DROP TABLE IF EXISTS %s.%s", q, l.table, v1, q, v1))
	l.must("COMMIT")
	l.verify("after flush")

	if got := l.inlinedTables(); fmt.Sprint(got) != fmt.Sprint([]string{v2}) {
		t.Fatalf("registered inlined tables after flush %v, want only %s", got, v2)
	}
	if err := l.exec(fmt.Sprintf(`COPY (SELECT NULL FROM %s."%s"  LIMIT 1) TO STDOUT (FORMAT "binary");`, q, v1)); err == nil {
		t.Fatalf("superseded inlined table %s still exists", v1)
	}
	if n := len(l.scan(v2, "_ducklake_row_id")); n != 0 {
		t.Fatalf("%d inlined rows left in %s after flush", n, v2)
	}
	if _, nextAfter, _, _ := l.tableStats(); nextAfter != nextBefore {
		t.Fatalf("flush moved next_row_id from %d to %d", nextBefore, nextAfter)
	}
	flushed := l.latest().id
	sameRows(t, "after flush (row ids preserved)", l.rows(flushed), before[last])
	for s := int64(2); s <= last; s++ {
		sameRows(t, fmt.Sprintf("history at snapshot %d after flush", s), l.rows(s), before[s])
	}

	// A later insert, then merge it with a flush output. The output embeds
	// every row id (row_id_start NULL), as the bundled DuckLake writes when
	// a source's ids are embedded.
	l.insert(20, 21)
	l.verify("after insert")
	want := l.rows(l.latest().id)
	// merge_adjacent_files takes files without deletes only (§3.10): the
	// second flush output and the new file.
	all, dels := l.live()
	hasDel := map[int64]bool{}
	for _, d := range dels {
		hasDel[d.dataFile] = true
	}
	var sources []catFile
	for _, f := range all {
		if !hasDel[f.id] {
			sources = append(sources, f)
		}
	}
	if len(all) != 3 || len(sources) != 2 {
		t.Fatalf("%d live files (%d without deletes) before merge, want 3 (2)", len(all), len(sources))
	}
	l.commit(func(s snap) []string {
		rows := l.mergeRows(sources)
		path := "ducklake-merge-flushed.parquet"
		n := writeData(t, l.local(path), rows, true, true)
		return l.mergeSQL(s, sources, path, rows, n, 0, false)
	})
	l.verify("after merge of flush outputs")
	sameRows(t, "after merge of flush outputs", l.rows(l.latest().id), want)
	for s := int64(2); s <= last; s++ {
		sameRows(t, fmt.Sprintf("history at snapshot %d after merge", s), l.rows(s), before[s])
	}

	// Expire everything but the newest snapshot, then clean up: the
	// flushed delete file and its data file stay live (nothing ended), the
	// merge's sources were already scheduled and go with cleanup.
	cur := l.latest().id
	var victims []int64
	for s := int64(0); s < cur; s++ {
		victims = append(victims, s)
	}
	if purged := l.expire(victims...); len(purged) != 0 {
		t.Fatalf("expire purged %v; nothing has ended", purged)
	}
	l.verify("after expire")
	if removed := l.cleanup(); len(removed) != 2 {
		t.Fatalf("cleanup removed %v, want the merge's 2 sources", removed)
	}
	l.verify("after cleanup")
	sameRows(t, "after expire and cleanup", l.rows(cur), want)
}
