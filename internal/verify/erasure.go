package verify

// Erasure reports, for one table, how long a deleted value stays
// recoverable (seed 004, "Hard deletes and the right to erasure"): a
// tombstone only hides a row; its bytes stay in the data file until
// compaction rewrites it, in every retained snapshot that still references
// that file, and in the object store's old versions after the file is
// removed. The window is the sum of the three: compaction lag + snapshot
// retention + object-version retention.
//
// The catalog alone cannot see the object store, so "scheduled files still
// hold bytes" means: the file is in ducklake_files_scheduled_for_deletion,
// i.e. cleanup_old_files has not yet removed it. The object-version
// retention is configuration of the bucket, so it is an input.

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
)

// ErrUnknownTable: the table named for an erasure report is not in the
// catalog (or the name is ambiguous across schemas).
var ErrUnknownTable = errors.New("verify: unknown table")

// TableName is one ducklake_table row joined to its schema name.
type TableName struct {
	ID       int64
	SchemaID int64
	Schema   string // resolved from ducklake_schema; empty if unknown
	Name     string
	Path     string // the table's data path as stored (may be relative)
	Begin    int64
	End      *int64
}

// ScheduledFile is one ducklake_files_scheduled_for_deletion row.
type ScheduledFile struct {
	FileID        int64
	Path          string
	ScheduleStart time.Time
}

// ErasureState is State plus what the erasure report needs beyond the
// invariant checks: snapshot times, table names, the deletion schedule
// with paths and times, and the global catalog options.
type ErasureState struct {
	*State
	SnapshotTimes map[int64]time.Time
	Tables        []TableName
	ScheduledRows []ScheduledFile
	Options       map[string]string // global (scope NULL) ducklake_metadata
}

// SnapshotRef is one retained snapshot that still exposes deleted rows of
// the table: through data files (with deletes, or since ended) visible at
// it, or through inlined rows that were later deleted.
type SnapshotRef struct {
	ID          int64
	Time        time.Time
	Files       []int64 // data file ids, ascending
	InlinedRows int     // deleted inlined rows still visible at this snapshot
}

// ScheduledRef is a scheduled file; Attributed says the catalog ties it to
// the table (a surviving row of the table names it, or its path lies under
// the table's path). Unattributed files are listed too: once a data-file row
// is gone the catalog may not know its table, and a compliance report must
// not drop a file it cannot rule out.
type ScheduledRef struct {
	ScheduledFile
	Attributed bool
}

// ErasureWindow is the seed's recoverability interval and its parts.
type ErasureWindow struct {
	// CompactionLag: oldest still-pending deletion of the table (live
	// delete file, inlined delete, or deleted inlined row) → now.
	CompactionLag time.Duration
	// SnapshotRetention: the expire_older_than option when set, else
	// oldest retained snapshot → now.
	SnapshotRetention time.Duration
	// RetentionSource is "expire_older_than=<value>" or "oldest retained snapshot".
	RetentionSource string
	// ObjectRetention: the object store's version retention (an input).
	ObjectRetention time.Duration
	// Total = CompactionLag + SnapshotRetention + ObjectRetention.
	Total time.Duration
}

// ErasureReport is the compliance report for one table.
type ErasureReport struct {
	Catalog   string
	Table     string // schema.table
	TableID   int64
	Snapshots []SnapshotRef
	Scheduled []ScheduledRef
	Window    ErasureWindow
	// Bound is the upper bound from configuration (bound.go); Window is
	// what the current state shows so far.
	Bound ErasureBound
}

// Erasure builds the report for table (a "schema.table", a bare table name
// unique across schemas, or a numeric table id) as of now. It is pure.
func Erasure(st *ErasureState, table string, now time.Time, cfg BoundConfig) (*ErasureReport, error) {
	tn, err := resolveTable(st, table)
	if err != nil {
		return nil, err
	}
	rep := &ErasureReport{Catalog: st.Name, Table: tn.Schema + "." + tn.Name, TableID: tn.ID}
	tid := tn.ID

	// Data files whose bytes hold deleted rows: a delete file or inlined
	// delete names them, or they ended (rewritten, or all rows deleted).
	deleted := map[int64]bool{}
	named := map[int64]bool{} // every file id a row of this table names
	for _, d := range st.DeleteFiles {
		if d.TableID == tid {
			deleted[d.DataFileID] = true
			named[d.DataFileID] = true
		}
	}
	for _, d := range st.InlinedDeletes {
		if d.TableID == tid {
			deleted[d.FileID] = true
			named[d.FileID] = true
		}
	}
	var files []DataFile
	for _, f := range st.DataFiles {
		if f.TableID != tid {
			continue
		}
		named[f.ID] = true
		if deleted[f.ID] || f.End != nil {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].ID < files[j].ID })

	snaps := append([]int64(nil), st.Snapshots...)
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] < snaps[j] })
	for _, s := range snaps {
		ref := SnapshotRef{ID: s, Time: st.SnapshotTimes[s]}
		for _, f := range files {
			if visible(f.Begin, f.End, s) {
				ref.Files = append(ref.Files, f.ID)
			}
		}
		for _, r := range st.InlinedRows {
			if r.TableID == tid && r.End != nil && visible(r.Begin, r.End, s) {
				ref.InlinedRows++
			}
		}
		if len(ref.Files) > 0 || ref.InlinedRows > 0 {
			rep.Snapshots = append(rep.Snapshots, ref)
		}
	}

	tablePaths := tablePathsOf(st, tid)
	for _, sf := range st.ScheduledRows {
		rep.Scheduled = append(rep.Scheduled, ScheduledRef{ScheduledFile: sf, Attributed: named[sf.FileID] || underAny(sf.Path, tablePaths)})
	}
	sort.Slice(rep.Scheduled, func(i, j int) bool { return rep.Scheduled[i].FileID < rep.Scheduled[j].FileID })

	rep.Window = window(st, tid, snaps, now, cfg.ObjectRetention.D)
	rep.Bound = Bound(st.Options, cfg)
	return rep, nil
}

func window(st *ErasureState, tid int64, snaps []int64, now time.Time, objectRetention time.Duration) ErasureWindow {
	since := func(t time.Time) time.Duration {
		if t.IsZero() || now.Before(t) {
			return 0
		}
		return now.Sub(t)
	}
	// The oldest pending deletion is the one with the smallest begin
	// snapshot; snapshot ids grow with time, so its time is the oldest.
	oldest := int64(-1)
	pending := func(begin int64) {
		if oldest < 0 || begin < oldest {
			oldest = begin
		}
	}
	for _, d := range st.DeleteFiles {
		if d.TableID == tid && d.End == nil {
			pending(d.Begin)
		}
	}
	for _, d := range st.InlinedDeletes {
		if d.TableID == tid {
			pending(d.Begin)
		}
	}
	for _, r := range st.InlinedRows {
		if r.TableID == tid && r.End != nil {
			pending(*r.End)
		}
	}
	var w ErasureWindow
	if oldest >= 0 {
		w.CompactionLag = since(snapshotTime(st, snaps, oldest))
	}
	if v, ok := st.Options["expire_older_than"]; ok {
		if d, err := ParseRetention(v); err == nil {
			w.SnapshotRetention, w.RetentionSource = d, "expire_older_than="+v
		}
	}
	if w.RetentionSource == "" {
		w.RetentionSource = "oldest retained snapshot"
		if len(snaps) > 0 {
			w.SnapshotRetention = since(st.SnapshotTimes[snaps[0]])
		}
	}
	w.ObjectRetention = objectRetention
	w.Total = w.CompactionLag + w.SnapshotRetention + w.ObjectRetention
	return w
}

// snapshotTime is the time of snapshot id or, when that snapshot has been
// expired, the time of the oldest retained snapshot after it (so the lag
// computed from it is a lower bound on the real wait).
func snapshotTime(st *ErasureState, snaps []int64, id int64) time.Time {
	if t, ok := st.SnapshotTimes[id]; ok {
		return t
	}
	for _, s := range snaps {
		if s >= id {
			return st.SnapshotTimes[s]
		}
	}
	return time.Time{}
}

func resolveTable(st *ErasureState, name string) (TableName, error) {
	latest := map[int64]TableName{}
	for _, t := range st.Tables {
		if cur, ok := latest[t.ID]; !ok || t.Begin > cur.Begin {
			latest[t.ID] = t
		}
	}
	if id, err := strconv.ParseInt(name, 10, 64); err == nil {
		if t, ok := latest[id]; ok {
			return t, nil
		}
		return TableName{}, fmt.Errorf("%w: no table with id %d", ErrUnknownTable, id)
	}
	schema, tbl, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, tbl = "", name
	}
	// Tiers: a live table whose current name matches; any table whose
	// current name matches (a dropped table); any table that ever had the
	// name (a renamed table). The first non-empty tier decides.
	var tiers [3][]TableName
	seen := [3]map[int64]bool{{}, {}, {}}
	add := func(tier int, t TableName) {
		if !seen[tier][t.ID] {
			seen[tier][t.ID] = true
			tiers[tier] = append(tiers[tier], t)
		}
	}
	for _, t := range st.Tables {
		if t.Name != tbl || (qualified && t.Schema != schema) {
			continue
		}
		l := latest[t.ID]
		switch {
		case l.Name == t.Name && l.Schema == t.Schema && l.End == nil:
			add(0, l)
		case l.Name == t.Name && l.Schema == t.Schema:
			add(1, l)
		default:
			add(2, l)
		}
	}
	var cands []TableName
	for _, tier := range tiers {
		if len(tier) > 0 {
			cands = tier
			break
		}
	}
	switch len(cands) {
	case 0:
		return TableName{}, fmt.Errorf("%w: %s", ErrUnknownTable, name)
	case 1:
		return cands[0], nil
	}
	return TableName{}, fmt.Errorf("%w: %s names %d tables; qualify it or pass the table id", ErrUnknownTable, name, len(cands))
}

func tablePathsOf(st *ErasureState, tid int64) []string {
	var out []string
	for _, t := range st.Tables {
		if t.ID == tid && strings.Trim(t.Path, "/") != "" {
			out = append(out, "/"+strings.Trim(t.Path, "/")+"/")
		}
	}
	return out
}

func underAny(path string, dirs []string) bool {
	p := "/" + strings.TrimPrefix(path, "/")
	for _, d := range dirs {
		if strings.Contains(p, d) {
			return true
		}
	}
	return false
}

// ParseRetention parses a retention: Go durations ("720h"), a count with
// a unit ("30d", "2w"), or DuckDB interval text as stored in
// expire_older_than ("1 week", "30 days 12:00:00", "00:05:00"). Months
// count as 30 days and years as 365.
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("verify: empty retention")
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("verify: negative retention %q", s)
		}
		return d, nil
	}
	units := map[string]time.Duration{
		"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second, "secs": time.Second,
		"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
		"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
		"mon": 30 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "months": 30 * 24 * time.Hour, "mons": 30 * 24 * time.Hour,
		"y": 365 * 24 * time.Hour, "year": 365 * 24 * time.Hour, "years": 365 * 24 * time.Hour,
	}
	fields := strings.Fields(s)
	var total time.Duration
	var ok bool
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Count(f, ":") == 2 {
			hms := strings.Split(f, ":")
			var parts [3]int64
			for j, p := range hms {
				n, err := strconv.ParseInt(p, 10, 64)
				if err != nil || n < 0 {
					return 0, fmt.Errorf("verify: bad retention %q", s)
				}
				parts[j] = n
			}
			for j, u := range []time.Duration{time.Hour, time.Minute, time.Second} {
				if total, ok = addScaled(total, parts[j], u); !ok {
					return 0, fmt.Errorf("verify: retention %q out of range", s)
				}
			}
			continue
		}
		num, unit := f, ""
		if k := strings.IndexFunc(f, func(r rune) bool { return r < '0' || r > '9' }); k > 0 {
			num, unit = f[:k], f[k:]
		} else if i+1 < len(fields) {
			i++
			unit = fields[i]
		}
		n, err := strconv.ParseInt(num, 10, 64)
		u, known := units[strings.ToLower(unit)]
		if err != nil || !known || n < 0 {
			return 0, fmt.Errorf("verify: bad retention %q", s)
		}
		if total, ok = addScaled(total, n, u); !ok {
			return 0, fmt.Errorf("verify: retention %q out of range", s)
		}
	}
	return total, nil
}

// addScaled returns total + n*u for non-negative n, u and total, or false
// when it would overflow time.Duration.
func addScaled(total time.Duration, n int64, u time.Duration) (time.Duration, bool) {
	if n > int64(math.MaxInt64/u) {
		return 0, false
	}
	d := time.Duration(n) * u
	if total > math.MaxInt64-d {
		return 0, false
	}
	return total + d, true
}

// pgEpoch is PostgreSQL's timestamp origin.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ErasureFromStored decodes one stored DuckLake catalog for Erasure.
func ErasureFromStored(c *commit.StoredCatalog) (*ErasureState, error) {
	base, err := FromStored(c)
	if err != nil {
		return nil, err
	}
	st := &ErasureState{State: base, SnapshotTimes: map[int64]time.Time{}, Options: map[string]string{}}
	each := func(table string, fn func(get func(string) datum.Value)) error {
		def, ok := c.Defs[table]
		if !ok {
			return nil
		}
		cols := newColumns(def)
		for _, raw := range c.Rows[table] {
			vals, err := raw.Decode(cols.types, nil)
			if err != nil {
				return fmt.Errorf("verify: %s: decode %s: %w", st.Name, table, err)
			}
			fn(func(name string) datum.Value {
				if i, ok := cols.idx[name]; ok {
					return vals[i]
				}
				return datum.Null
			})
		}
		return nil
	}
	ts := func(v datum.Value) time.Time {
		if v.K != datum.KindTimestampTZ && v.K != datum.KindTimestamp {
			return time.Time{}
		}
		return pgEpoch.Add(time.Duration(v.I) * time.Microsecond)
	}
	optInt := func(v datum.Value) *int64 {
		if v.K != datum.KindInt {
			return nil
		}
		i := v.I
		return &i
	}
	schemas := map[int64]string{}
	steps := []struct {
		table string
		fn    func(get func(string) datum.Value)
	}{
		{"ducklake_snapshot", func(get func(string) datum.Value) {
			st.SnapshotTimes[get("snapshot_id").Int()] = ts(get("snapshot_time"))
		}},
		{"ducklake_schema", func(get func(string) datum.Value) {
			schemas[get("schema_id").Int()] = get("schema_name").Text()
		}},
		{"ducklake_table", func(get func(string) datum.Value) {
			st.Tables = append(st.Tables, TableName{
				ID: get("table_id").Int(), Name: get("table_name").Text(), Path: get("path").Text(),
				Begin: get("begin_snapshot").Int(), End: optInt(get("end_snapshot")),
				SchemaID: get("schema_id").Int(),
			})
		}},
		{"ducklake_files_scheduled_for_deletion", func(get func(string) datum.Value) {
			st.ScheduledRows = append(st.ScheduledRows, ScheduledFile{FileID: get("data_file_id").Int(), Path: get("path").Text(), ScheduleStart: ts(get("schedule_start"))})
		}},
		{"ducklake_metadata", func(get func(string) datum.Value) {
			if get("scope").IsNull() {
				st.Options[get("key").Text()] = get("value").Text()
			}
		}},
	}
	for _, s := range steps {
		if err := each(s.table, s.fn); err != nil {
			return nil, err
		}
	}
	for i := range st.Tables {
		st.Tables[i].Schema = schemas[st.Tables[i].SchemaID]
	}
	return st, nil
}
