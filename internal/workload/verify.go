package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/commit/changes"
)

// ErrVerify is wrapped by every problem Verify reports.
var ErrVerify = errors.New("workload: catalog verification failed")

// Verify reads the catalog back over conn and checks it against what r
// acknowledged. A commit in doubt (Result.InDoubt) whose tag is there is
// checked as acknowledged, one whose tag is not as failed. It reports
// every problem it finds, not only the first:
//
//   - snapshot ids are dense (0…max) and there is exactly one per
//     acknowledged commit, plus the initial snapshot and the setup commit;
//   - every acknowledged commit's tag appears exactly once, at the snapshot
//     it was acknowledged with, with the change string it wrote; no snapshot
//     carries a tag that was not acknowledged (a failed commit left nothing);
//   - per table, the live data files hold pairwise disjoint row-id ranges
//     whose union is exactly [0, next_row_id) (the workload never deletes),
//     their record counts sum to table_stats.record_count, and next_row_id
//     equals the rows the acknowledged inserts registered;
//   - every inserted or merged file is either live or was consumed by an
//     acknowledged merge, which hard-deleted it and scheduled it for
//     deletion; merged files keep their first source's begin_snapshot;
//   - each live file has exactly one column-stats row per column and no
//     stats row outlives its file.
func (r *Result) Verify(ctx context.Context, conn *pgconn.PgConn) error {
	q := quoteIdent(r.Config.WithDefaults().Schema)
	var problems []error
	fail := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{ErrVerify}, args...)...))
	}

	// Snapshots.
	rows, err := copyOut(ctx, conn, localScan(q, "ducklake_snapshot", "snapshot_id"))
	if err != nil {
		return fmt.Errorf("verify: snapshots: %w", err)
	}
	ids := make([]int64, 0, len(rows))
	for _, row := range rows {
		v, err := int8s(row, 1)
		if err != nil {
			return fmt.Errorf("verify: snapshots: %w", err)
		}
		ids = append(ids, v[0])
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i, id := range ids {
		if id != int64(i) {
			fail("snapshot ids not dense: position %d holds %d", i, id)
			break
		}
	}

	// Tags and change strings.
	rows, err = copyOut(ctx, conn, localScan(q, "ducklake_snapshot_changes", "snapshot_id", "changes_made", "commit_message"))
	if err != nil {
		return fmt.Errorf("verify: snapshot changes: %w", err)
	}
	type change struct {
		snapshot int64
		changes  string
	}
	byTag := map[string][]change{}
	for _, row := range rows {
		v, err := int8s(row, 1)
		if err != nil || len(row) < 3 {
			return fmt.Errorf("verify: snapshot changes: %w", errors.Join(err, errCopyFormat))
		}
		set, err := changes.Parse(string(row[1]))
		if err != nil {
			fail("snapshot %d: %v", v[0], err)
		}
		if v[0] <= 1 {
			continue // the initial snapshot and the setup commit
		}
		if row[2] == nil {
			fail("snapshot %d carries no commit tag", v[0])
			continue
		}
		if set.CompactionOnly() != strings.HasPrefix(string(row[2]), "compactor-") {
			fail("snapshot %d (%s): compaction-only=%v does not match its writer", v[0], row[2], set.CompactionOnly())
		}
		byTag[string(row[2])] = append(byTag[string(row[2])], change{v[0], string(row[1])})
	}
	// A commit in doubt (its COMMIT went unanswered) counts as landed if
	// its tag is there; everything below then checks it like the others,
	// so it must be there whole or not at all.
	landed := r.landed
	doubtful := 0
	for _, l := range r.inDoubt {
		if len(byTag[l.Tag]) > 0 {
			landed = append(landed[:len(landed):len(landed)], l)
			doubtful++
		}
	}
	if want := 2 + len(landed); len(ids) != want {
		fail("%d snapshots, want %d (initial + setup + %d acknowledged commits + %d in doubt that landed)", len(ids), want, len(r.landed), doubtful)
	}
	acked := map[string]bool{}
	for _, l := range landed {
		acked[l.Tag] = true
		got := byTag[l.Tag]
		if len(got) != 1 {
			fail("commit %s acknowledged at snapshot %d appears %d times", l.Tag, l.Snapshot, len(got))
			continue
		}
		if got[0].snapshot != l.Snapshot {
			fail("commit %s acknowledged at snapshot %d is recorded at snapshot %d", l.Tag, l.Snapshot, got[0].snapshot)
		}
		kind := changes.InsertedIntoTable
		if l.Kind == "merge" {
			kind = changes.MergeAdjacent
		}
		if want := (changes.Set{{Kind: kind, ID: l.Table}}).String(); got[0].changes != want {
			fail("commit %s: changes_made %q, want %q", l.Tag, got[0].changes, want)
		}
	}
	for tag, got := range byTag {
		if !acked[tag] {
			fail("snapshot %d carries tag %s, which was never acknowledged", got[0].snapshot, tag)
		}
	}

	// Data files and row ids.
	rows, err = copyOut(ctx, conn, localScan(q, "ducklake_data_file", "data_file_id", "table_id", "begin_snapshot", "end_snapshot", "record_count", "row_id_start"))
	if err != nil {
		return fmt.Errorf("verify: data files: %w", err)
	}
	ledger := map[int64]Landed{}
	consumedBy := map[int64]string{}
	insertedRows := map[int64]int64{}
	for _, l := range landed {
		if l.Kind != "insert" && l.Kind != "merge" {
			continue
		}
		ledger[l.File] = l
		for _, s := range l.Sources {
			consumedBy[s] = l.Tag
		}
		if l.Kind == "insert" {
			insertedRows[l.Table] += l.Records
		}
	}
	type live struct {
		id      int64
		records int64
		spans   []Span
	}
	liveByTable := map[int64][]live{}
	liveIDs := map[int64]bool{}
	for _, row := range rows {
		v, err := int8s(row, 3)
		if err != nil || len(row) < 6 {
			return fmt.Errorf("verify: data files: %w", errors.Join(err, errCopyFormat))
		}
		id, table, begin := v[0], v[1], v[2]
		if row[3] != nil {
			fail("data file %d has end_snapshot set; the workload never ends files", id)
			continue
		}
		records, _, err1 := int8(row[4])
		start, hasStart, err2 := int8(row[5])
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("verify: data files: %w", err)
		}
		liveIDs[id] = true
		l, known := ledger[id]
		if !known {
			fail("live data file %d was registered by no acknowledged commit", id)
			continue
		}
		if tag, gone := consumedBy[id]; gone {
			fail("data file %d is live but merge %s consumed it", id, tag)
		}
		if begin != l.Begin {
			fail("data file %d: begin_snapshot %d, want %d", id, begin, l.Begin)
		}
		if records != l.Records {
			fail("data file %d: record_count %d, want %d", id, records, l.Records)
		}
		spans := l.RowIDs
		if hasStart {
			spans = []Span{{start, start + records}}
			if len(l.RowIDs) != 1 || l.RowIDs[0] != spans[0] {
				fail("data file %d: row_id_start %d names ids %v, but the file holds %v", id, start, spans, l.RowIDs)
			}
		}
		liveByTable[table] = append(liveByTable[table], live{id, records, spans})
	}
	for id, l := range ledger {
		if !liveIDs[id] {
			if _, gone := consumedBy[id]; !gone {
				fail("data file %d of commit %s vanished without a merge", id, l.Tag)
			}
		}
	}

	// Table stats against the live files.
	rows, err = copyOut(ctx, conn, localScan(q, "ducklake_table_stats", "table_id", "record_count", "file_size_bytes", "next_row_id"))
	if err != nil {
		return fmt.Errorf("verify: table stats: %w", err)
	}
	tstats := map[int64][2]int64{}
	for _, row := range rows {
		v, err := int8s(row, 4)
		if err != nil {
			return fmt.Errorf("verify: table stats: %w", err)
		}
		if _, dup := tstats[v[0]]; dup {
			fail("table %d has more than one table_stats row", v[0])
		}
		tstats[v[0]] = [2]int64{v[1], v[3]}
	}
	for _, table := range r.tableIDs {
		files := liveByTable[table]
		var spans []Span
		var records int64
		for _, f := range files {
			spans = append(spans, f.spans...)
			records += f.records
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].Lo < spans[j].Lo })
		next := int64(0)
		for _, s := range spans {
			if s.Lo < next {
				fail("table %d: row ids [%d,%d) overlap another live file", table, s.Lo, s.Hi)
			} else if s.Lo > next {
				fail("table %d: row ids [%d,%d) are held by no live file", table, next, s.Lo)
			}
			next = max(next, s.Hi)
		}
		st, ok := tstats[table]
		if !ok {
			if insertedRows[table] != 0 {
				fail("table %d: no table_stats row after %d inserted rows", table, insertedRows[table])
			}
			continue
		}
		if st[1] != next {
			fail("table %d: next_row_id %d, but live files end at %d", table, st[1], next)
		}
		if st[1] != insertedRows[table] {
			fail("table %d: next_row_id %d, but acknowledged inserts registered %d rows", table, st[1], insertedRows[table])
		}
		if st[0] != records {
			fail("table %d: record_count %d, live files hold %d", table, st[0], records)
		}
	}

	// Scheduled deletions are exactly the merge sources.
	rows, err = copyOut(ctx, conn, localScan(q, "ducklake_files_scheduled_for_deletion", "data_file_id"))
	if err != nil {
		return fmt.Errorf("verify: scheduled deletions: %w", err)
	}
	scheduled := map[int64]int{}
	for _, row := range rows {
		v, err := int8s(row, 1)
		if err != nil {
			return fmt.Errorf("verify: scheduled deletions: %w", err)
		}
		scheduled[v[0]]++
	}
	for id, tag := range consumedBy {
		if scheduled[id] != 1 {
			fail("file %d consumed by %s is scheduled %d times, want once", id, tag, scheduled[id])
		}
	}
	for id := range scheduled {
		if _, ok := consumedBy[id]; !ok {
			fail("file %d is scheduled for deletion but no acknowledged merge consumed it", id)
		}
	}

	// Column stats follow their files.
	rows, err = copyOut(ctx, conn, localScan(q, "ducklake_file_column_stats", "data_file_id"))
	if err != nil {
		return fmt.Errorf("verify: file column stats: %w", err)
	}
	perFile := map[int64]int{}
	for _, row := range rows {
		v, err := int8s(row, 1)
		if err != nil {
			return fmt.Errorf("verify: file column stats: %w", err)
		}
		perFile[v[0]]++
	}
	cols := r.Config.WithDefaults().Columns
	for id := range liveIDs {
		if perFile[id] != cols {
			fail("live file %d has %d column-stats rows, want %d", id, perFile[id], cols)
		}
	}
	for id := range perFile {
		if !liveIDs[id] {
			fail("column stats for file %d, which is not live", id)
		}
	}
	return errors.Join(problems...)
}
