package verify

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// history simulates DuckLake maintenance on one table the way the
// protocol does it (docs/reference/ducklake-catalog-protocol.md §3.6, §3.10-§3.12, §5)
// and keeps the resulting catalog State.
type history struct {
	s        State
	snap     int64 // latest snapshot id
	nextFile int64
	nextRow  int64
}

func newHistory() *history {
	h := &history{s: State{Name: "lake", Snapshots: []int64{0}}}
	h.s.TableStats = []TableStats{{TableID: 1}}
	return h
}

func (h *history) commit() int64 {
	h.snap++
	h.s.Snapshots = append(h.s.Snapshots, h.snap)
	return h.snap
}

func (h *history) liveFiles() []int {
	var out []int
	for i, f := range h.s.DataFiles {
		if f.End == nil {
			out = append(out, i)
		}
	}
	return out
}

func (h *history) liveDelete(file int64) int {
	for i, d := range h.s.DeleteFiles {
		if d.DataFileID == file && d.End == nil {
			return i
		}
	}
	return -1
}

func (h *history) insert(n int64) {
	s := h.commit()
	h.s.DataFiles = append(h.s.DataFiles, DataFile{ID: h.nextFile, TableID: 1, Begin: s, RowIDStart: p(h.nextRow), RecordCount: n})
	h.s.FileRefs = append(h.s.FileRefs, FileRef{Table: "ducklake_file_column_stats", FileID: h.nextFile})
	h.nextFile++
	h.nextRow += n
	h.s.TableStats[0].NextRowID = h.nextRow
}

// del deletes k more rows of a live file: the old delete file (if any) is
// ended and replaced by one carrying its deletes too.
func (h *history) del(fi int, k int64) {
	f := h.s.DataFiles[fi]
	old := h.liveDelete(f.ID)
	count := k
	if old >= 0 {
		count += h.s.DeleteFiles[old].DeleteCount
	}
	if count > f.RecordCount {
		return
	}
	s := h.commit()
	if old >= 0 {
		h.s.DeleteFiles[old].End = p(s)
	}
	h.s.DeleteFiles = append(h.s.DeleteFiles, DeleteFile{ID: h.nextFile, TableID: 1, Begin: s, DataFileID: f.ID, DeleteCount: count})
	h.nextFile++
}

// merge merges the live files without deletes: hard-deleted, scheduled,
// output backdated to the first source's begin with embedded ids.
func (h *history) merge() {
	var src []int
	for _, i := range h.liveFiles() {
		if h.liveDelete(h.s.DataFiles[i].ID) < 0 {
			src = append(src, i)
		}
	}
	if len(src) < 2 {
		return
	}
	h.commit()
	begin, total := h.s.DataFiles[src[0]].Begin, int64(0)
	gone := map[int64]bool{}
	for _, i := range src {
		f := h.s.DataFiles[i]
		gone[f.ID] = true
		total += f.RecordCount
		h.s.Scheduled = append(h.s.Scheduled, f.ID)
	}
	h.dropFiles(gone)
	h.s.DataFiles = append(h.s.DataFiles, DataFile{ID: h.nextFile, TableID: 1, Begin: begin, RecordCount: total, PartialMax: p(h.snap)})
	h.s.FileRefs = append(h.s.FileRefs, FileRef{Table: "ducklake_file_column_stats", FileID: h.nextFile})
	h.nextFile++
}

// rewrite rewrites a live file with deletes: the source and its delete
// file end at the commit; the output embeds the survivors' ids.
func (h *history) rewrite(fi int) {
	f := h.s.DataFiles[fi]
	d := h.liveDelete(f.ID)
	if d < 0 || f.End != nil {
		return
	}
	s := h.commit()
	h.s.DeleteFiles[d].End = p(s)
	h.s.DataFiles[fi].End = p(s)
	h.s.DataFiles = append(h.s.DataFiles, DataFile{ID: h.nextFile, TableID: 1, Begin: s, RecordCount: f.RecordCount - h.s.DeleteFiles[d].DeleteCount})
	h.s.FileRefs = append(h.s.FileRefs, FileRef{Table: "ducklake_file_column_stats", FileID: h.nextFile})
	h.nextFile++
}

func (h *history) dropFiles(gone map[int64]bool) {
	h.s.DataFiles = slices.DeleteFunc(h.s.DataFiles, func(f DataFile) bool { return gone[f.ID] })
	h.s.FileRefs = slices.DeleteFunc(h.s.FileRefs, func(r FileRef) bool { return gone[r.FileID] })
	h.s.DeleteFiles = slices.DeleteFunc(h.s.DeleteFiles, func(d DeleteFile) bool {
		if gone[d.DataFileID] {
			h.s.Scheduled = append(h.s.Scheduled, d.ID)
			return true
		}
		return false
	})
}

// expire removes every snapshot older than keep (never the latest), then
// purges and schedules files whose range holds no remaining snapshot.
func (h *history) expire(keep int64) {
	keep = min(keep, h.snap)
	h.s.Snapshots = slices.DeleteFunc(h.s.Snapshots, func(s int64) bool { return s < keep })
	covered := func(b int64, e *int64) bool {
		for _, s := range h.s.Snapshots {
			if visible(b, e, s) {
				return true
			}
		}
		return false
	}
	gone := map[int64]bool{}
	for _, f := range h.s.DataFiles {
		if f.End != nil && !covered(f.Begin, f.End) {
			gone[f.ID] = true
			h.s.Scheduled = append(h.s.Scheduled, f.ID)
		}
	}
	h.dropFiles(gone)
	h.s.DeleteFiles = slices.DeleteFunc(h.s.DeleteFiles, func(d DeleteFile) bool {
		if d.End != nil && !covered(d.Begin, d.End) {
			h.s.Scheduled = append(h.s.Scheduled, d.ID)
			return true
		}
		return false
	})
}

// TestModelHistoriesAreConsistent: every catalog a protocol-shaped history
// of inserts, deletes, merges, rewrites, age-based expiries and cleanups
// produces passes Check (no false positives), and dropping any live delete
// file of a still-visible data file from it is reported.
func TestModelHistoriesAreConsistent(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHistory()
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			live := h.liveFiles()
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op == 0 || len(live) == 0:
				h.insert(rapid.Int64Range(1, 20).Draw(rt, "rows"))
			case op == 1:
				h.del(live[rapid.IntRange(0, len(live)-1).Draw(rt, "file")], rapid.Int64Range(1, 5).Draw(rt, "k"))
			case op == 2:
				h.merge()
			case op == 3:
				h.rewrite(live[rapid.IntRange(0, len(live)-1).Draw(rt, "file")])
			case op == 4:
				h.expire(rapid.Int64Range(0, h.snap).Draw(rt, "keep"))
			default:
				h.s.Scheduled = nil // cleanup_old_files(cleanup_all)
			}
			if vs := Check(&h.s); len(vs) > 0 {
				rt.Fatalf("after step %d: %s", i, list(vs))
			}
		}
		// Mutation: an ended delete file whose data file is still visible
		// at a retained snapshot after its end is a tombstone; drop its
		// live successor and Check must see it.
		for i, d := range h.s.DeleteFiles {
			if d.End != nil || d.DeleteCount == 0 {
				continue
			}
			for _, o := range h.s.DeleteFiles {
				if o.DataFileID == d.DataFileID && o.End != nil && *o.End == d.Begin && o.DeleteCount > 0 {
					broken := h.s
					broken.DeleteFiles = slices.Delete(slices.Clone(h.s.DeleteFiles), i, i+1)
					if !slices.ContainsFunc(Check(&broken), func(v Violation) bool { return v.Kind == KindTombstoneDropped }) {
						rt.Fatalf("dropping delete file %d not reported:\n%+v", d.ID, broken)
					}
					return
				}
			}
		}
	})
}
