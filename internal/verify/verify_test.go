package verify

import (
	"strings"
	"testing"
)

func p(i int64) *int64 { return &i }

// base is a consistent catalog: snapshots 3..6 retained (0..2 expired),
// table 1 with a live file 10 (rows 0..9) carrying a delete file that was
// replaced by a larger one at snapshot 5, a live file 11 (rows 10..14),
// file 12 merged away (hard-deleted and scheduled), an ended file 13
// whose range holds no retained snapshot (expirable), and inlined rows
// 15..16 with one inlined delete against file 11.
func base() *State {
	return &State{
		Name:      "lake",
		Snapshots: []int64{4, 3, 5, 6},
		DataFiles: []DataFile{
			{ID: 10, TableID: 1, Begin: 1, RowIDStart: p(0), RecordCount: 10},
			{ID: 11, TableID: 1, Begin: 3, RowIDStart: p(10), RecordCount: 5},
			{ID: 13, TableID: 1, Begin: 1, End: p(2), RowIDStart: p(20), RecordCount: 3},
			// A flush output: its ids are embedded, row_id_start+count may
			// pass next_row_id (an inlined UPDATE keeps its id).
			{ID: 14, TableID: 1, Begin: 2, RowIDStart: p(20), RecordCount: 9, PartialMax: p(4)},
		},
		DeleteFiles: []DeleteFile{
			{ID: 20, TableID: 1, Begin: 4, End: p(5), DataFileID: 10, DeleteCount: 1},
			{ID: 21, TableID: 1, Begin: 5, DataFileID: 10, DeleteCount: 2},
		},
		FileRefs: []FileRef{
			{Table: "ducklake_file_column_stats", FileID: 10},
			{Table: "ducklake_file_column_stats", FileID: 11},
			{Table: "ducklake_file_partition_value", FileID: 11},
		},
		Scheduled:  []int64{12},
		TableStats: []TableStats{{TableID: 1, NextRowID: 25}},
		InlinedRows: []InlinedRow{
			{Table: "ducklake_inlined_data_1_2", TableID: 1, RowID: 23, Begin: 5},
			{Table: "ducklake_inlined_data_1_2", TableID: 1, RowID: 24, Begin: 5, End: p(6)},
		},
		InlinedDeletes: []InlinedDelete{{Table: "ducklake_inlined_delete_1", TableID: 1, FileID: 11, RowID: 12, Begin: 6}},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		mut  func(s *State)
		want []Kind // exactly these kinds, in order
		text string // a substring of the first violation
	}{
		{name: "consistent", mut: func(*State) {}},
		{name: "empty catalog", mut: func(s *State) { *s = State{} }},
		{
			name: "compaction alone is fine",
			mut: func(s *State) {
				s.Changes = []SnapshotChanges{{5, "merge_adjacent:1,rewrite_delete:2"}, {6, "inserted_into_table:1"}}
			},
		},
		{
			name: "compaction mixed with an insert",
			mut:  func(s *State) { s.Changes = []SnapshotChanges{{6, "inserted_into_table:1,merge_adjacent:1"}} },
			want: []Kind{KindCompactionMixed}, text: "snapshot 6 mixes merge_adjacent:1 with inserted_into_table",
		},
		{
			// expire_snapshots(versions => [5]) leaves a hole: consistent.
			name: "snapshot hole",
			mut:  func(s *State) { s.Snapshots = []int64{3, 4, 6} },
		},
		{
			name: "duplicate snapshot",
			mut:  func(s *State) { s.Snapshots = append(s.Snapshots, 5) },
			want: []Kind{KindSnapshotGap}, text: "more than once",
		},
		{
			name: "delete file of a vanished data file",
			mut: func(s *State) {
				s.DeleteFiles = append(s.DeleteFiles, DeleteFile{ID: 22, TableID: 1, Begin: 3, DataFileID: 12, DeleteCount: 1})
			},
			// 12 is scheduled, so only the dangling reference is reported.
			want: []Kind{KindDanglingDeleteFile}, text: "data file 12",
		},
		{
			name: "delete file of an unscheduled vanished data file",
			mut: func(s *State) {
				s.DeleteFiles = append(s.DeleteFiles, DeleteFile{ID: 22, TableID: 1, Begin: 3, DataFileID: 30, DeleteCount: 1})
			},
			want: []Kind{KindDanglingDeleteFile, KindUnscheduled}, text: "data file 30",
		},
		{
			name: "delete file of another table's data file",
			mut:  func(s *State) { s.DeleteFiles[1].TableID = 2 },
			want: []Kind{KindDanglingDeleteFile}, text: "of table 2",
		},
		{
			name: "delete file outlives its data file",
			mut:  func(s *State) { s.DataFiles[0].End = p(6); s.Snapshots = append(s.Snapshots, 7) },
			want: []Kind{KindDeleteFileInvisible}, text: "at snapshot 6 delete file 21",
		},
		{
			name: "delete file begins before its data file",
			mut: func(s *State) {
				s.DataFiles[0].Begin = 5
				s.DeleteFiles = s.DeleteFiles[1:]
				s.DeleteFiles[0].Begin = 4
			},
			want: []Kind{KindDeleteFileInvisible}, text: "at snapshot 4",
		},
		{
			name: "invisible only at an expired snapshot is fine",
			mut: func(s *State) {
				s.DataFiles[0].Begin = 3
				s.DeleteFiles = append(s.DeleteFiles, DeleteFile{ID: 23, TableID: 1, Begin: 1, End: p(3), DataFileID: 10, DeleteCount: 0})
			},
		},
		{
			name: "column stats of a missing file",
			mut: func(s *State) {
				s.FileRefs = append(s.FileRefs, FileRef{Table: "ducklake_file_column_stats", FileID: 12})
			},
			want: []Kind{KindDanglingStats}, text: "ducklake_file_column_stats row names data file 12",
		},
		{
			name: "partition value of a missing unscheduled file",
			mut: func(s *State) {
				s.FileRefs = append(s.FileRefs, FileRef{Table: "ducklake_file_partition_value", FileID: 31})
			},
			want: []Kind{KindDanglingStats, KindUnscheduled}, text: "data file 31",
		},
		{
			name: "inlined delete of a missing file",
			mut:  func(s *State) { s.InlinedDeletes[0].FileID = 32 },
			want: []Kind{KindDanglingInlinedDelete, KindUnscheduled}, text: "data file 32",
		},
		{
			name: "inlined delete where its file is not visible",
			mut:  func(s *State) { s.InlinedDeletes[0].Begin = 3; s.DataFiles[1].Begin = 4 },
			want: []Kind{KindDeleteFileInvisible}, text: "at snapshot 3, where the file [4, live)",
		},
		{
			name: "inlined delete at an expired snapshot is not checked",
			mut:  func(s *State) { s.InlinedDeletes[0].Begin = 2; s.DataFiles[1].Begin = 3 },
		},
		{
			name: "tombstone ended with no successor",
			mut:  func(s *State) { s.DeleteFiles = s.DeleteFiles[:1] },
			want: []Kind{KindTombstoneDropped}, text: "ended at snapshot 5",
		},
		{
			name: "tombstone replaced by a smaller delete file",
			mut:  func(s *State) { s.DeleteFiles[1].DeleteCount = 0 },
			want: []Kind{KindTombstoneDropped}, text: "delete file 20 (1 rows of data file 10)",
		},
		{
			name: "successor ends early",
			mut:  func(s *State) { s.DeleteFiles[1].End = p(6) },
			want: []Kind{KindTombstoneDropped, KindTombstoneDropped}, text: "retained snapshot 6",
		},
		{
			name: "tombstone ends with its data file (rewrite)",
			mut: func(s *State) {
				s.DataFiles[0].End = p(6)
				s.DeleteFiles[1].End = p(6)
			},
		},
		{
			name: "tombstone ended where only expired snapshots follow",
			mut: func(s *State) {
				s.DeleteFiles[1].End = p(7)
				s.DataFiles[0].End = p(7)
			},
		},
		{
			name: "scheduled data file still in the catalog",
			mut:  func(s *State) { s.Scheduled = append(s.Scheduled, 11) },
			want: []Kind{KindScheduledLive}, text: "still data file 11",
		},
		{
			name: "scheduled delete file still in the catalog",
			mut:  func(s *State) { s.Scheduled = append(s.Scheduled, 21, 21) },
			want: []Kind{KindScheduledLive}, text: "still delete file 21",
		},
		{
			name: "next_row_id below a file's rows",
			mut:  func(s *State) { s.TableStats[0].NextRowID = 14; s.InlinedRows = nil },
			want: []Kind{KindRowID, KindRowID}, text: "[10, 15) but next_row_id is 14",
		},
		{
			name: "next_row_id not above an inlined row",
			mut:  func(s *State) { s.TableStats[0].NextRowID = 24 },
			want: []Kind{KindRowID}, text: "row id 24",
		},
		{
			name: "transaction-local row id persisted",
			mut:  func(s *State) { s.InlinedRows[0].RowID = txnLocalRowID + 3 },
			want: []Kind{KindRowID}, text: "outside the committed row-id space",
		},
		{
			name: "transaction-local row_id_start persisted",
			mut:  func(s *State) { s.DataFiles[1].RowIDStart = p(txnLocalRowID) },
			want: []Kind{KindRowID}, text: "data file 11 has row_id_start",
		},
		{
			name: "files but no table stats",
			mut:  func(s *State) { s.TableStats = nil },
			want: []Kind{KindRowID}, text: "no ducklake_table_stats row",
		},
		{
			name: "embedded ids need no bound",
			mut:  func(s *State) { s.DataFiles[1].RowIDStart = nil; s.TableStats[0].NextRowID = 25 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mut(s)
			got := Check(s)
			var kinds []Kind
			for _, v := range got {
				kinds = append(kinds, v.Kind)
			}
			if !equalKinds(kinds, tc.want) {
				t.Fatalf("kinds = %v, want %v\nviolations:\n%s", kinds, tc.want, list(got))
			}
			if tc.text != "" && !strings.Contains(got[0].String(), tc.text) {
				t.Fatalf("first violation %q does not mention %q", got[0], tc.text)
			}
			if len(got) > 0 && s.Name != "" && !strings.HasPrefix(got[0].String(), s.Name+": ") {
				t.Fatalf("violation %q does not name catalog %q", got[0], s.Name)
			}
		})
	}
}

// TestCheckIsPure: Check does not modify its input and is deterministic.
func TestCheckIsPure(t *testing.T) {
	s := base()
	s.Scheduled = append(s.Scheduled, 11, 21)
	s.DeleteFiles = s.DeleteFiles[:1]
	a := list(Check(s))
	b := list(Check(s))
	if a != b || a == "" {
		t.Fatalf("Check not deterministic or found nothing:\n%s\n---\n%s", a, b)
	}
	if s.Snapshots[0] != 4 {
		t.Fatalf("Check sorted its input's snapshots")
	}
}

func TestInlinedNames(t *testing.T) {
	tests := []struct {
		name   string
		data   bool
		del    bool
		tableI int64
	}{
		{"ducklake_inlined_data_3_7", true, false, 3},
		{"ducklake_inlined_data_tables", false, false, 0},
		{"ducklake_inlined_data_3", false, false, 0},
		{"ducklake_inlined_data_x_7", false, false, 0},
		{"ducklake_inlined_delete_12", false, true, 12},
		{"ducklake_inlined_delete_", false, false, 0},
		{"ducklake_data_file", false, false, 0},
	}
	for _, tc := range tests {
		id, ok := inlinedDataTable(tc.name)
		if ok != tc.data || (ok && id != tc.tableI) {
			t.Errorf("inlinedDataTable(%q) = %d, %v", tc.name, id, ok)
		}
		id, ok = inlinedDeleteTable(tc.name)
		if ok != tc.del || (ok && id != tc.tableI) {
			t.Errorf("inlinedDeleteTable(%q) = %d, %v", tc.name, id, ok)
		}
	}
}

func equalKinds(a, b []Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func list(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	return b.String()
}
