package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/workload"
)

// errPrefix is wrapped by every problem checkPrefix reports.
var errPrefix = errors.New("catalog is not an acknowledged prefix")

// catalogView is the part of a workload catalog the prefix check reads.
type catalogView struct {
	snapshots []int64            // sorted snapshot ids
	nextFile  map[int64]int64    // snapshot → next_file_id
	tagAt     map[int64]string   // snapshot → commit_message
	changeAt  map[int64]string   // snapshot → changes_made
	files     map[int64]dfile    // data_file_id → row
	stats     map[int64][2]int64 // table → (record_count, next_row_id)
	scheduled map[int64]int      // data_file_id → times scheduled
	colStats  map[int64]int      // data_file_id → column-stats rows
}

type dfile struct {
	id, table, begin, records, start int64
	ended, hasStart                  bool
}

// query runs one simple-protocol SELECT and returns its text rows.
func query(ctx context.Context, conn *pgconn.PgConn, sql string) ([][][]byte, error) {
	res, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%s: %d results", sql, len(res))
	}
	return res[0].Rows, nil
}

func num(b []byte) (int64, bool, error) {
	if b == nil {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("not an integer: %q", b)
	}
	return v, true, nil
}

func nums(row [][]byte, n int) ([]int64, error) {
	if len(row) < n {
		return nil, fmt.Errorf("%d fields, want %d", len(row), n)
	}
	out := make([]int64, n)
	for i := range out {
		v, ok, err := num(row[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("field %d is NULL", i)
		}
		out[i] = v
	}
	return out, nil
}

func readView(ctx context.Context, conn *pgconn.PgConn) (*catalogView, error) {
	v := &catalogView{nextFile: map[int64]int64{}, tagAt: map[int64]string{}, changeAt: map[int64]string{},
		files: map[int64]dfile{}, stats: map[int64][2]int64{}, scheduled: map[int64]int{}, colStats: map[int64]int{}}
	rows, err := query(ctx, conn, "SELECT snapshot_id, next_file_id FROM public.ducklake_snapshot")
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 2)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		v.snapshots = append(v.snapshots, n[0])
		v.nextFile[n[0]] = n[1]
	}
	sort.Slice(v.snapshots, func(i, j int) bool { return v.snapshots[i] < v.snapshots[j] })
	if rows, err = query(ctx, conn, "SELECT snapshot_id, changes_made, commit_message FROM public.ducklake_snapshot_changes"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 1)
		if err != nil || len(r) < 3 {
			return nil, fmt.Errorf("snapshot changes: %v", err)
		}
		if _, dup := v.changeAt[n[0]]; dup {
			return nil, fmt.Errorf("%w: snapshot %d has two change rows", errPrefix, n[0])
		}
		v.changeAt[n[0]] = string(r[1])
		if r[2] != nil {
			v.tagAt[n[0]] = string(r[2])
		}
	}
	if rows, err = query(ctx, conn, "SELECT data_file_id, table_id, begin_snapshot, end_snapshot, record_count, row_id_start FROM public.ducklake_data_file"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 3)
		if err != nil || len(r) < 6 {
			return nil, fmt.Errorf("data file: %v", err)
		}
		f := dfile{id: n[0], table: n[1], begin: n[2], ended: r[3] != nil}
		var e1, e2 error
		f.records, _, e1 = num(r[4])
		f.start, f.hasStart, e2 = num(r[5])
		if err := errors.Join(e1, e2); err != nil {
			return nil, fmt.Errorf("data file: %w", err)
		}
		if _, dup := v.files[f.id]; dup {
			return nil, fmt.Errorf("%w: data file %d appears twice", errPrefix, f.id)
		}
		v.files[f.id] = f
	}
	if rows, err = query(ctx, conn, "SELECT table_id, record_count, next_row_id FROM public.ducklake_table_stats"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 3)
		if err != nil {
			return nil, fmt.Errorf("table stats: %w", err)
		}
		v.stats[n[0]] = [2]int64{n[1], n[2]}
	}
	if rows, err = query(ctx, conn, "SELECT data_file_id FROM public.ducklake_files_scheduled_for_deletion"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 1)
		if err != nil {
			return nil, fmt.Errorf("scheduled: %w", err)
		}
		v.scheduled[n[0]]++
	}
	if rows, err = query(ctx, conn, "SELECT data_file_id FROM public.ducklake_file_column_stats"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		n, err := nums(r, 1)
		if err != nil {
			return nil, fmt.Errorf("column stats: %w", err)
		}
		v.colStats[n[0]]++
	}
	return v, nil
}

// parseTag splits a workload tag: "w<w>-c<c>" → (w, c), "compactor-<r>" →
// (-1, r).
func parseTag(tag string) (writer, seq int, ok bool) {
	if r, found := strings.CutPrefix(tag, "compactor-"); found {
		n, err := strconv.Atoi(r)
		return -1, n, err == nil
	}
	var w, c int
	if _, err := fmt.Sscanf(tag, "w%d-c%d", &w, &c); err != nil {
		return 0, 0, false
	}
	return w, c, true
}

// checkPrefix reads the catalog over conn and checks that it is exactly the
// acknowledged prefix of a workload run that may have been cut short:
//
//   - snapshot ids are dense; every snapshot after the setup commit carries
//     exactly one workload tag, and no tag appears twice;
//   - every acknowledged commit is there, at the snapshot it was
//     acknowledged with; a commit that was not acknowledged may be there only
//     if it was the one in flight on its connection (its writer's or the
//     compactor's last attempt, after everything acknowledged on it);
//   - nothing is partly there: each commit's data file (id next_file_id of
//     the previous snapshot) exists, live, or was consumed by a merge and
//     scheduled for deletion; next_file_id advances by one per commit; each
//     live file has all its column stats and nothing else has any; live
//     files' row ids per table tile [0, next_row_id) exactly and their
//     record counts sum to the table's; acknowledged files are as registered
//     and acknowledged merges' sources are gone and scheduled once.
//
// It returns how many unacknowledged commits it found present.
func checkPrefix(ctx context.Context, conn *pgconn.PgConn, res *workload.Result, columns int) (int, error) {
	v, err := readView(ctx, conn)
	if err != nil {
		return 0, err
	}
	var problems []error
	fail := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{errPrefix}, args...)...))
	}
	for i, id := range v.snapshots {
		if id != int64(i) {
			fail("snapshot ids not dense: position %d holds %d", i, id)
			break
		}
	}
	var landed []workload.Landed
	if res != nil {
		landed = res.Landed()
	}
	acked := map[string]workload.Landed{}
	lastAcked := map[int]int{} // writer (-1 compactor) → highest acknowledged seq
	for _, l := range landed {
		acked[l.Tag] = l
		if w, c, ok := parseTag(l.Tag); ok {
			if prev, seen := lastAcked[w]; !seen || c > prev {
				lastAcked[w] = c
			}
		}
	}
	at := map[string]int64{}
	extra := map[int]string{}
	for s, tag := range v.tagAt {
		if s <= 1 {
			continue
		}
		if prev, dup := at[tag]; dup {
			fail("tag %s at snapshots %d and %d", tag, prev, s)
		}
		at[tag] = s
		if _, ok := acked[tag]; ok {
			continue
		}
		w, c, ok := parseTag(tag)
		if !ok {
			fail("snapshot %d carries unknown tag %q", s, tag)
			continue
		}
		if prev, seen := lastAcked[w]; seen && c <= prev {
			fail("unacknowledged %s at snapshot %d precedes acknowledged commit %d of the same connection", tag, s, prev)
		}
		if other, dup := extra[w]; dup {
			fail("two unacknowledged commits of one connection present: %s and %s", other, tag)
		}
		extra[w] = tag
	}
	maxSnap := int64(-1)
	if n := len(v.snapshots); n > 0 {
		maxSnap = v.snapshots[n-1]
	}
	for s := int64(2); s <= maxSnap; s++ {
		if _, ok := v.tagAt[s]; !ok {
			fail("snapshot %d carries no workload tag", s)
		}
	}
	for _, l := range landed {
		s, ok := at[l.Tag]
		if !ok {
			fail("acknowledged commit %s (snapshot %d) is missing", l.Tag, l.Snapshot)
			continue
		}
		if s != l.Snapshot {
			fail("acknowledged commit %s at snapshot %d, acknowledged as %d", l.Tag, s, l.Snapshot)
		}
	}

	// Each commit's file is there (live, or consumed and scheduled).
	live := map[int64]dfile{}
	for id, f := range v.files {
		if f.ended {
			fail("data file %d ended; the workload never ends files", id)
			continue
		}
		live[id] = f
	}
	for s := int64(2); s <= maxSnap; s++ {
		prev, ok1 := v.nextFile[s-1]
		cur, ok2 := v.nextFile[s]
		if !ok1 || !ok2 {
			continue
		}
		if cur != prev+1 {
			fail("snapshot %d: next_file_id %d after %d", s, cur, prev)
			continue
		}
		f, isLive := live[prev]
		switch {
		case isLive && f.begin > s:
			fail("snapshot %d registered file %d with begin_snapshot %d", s, prev, f.begin)
		case isLive && !strings.HasPrefix(v.tagAt[s], "compactor-") && f.begin != s:
			fail("insert at snapshot %d registered file %d with begin_snapshot %d", s, prev, f.begin)
		case !isLive && v.scheduled[prev] == 0:
			fail("snapshot %d (%s) registered file %d, which is neither live nor scheduled for deletion", s, v.tagAt[s], prev)
		}
	}
	if maxSnap >= 1 {
		for id := range v.files {
			if id >= v.nextFile[maxSnap] {
				fail("data file %d is beyond next_file_id %d", id, v.nextFile[maxSnap])
			}
		}
	}
	for id := range v.scheduled {
		if _, ok := live[id]; ok {
			fail("file %d is live and scheduled for deletion", id)
		}
		if v.scheduled[id] != 1 {
			fail("file %d scheduled %d times", id, v.scheduled[id])
		}
	}
	for id := range live {
		if v.colStats[id] != columns {
			fail("live file %d has %d column-stats rows, want %d", id, v.colStats[id], columns)
		}
	}
	for id := range v.colStats {
		if _, ok := live[id]; !ok {
			fail("column stats for file %d, which is not live", id)
		}
	}
	for _, l := range landed {
		if l.Kind != "insert" && l.Kind != "merge" {
			continue
		}
		if f, ok := live[l.File]; ok {
			if f.records != l.Records || f.begin != l.Begin {
				fail("acknowledged %s: file %d has %d records from %d, registered %d from %d", l.Tag, l.File, f.records, f.begin, l.Records, l.Begin)
			}
		} else if v.scheduled[l.File] == 0 {
			fail("acknowledged %s: file %d is gone but not scheduled", l.Tag, l.File)
		}
		for _, src := range l.Sources {
			if _, ok := live[src]; ok || v.scheduled[src] != 1 {
				fail("acknowledged merge %s: source %d live=%v scheduled=%d", l.Tag, src, ok, v.scheduled[src])
			}
		}
	}

	// Row ids and record counts per table.
	type span struct{ lo, hi int64 }
	byTable := map[int64][]span{}
	records := map[int64]int64{}
	for _, f := range live {
		if !f.hasStart {
			fail("live file %d has no row_id_start", f.id)
			continue
		}
		byTable[f.table] = append(byTable[f.table], span{f.start, f.start + f.records})
		records[f.table] += f.records
	}
	for table, spans := range byTable {
		if _, ok := v.stats[table]; !ok {
			fail("table %d has live files but no stats", table)
		}
		_ = spans
	}
	for table, st := range v.stats {
		spans := byTable[table]
		sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
		next := int64(0)
		for _, s := range spans {
			if s.lo != next {
				fail("table %d: live row ids jump from %d to [%d,%d)", table, next, s.lo, s.hi)
			}
			next = max(next, s.hi)
		}
		if next != st[1] {
			fail("table %d: live files end at row id %d, next_row_id is %d", table, next, st[1])
		}
		if records[table] != st[0] {
			fail("table %d: live files hold %d records, record_count is %d", table, records[table], st[0])
		}
	}
	return len(extra), errors.Join(problems...)
}
