// Package verify checks the persisted DuckLake catalog state for the
// invariants maintenance (compaction, flush, expiry, cleanup) must keep:
// no dangling file reference, no tombstone dropped while history still
// needs it, no file removed without being scheduled, no gap in the
// retained snapshots, and a row-id high-water mark above every row id in
// use.
//
// Check is pure over a decoded State, so tests can build any state by
// hand; FromStored decodes one catalog as the store holds it
// (commit.ReadStore) and CheckStore does both for every catalog of a store.
//
// What the catalog alone can prove is limited: a file that was hard-deleted
// and whose every reference went with it leaves no trace, so "every removed
// file is scheduled or cleaned" is checked through the references that
// survive (delete files, stats, partition values, inlined deletes): a file id
// that something still names but that has no data-file row must be in
// ducklake_files_scheduled_for_deletion.
package verify

import (
	"fmt"
	"strings"

	"slices"
	"sort"

	"github.com/moraine-db/moraine/internal/commit/changes"
)

// Kind classifies a violation; tests and callers branch on it.
type Kind string

const (
	// KindSnapshotGap: a retained snapshot id repeats.
	KindSnapshotGap Kind = "snapshot-gap"
	// KindDanglingDeleteFile: a delete file names a data file that has no
	// ducklake_data_file row, or one of another table.
	KindDanglingDeleteFile Kind = "dangling-delete-file"
	// KindDeleteFileInvisible: at a retained snapshot a delete file is
	// visible but the data file it applies to is not (or an inlined
	// deletion begins at a retained snapshot where its file is not visible).
	KindDeleteFileInvisible Kind = "delete-file-invisible"
	// KindDanglingStats: a per-file row (column stats, variant stats,
	// partition value) names a data file that has no ducklake_data_file row.
	KindDanglingStats Kind = "dangling-file-stats"
	// KindDanglingInlinedDelete: an inlined deletion names a data file that
	// has no ducklake_data_file row.
	KindDanglingInlinedDelete Kind = "dangling-inlined-delete"
	// KindTombstoneDropped: a delete file ended while its data file stays
	// visible at a retained snapshot, and no delete file at least as large
	// takes over at that snapshot: the deleted rows would come back.
	KindTombstoneDropped Kind = "tombstone-dropped"
	// KindUnscheduled: a file id is still referenced but its data file row
	// is gone, and it is not in the deletion schedule.
	KindUnscheduled Kind = "unscheduled-file"
	// KindScheduledLive: a file in the deletion schedule still has a
	// data-file or delete-file row: cleanup would remove bytes the catalog
	// still reads.
	KindScheduledLive Kind = "scheduled-but-referenced"
	// KindRowID: next_row_id is not above a row id in use, a table with
	// files has no table_stats row, or a transaction-local row id (≥ 10^18)
	// was persisted.
	KindRowID Kind = "row-id"
	// KindCompactionMixed: a snapshot's change set mixes compaction
	// (merge_adjacent, rewrite_delete) with other changes; such a commit
	// escaped the row-id hold and the next_row_id check, so the compacted
	// table's row ids deserve a look (a merge over it may have renumbered
	// rows).
	KindCompactionMixed Kind = "compaction-mixed"
)

// Violation is one broken invariant in one catalog.
type Violation struct {
	Catalog string
	Kind    Kind
	Detail  string
}

func (v Violation) String() string {
	if v.Catalog == "" {
		return fmt.Sprintf("%s: %s", v.Kind, v.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", v.Catalog, v.Kind, v.Detail)
}

// DataFile is one ducklake_data_file row (the columns verify needs).
type DataFile struct {
	ID, TableID, Begin int64
	End                *int64 // nil: live
	RowIDStart         *int64 // nil: row ids embedded in the file
	RecordCount        int64
	// PartialMax is set on flush and multi-source merge outputs; such a
	// file may hold several versions of one row id (an inlined UPDATE keeps
	// the id), so row_id_start+record_count does not bound its ids.
	PartialMax *int64
}

// DeleteFile is one ducklake_delete_file row.
type DeleteFile struct {
	ID, TableID, Begin int64
	End                *int64
	DataFileID         int64
	DeleteCount        int64
}

// FileRef is a per-file row of another table (column stats, variant
// stats, partition value) naming a data file.
type FileRef struct {
	Table  string
	FileID int64
}

// TableStats is one ducklake_table_stats row.
type TableStats struct {
	TableID, NextRowID int64
}

// InlinedRow is one row of a ducklake_inlined_data_<T>_<V> table.
type InlinedRow struct {
	Table   string
	TableID int64
	RowID   int64
	Begin   int64
	End     *int64
}

// InlinedDelete is one row of a ducklake_inlined_delete_<T> table.
type InlinedDelete struct {
	Table   string
	TableID int64
	FileID  int64
	RowID   int64
	Begin   int64
}

// SnapshotChanges is one ducklake_snapshot_changes row: a snapshot and
// the change set it recorded.
type SnapshotChanges struct {
	Snapshot int64
	Changes  string
}

// State is the part of one DuckLake catalog verify reads.
type State struct {
	Name           string
	Snapshots      []int64
	Changes        []SnapshotChanges
	DataFiles      []DataFile
	DeleteFiles    []DeleteFile
	FileRefs       []FileRef
	Scheduled      []int64
	TableStats     []TableStats
	InlinedRows    []InlinedRow
	InlinedDeletes []InlinedDelete
}

// txnLocalRowID is where DuckLake's transaction-local row ids start; none
// may reach the catalog.
const txnLocalRowID = int64(1_000_000_000_000_000_000)

func visible(begin int64, end *int64, s int64) bool {
	return s >= begin && (end == nil || s < *end)
}

func span(begin int64, end *int64) string {
	if end == nil {
		return fmt.Sprintf("[%d, live)", begin)
	}
	return fmt.Sprintf("[%d, %d)", begin, *end)
}

// Check returns every violation in s, in a stable order (by check, then by
// id). An empty result means consistent.
func Check(s *State) []Violation {
	c := &checker{s: s}
	c.snapshots()
	c.index()
	c.deleteFiles()
	c.fileRefs()
	c.tombstones()
	c.schedule()
	c.rowIDs()
	c.compactions()
	return c.out
}

// compactions reports change sets that mix compaction with anything else,
// which the commit path refuses: DuckLake never writes one.
func (c *checker) compactions() {
	for _, sc := range c.s.Changes {
		set, err := changes.Parse(sc.Changes)
		if err != nil {
			continue // an unparsable change set is not this check's finding
		}
		var comp, other []string
		for _, e := range set {
			if e.Kind == changes.MergeAdjacent || e.Kind == changes.RewriteDelete {
				comp = append(comp, fmt.Sprintf("%s:%d", e.Kind, e.ID))
			} else {
				other = append(other, e.Kind.String())
			}
		}
		if len(comp) > 0 && len(other) > 0 {
			c.add(KindCompactionMixed, "snapshot %d mixes %s with %s: its files escaped the row-id hold and the next_row_id check",
				sc.Snapshot, strings.Join(comp, ", "), strings.Join(other, ", "))
		}
	}
}

type checker struct {
	s         *State
	out       []Violation
	retained  []int64 // sorted
	files     map[int64]*DataFile
	deletes   map[int64]*DeleteFile
	scheduled map[int64]bool
	// missing collects referenced file ids that have no data-file row.
	missing map[int64]string
}

func (c *checker) add(k Kind, format string, args ...any) {
	c.out = append(c.out, Violation{Catalog: c.s.Name, Kind: k, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) snapshots() {
	c.retained = append([]int64(nil), c.s.Snapshots...)
	sort.Slice(c.retained, func(i, j int) bool { return c.retained[i] < c.retained[j] })
	for i := 1; i < len(c.retained); i++ {
		prev, cur := c.retained[i-1], c.retained[i]
		// Holes are legitimate: expire_snapshots(versions => [...])
		// removes snapshots from the middle.
		if cur == prev {
			c.add(KindSnapshotGap, "snapshot %d appears more than once", cur)
		}
	}
}

func (c *checker) index() {
	c.files = make(map[int64]*DataFile, len(c.s.DataFiles))
	for i := range c.s.DataFiles {
		c.files[c.s.DataFiles[i].ID] = &c.s.DataFiles[i]
	}
	c.deletes = make(map[int64]*DeleteFile, len(c.s.DeleteFiles))
	for i := range c.s.DeleteFiles {
		c.deletes[c.s.DeleteFiles[i].ID] = &c.s.DeleteFiles[i]
	}
	c.scheduled = make(map[int64]bool, len(c.s.Scheduled))
	for _, id := range c.s.Scheduled {
		c.scheduled[id] = true
	}
	c.missing = map[int64]string{}
}

// retainedIn calls fn for each retained snapshot in [begin, end).
func (c *checker) retainedIn(begin int64, end *int64, fn func(s int64) bool) {
	i := sort.Search(len(c.retained), func(i int) bool { return c.retained[i] >= begin })
	for ; i < len(c.retained); i++ {
		if end != nil && c.retained[i] >= *end {
			return
		}
		if !fn(c.retained[i]) {
			return
		}
	}
}

func (c *checker) isRetained(s int64) bool {
	_, ok := slices.BinarySearch(c.retained, s)
	return ok
}

func (c *checker) noteMissing(id int64, by string) {
	if _, ok := c.missing[id]; !ok {
		c.missing[id] = by
	}
}

func (c *checker) deleteFiles() {
	for _, d := range c.s.DeleteFiles {
		f := c.files[d.DataFileID]
		if f == nil {
			c.add(KindDanglingDeleteFile, "delete file %d %s names data file %d, which has no ducklake_data_file row", d.ID, span(d.Begin, d.End), d.DataFileID)
			c.noteMissing(d.DataFileID, fmt.Sprintf("delete file %d", d.ID))
			continue
		}
		if f.TableID != d.TableID {
			c.add(KindDanglingDeleteFile, "delete file %d of table %d names data file %d of table %d", d.ID, d.TableID, f.ID, f.TableID)
		}
		// One report per delete file: the first retained snapshot where it
		// is visible and its data file is not.
		c.retainedIn(d.Begin, d.End, func(s int64) bool {
			if visible(f.Begin, f.End, s) {
				return true
			}
			c.add(KindDeleteFileInvisible, "at snapshot %d delete file %d %s is visible but its data file %d %s is not", s, d.ID, span(d.Begin, d.End), f.ID, span(f.Begin, f.End))
			return false
		})
	}
}

func (c *checker) fileRefs() {
	for _, r := range c.s.FileRefs {
		if c.files[r.FileID] == nil {
			c.add(KindDanglingStats, "%s row names data file %d, which has no ducklake_data_file row", r.Table, r.FileID)
			c.noteMissing(r.FileID, r.Table)
		}
	}
	for _, d := range c.s.InlinedDeletes {
		f := c.files[d.FileID]
		if f == nil {
			c.add(KindDanglingInlinedDelete, "%s deletes row %d of data file %d (at snapshot %d), which has no ducklake_data_file row", d.Table, d.RowID, d.FileID, d.Begin)
			c.noteMissing(d.FileID, d.Table)
			continue
		}
		// An inlined deletion applies from its begin_snapshot on, for as
		// long as the file lives; at a retained begin the file must be
		// visible.
		if c.isRetained(d.Begin) && !visible(f.Begin, f.End, d.Begin) {
			c.add(KindDeleteFileInvisible, "%s deletes row %d of data file %d at snapshot %d, where the file %s is not visible", d.Table, d.RowID, f.ID, d.Begin, span(f.Begin, f.End))
		}
	}
}

// tombstones: a delete file that ended while its data file is still
// visible at a retained snapshot at or after the end must be succeeded by a
// delete file of the same data file that is visible there and deletes at
// least as many rows (deletes accumulate; a replacement carries the old
// positions forward).
func (c *checker) tombstones() {
	byFile := map[int64][]*DeleteFile{}
	for i := range c.s.DeleteFiles {
		d := &c.s.DeleteFiles[i]
		byFile[d.DataFileID] = append(byFile[d.DataFileID], d)
	}
	for _, d := range c.s.DeleteFiles {
		if d.End == nil || d.DeleteCount == 0 {
			continue
		}
		f := c.files[d.DataFileID]
		if f == nil {
			continue // reported as dangling
		}
		c.retainedIn(*d.End, f.End, func(s int64) bool {
			if !visible(f.Begin, f.End, s) {
				return true
			}
			for _, o := range byFile[d.DataFileID] {
				if o.ID != d.ID && visible(o.Begin, o.End, s) && o.DeleteCount >= d.DeleteCount {
					return true
				}
			}
			c.add(KindTombstoneDropped, "delete file %d (%d rows of data file %d) ended at snapshot %d, but at retained snapshot %d the data file is visible with no delete file carrying those deletes", d.ID, d.DeleteCount, f.ID, *d.End, s)
			return false
		})
	}
}

func (c *checker) schedule() {
	ids := make([]int64, 0, len(c.missing))
	for id := range c.missing {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if !c.scheduled[id] {
			c.add(KindUnscheduled, "file %d is still named by %s but has no data-file row and is not in ducklake_files_scheduled_for_deletion", id, c.missing[id])
		}
	}
	seen := map[int64]bool{}
	for _, id := range c.s.Scheduled {
		if seen[id] {
			continue
		}
		seen[id] = true
		if f := c.files[id]; f != nil {
			c.add(KindScheduledLive, "file %d is scheduled for deletion but is still data file %d of table %d %s", id, id, f.TableID, span(f.Begin, f.End))
		}
		if d := c.deletes[id]; d != nil {
			c.add(KindScheduledLive, "file %d is scheduled for deletion but is still delete file %d of data file %d %s", id, id, d.DataFileID, span(d.Begin, d.End))
		}
	}
}

func (c *checker) rowIDs() {
	next := map[int64]int64{}
	for _, ts := range c.s.TableStats {
		next[ts.TableID] = ts.NextRowID
	}
	noStats := map[int64]bool{}
	for _, f := range c.s.DataFiles {
		n, ok := next[f.TableID]
		if !ok {
			if !noStats[f.TableID] {
				noStats[f.TableID] = true
				c.add(KindRowID, "table %d has data file %d but no ducklake_table_stats row", f.TableID, f.ID)
			}
			continue
		}
		if f.RowIDStart == nil {
			continue
		}
		start := *f.RowIDStart
		if start < 0 || start >= txnLocalRowID {
			c.add(KindRowID, "data file %d has row_id_start %d, outside the committed row-id space", f.ID, start)
			continue
		}
		if f.PartialMax != nil {
			continue
		}
		if end := start + f.RecordCount; end > n {
			c.add(KindRowID, "data file %d of table %d holds row ids [%d, %d) but next_row_id is %d", f.ID, f.TableID, start, end, n)
		}
	}
	for _, r := range c.s.InlinedRows {
		n, ok := next[r.TableID]
		switch {
		case !ok:
			if !noStats[r.TableID] {
				noStats[r.TableID] = true
				c.add(KindRowID, "table %d has inlined rows in %s but no ducklake_table_stats row", r.TableID, r.Table)
			}
		case r.RowID < 0 || r.RowID >= txnLocalRowID:
			c.add(KindRowID, "%s holds row id %d, outside the committed row-id space", r.Table, r.RowID)
		case r.RowID >= n:
			c.add(KindRowID, "%s holds row id %d but next_row_id of table %d is %d", r.Table, r.RowID, r.TableID, n)
		}
	}
}
