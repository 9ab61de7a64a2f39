package maint

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestMergeOverFlushStraddlingPartitions: inlined rows of a table
// partitioned by identity(id) interleave two partitions, so the flush
// writes one file per partition whose row ids are not contiguous (0,2,4
// and 1,3,5). A merge of the first partition's flush output with a file
// inserted later into the same partition keeps every row id; the
// renumbering variant (row_id_start kept, ids dropped) is refused by the
// hold with the sources left live.
func TestMergeOverFlushStraddlingPartitions(t *testing.T) {
	l := newLake(t)
	// ALTER TABLE m SET PARTITIONED BY (id).
	l.commit(func(s snap) []string {
		c := s.id + 1
		l.partition = s.nextCatalog
		return []string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, s.schemaVersion+1, s.nextCatalog+1, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_partition_info VALUES (%d, %d, %d, NULL)", q, l.partition, l.table, c),
			fmt.Sprintf("INSERT INTO %s.ducklake_partition_column VALUES (%d, %d, 0, 1, 'identity')", q, l.partition, l.table),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, s.schemaVersion+1, l.table),
			changesSQL(c, fmt.Sprintf("altered_table:%d", l.table)),
		}
	})
	// INSERT INTO m VALUES (1),(2),(1),(2),(1),(2): inlined, row ids 0..5,
	// creating the inlined table lazily.
	var inl string
	l.commit(func(s snap) []string {
		c, sv := s.id+1, s.schemaVersion+1
		inl = fmt.Sprintf("ducklake_inlined_data_%d_%d", l.table, sv)
		var vals []string
		for i := int64(0); i < 6; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, NULL, %d)", i, c, 1+i%2))
		}
		return append([]string{
			fmt.Sprintf("INSERT INTO %s.ducklake_snapshot VALUES (%d, NOW(), %d, %d, %d)", q, c, sv, s.nextCatalog, s.nextFile),
			fmt.Sprintf("INSERT INTO %s.ducklake_inlined_data_tables VALUES (%d, '%s', %d)", q, l.table, inl, sv),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s(_ducklake_row_id BIGINT, _ducklake_begin_snapshot BIGINT, _ducklake_end_snapshot BIGINT, id BIGINT)", q, inl),
			fmt.Sprintf("INSERT INTO %s.ducklake_schema_versions VALUES (%d,%d,%d)", q, c, sv, l.table),
		}, append(l.statsSQL(6, 6, 0, false),
			fmt.Sprintf("INSERT INTO %s.%s VALUES %s", q, inl, strings.Join(vals, ", ")),
			changesSQL(c, fmt.Sprintf("inlined_insert:%d", l.table)))...)
	})
	inlinedAt := l.latest().id
	atInline := l.rows(inlinedAt)
	want := atInline
	if len(want) != 6 {
		t.Fatalf("%d inlined rows, want 6", len(want))
	}

	// Flush: one file per partition value, ids embedded.
	l.must("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	s := l.latest()
	byPart := map[int64][]dataRow{}
	for _, r := range l.scan(inl, "_ducklake_begin_snapshot", "_ducklake_end_snapshot", "id", "_ducklake_row_id") {
		begin, _ := i8(r[0])
		id, _ := i8(r[2])
		rid, _ := i8(r[3])
		byPart[id] = append(byPart[id], dataRow{id: id, rowID: rid, snap: begin, hasRowID: true, hasSnap: true})
	}
	stmts := []string{snapshotSQL(s, s.nextFile+2)}
	records, next, size, _ := l.tableStats()
	stmts = append(stmts, l.statsSQL(records, next, size, true)...)
	for i, part := range []int64{1, 2} {
		rows := byPart[part]
		sort.Slice(rows, func(a, b int) bool { return rows[a].rowID < rows[b].rowID })
		path := fmt.Sprintf("ducklake-flush-p%d.parquet", part)
		n := writeData(t, l.local(path), rows, true, true)
		stmts = append(stmts, l.fileSQL(s.nextFile+int64(i), rows[0].snap, path, rows, n, rows[0].rowID, true, rows[0].snap, true)...)
	}
	l.ctidDelete(inl, "_ducklake_begin_snapshot", func(b int64) bool { return b <= s.id })
	stmts = append(stmts, fmt.Sprintf("DELETE FROM %s.%s WHERE _ducklake_begin_snapshot <= %d", q, inl, s.id),
		changesSQL(s.id+1, fmt.Sprintf("inline_flush:%d", l.table)))
	l.must(strings.Join(stmts, ";") + ";")
	l.must("COMMIT")
	l.verify("after flush")
	sameRows(t, "after flush", l.rows(l.latest().id), want)
	files, _ := l.live()
	if len(files) != 2 || files[0].rowIDStart != 0 || files[1].rowIDStart != 1 {
		t.Fatalf("flush outputs %+v, want two files starting at row ids 0 and 1", files)
	}
	flushA := files[0]

	// INSERT INTO m VALUES (1), (1): partition 1, row ids 6 and 7.
	l.insert(1, 1)
	l.verify("after insert")
	want = l.rows(l.latest().id)
	all, _ := l.live()
	sources := []catFile{flushA, all[len(all)-1]}
	if sources[1].rowIDStart != 6 {
		t.Fatalf("new file starts at row id %d, want 6", sources[1].rowIDStart)
	}

	err := l.tryCommit(func(s snap) []string {
		rows := l.mergeRows(sources)
		for i := range rows {
			rows[i].hasRowID = false // would read back as 0..4
		}
		path := "ducklake-renumbered.parquet"
		n := writeData(t, l.local(path), rows, false, true)
		return l.mergeSQL(s, sources, path, rows, n, 0, true)
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "XX001" || !strings.Contains(pe.Message, "RFC 0008") {
		t.Fatalf("renumbering merge over the flush output: %v, want the hold's XX001 refusal", err)
	}
	if after, _ := l.live(); len(after) != 3 {
		t.Fatalf("after the refused merge %d live files, want 3", len(after))
	}
	sameRows(t, "after refused merge", l.rows(l.latest().id), want)

	l.commit(func(s snap) []string {
		rows := l.mergeRows(sources)
		path := "ducklake-merged-p1.parquet"
		n := writeData(t, l.local(path), rows, true, true)
		return l.mergeSQL(s, sources, path, rows, n, 0, false)
	})
	l.verify("after merge")
	sameRows(t, "after merge", l.rows(l.latest().id), want)
	sameRows(t, "time travel to the inlined insert", l.rows(inlinedAt), atInline)
	// Partition values: exactly one per live file, with its value.
	live, _ := l.live()
	got := map[int64]string{}
	for _, r := range l.scan("ducklake_file_partition_value", "data_file_id", "partition_value") {
		id, _ := i8(r[0])
		got[id] = string(r[1])
	}
	if len(got) != len(live) || len(live) != 2 {
		t.Fatalf("partition values %v for live files %+v", got, live)
	}
	for _, f := range live {
		if v := got[f.id]; v != fmt.Sprint(readData(t, l.local(f.path))[0].id) {
			t.Fatalf("file %d has partition value %q", f.id, v)
		}
	}
}
