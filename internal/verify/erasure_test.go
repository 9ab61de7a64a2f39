package verify

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func hour(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

// erasureBase: snapshots 1..4 retained (snapshot i at t0+i h), now t0+10h.
// Table 1 main.t: file 10 live with a live delete file from snapshot 3;
// file 11 live and clean; file 12 ended at 3 (rewritten); an inlined row
// of table 1 deleted at snapshot 4. Table 2 main.u has a file with deletes
// that must never appear in t's report. Scheduled: file 9 under t's path,
// file 8 elsewhere.
func erasureBase() *ErasureState {
	return &ErasureState{
		State: &State{
			Name:      "lake.public",
			Snapshots: []int64{3, 1, 4, 2},
			DataFiles: []DataFile{
				{ID: 10, TableID: 1, Begin: 1, RecordCount: 10},
				{ID: 11, TableID: 1, Begin: 2, RecordCount: 10},
				{ID: 12, TableID: 1, Begin: 1, End: p(3), RecordCount: 10},
				{ID: 20, TableID: 2, Begin: 1, RecordCount: 10},
			},
			DeleteFiles: []DeleteFile{
				{ID: 30, TableID: 1, Begin: 3, DataFileID: 10, DeleteCount: 2},
				{ID: 31, TableID: 2, Begin: 2, DataFileID: 20, DeleteCount: 1},
			},
			InlinedRows: []InlinedRow{
				{TableID: 1, RowID: 40, Begin: 2, End: p(4)},
				{TableID: 1, RowID: 41, Begin: 2},
			},
		},
		SnapshotTimes: map[int64]time.Time{1: hour(1), 2: hour(2), 3: hour(3), 4: hour(4)},
		Tables: []TableName{
			{ID: 1, SchemaID: 0, Schema: "main", Name: "t", Path: "t/", Begin: 1},
			{ID: 2, SchemaID: 0, Schema: "main", Name: "u", Path: "u/", Begin: 1},
		},
		ScheduledRows: []ScheduledFile{
			{FileID: 9, Path: "main/t/ducklake-9.parquet", ScheduleStart: hour(2)},
			{FileID: 8, Path: "main/u/ducklake-8.parquet", ScheduleStart: hour(3)},
		},
		Options: map[string]string{},
	}
}

func TestErasure(t *testing.T) {
	now := hour(10)
	tests := []struct {
		name      string
		table     string
		mut       func(s *ErasureState)
		objRet    time.Duration
		snaps     []SnapshotRef
		scheduled []ScheduledRef
		window    ErasureWindow
	}{
		{
			name: "deleted rows referenced by retained snapshots", table: "main.t", objRet: 30 * 24 * time.Hour,
			snaps: []SnapshotRef{
				{ID: 1, Time: hour(1), Files: []int64{10, 12}},
				{ID: 2, Time: hour(2), Files: []int64{10, 12}, InlinedRows: 1},
				{ID: 3, Time: hour(3), Files: []int64{10}, InlinedRows: 1},
				{ID: 4, Time: hour(4), Files: []int64{10}},
			},
			scheduled: []ScheduledRef{
				{ScheduledFile: ScheduledFile{FileID: 8, Path: "main/u/ducklake-8.parquet", ScheduleStart: hour(3)}},
				{ScheduledFile: ScheduledFile{FileID: 9, Path: "main/t/ducklake-9.parquet", ScheduleStart: hour(2)}, Attributed: true},
			},
			// Oldest pending deletion: delete file 30 at snapshot 3 (t0+3h).
			window: ErasureWindow{CompactionLag: 7 * time.Hour, SnapshotRetention: 9 * time.Hour, RetentionSource: "oldest retained snapshot",
				ObjectRetention: 30 * 24 * time.Hour, Total: 16*time.Hour + 30*24*time.Hour},
		},
		{
			name: "rewritten and expired", table: "t",
			mut: func(s *ErasureState) {
				// rewrite_data_files wrote 13 at 5; expire removed 1..4 and
				// cleanup removed the old files and their schedule.
				s.Snapshots = []int64{5}
				s.SnapshotTimes = map[int64]time.Time{5: hour(5)}
				s.DataFiles = []DataFile{{ID: 13, TableID: 1, Begin: 5, RecordCount: 18}, {ID: 20, TableID: 2, Begin: 1, RecordCount: 10}}
				s.DeleteFiles = s.DeleteFiles[1:]
				s.InlinedRows = nil
				s.ScheduledRows = nil
			},
			window: ErasureWindow{SnapshotRetention: 5 * time.Hour, RetentionSource: "oldest retained snapshot", Total: 5 * time.Hour},
		},
		{
			name: "scheduled file attributed by a surviving delete-file row", table: "1",
			mut: func(s *ErasureState) {
				s.DataFiles = s.DataFiles[1:2]
				s.DeleteFiles = []DeleteFile{{ID: 30, TableID: 1, Begin: 3, End: p(4), DataFileID: 7, DeleteCount: 1}}
				s.InlinedRows = nil
				s.ScheduledRows = []ScheduledFile{{FileID: 7, Path: "/abs/elsewhere/f.parquet", ScheduleStart: hour(4)}}
			},
			scheduled: []ScheduledRef{{ScheduledFile: ScheduledFile{FileID: 7, Path: "/abs/elsewhere/f.parquet", ScheduleStart: hour(4)}, Attributed: true}},
			window:    ErasureWindow{SnapshotRetention: 9 * time.Hour, RetentionSource: "oldest retained snapshot", Total: 9 * time.Hour},
		},
		{
			name: "expire_older_than replaces the oldest-snapshot measure", table: "main.u", objRet: time.Hour,
			mut: func(s *ErasureState) { s.Options["expire_older_than"] = "1 week" },
			snaps: []SnapshotRef{
				{ID: 1, Time: hour(1), Files: []int64{20}}, {ID: 2, Time: hour(2), Files: []int64{20}},
				{ID: 3, Time: hour(3), Files: []int64{20}}, {ID: 4, Time: hour(4), Files: []int64{20}},
			},
			scheduled: []ScheduledRef{
				{ScheduledFile: ScheduledFile{FileID: 8, Path: "main/u/ducklake-8.parquet", ScheduleStart: hour(3)}, Attributed: true},
				{ScheduledFile: ScheduledFile{FileID: 9, Path: "main/t/ducklake-9.parquet", ScheduleStart: hour(2)}},
			},
			window: ErasureWindow{CompactionLag: 8 * time.Hour, SnapshotRetention: 7 * 24 * time.Hour, RetentionSource: "expire_older_than=1 week",
				ObjectRetention: time.Hour, Total: 9*time.Hour + 7*24*time.Hour},
		},
		{
			name: "pending deletion older than every retained snapshot", table: "main.u",
			mut: func(s *ErasureState) {
				// Snapshot 2 (where delete 31 began) expired: the wait is
				// at least since the oldest retained one after it.
				s.Snapshots = []int64{3, 4}
				delete(s.SnapshotTimes, 1)
				delete(s.SnapshotTimes, 2)
				s.ScheduledRows = nil
			},
			snaps:  []SnapshotRef{{ID: 3, Time: hour(3), Files: []int64{20}}, {ID: 4, Time: hour(4), Files: []int64{20}}},
			window: ErasureWindow{CompactionLag: 7 * time.Hour, SnapshotRetention: 7 * time.Hour, RetentionSource: "oldest retained snapshot", Total: 14 * time.Hour},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := erasureBase()
			if tc.mut != nil {
				tc.mut(s)
			}
			rep, err := Erasure(s, tc.table, now, BoundConfig{ObjectRetention: Set(tc.objRet)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Snapshots, tc.snaps) {
				t.Errorf("snapshots:\n got %+v\nwant %+v", rep.Snapshots, tc.snaps)
			}
			if !reflect.DeepEqual(rep.Scheduled, tc.scheduled) {
				t.Errorf("scheduled:\n got %+v\nwant %+v", rep.Scheduled, tc.scheduled)
			}
			if rep.Window != tc.window {
				t.Errorf("window:\n got %+v\nwant %+v", rep.Window, tc.window)
			}
			w := rep.Window
			if w.Total != w.CompactionLag+w.SnapshotRetention+w.ObjectRetention {
				t.Errorf("total %v is not the sum of its parts %+v", w.Total, w)
			}
		})
	}
}

func TestErasureTableLookup(t *testing.T) {
	s := erasureBase()
	// Table 1 was renamed t → t2 at snapshot 3; table 3 "t" lives in schema
	// other (so the bare name "u" stays unique, "t" now names table 3 only
	// among live tables); table 4 "gone" was dropped.
	s.Tables[0].End = p(3)
	s.Tables = append(s.Tables,
		TableName{ID: 1, Schema: "main", Name: "t2", Path: "t/", Begin: 3},
		TableName{ID: 3, Schema: "other", Name: "t", Path: "t/", Begin: 2},
		TableName{ID: 5, Schema: "other", Name: "u", Path: "u/", Begin: 2},
		TableName{ID: 4, Schema: "main", Name: "gone", Begin: 1, End: p(2)},
	)
	tests := []struct {
		name    string
		want    int64
		wantErr bool
	}{
		{"main.t2", 1, false},
		{"main.t", 1, false}, // an old name still finds the table
		{"t", 3, false},      // live table preferred over a renamed one
		{"other.t", 3, false},
		{"1", 1, false},
		{"gone", 4, false},
		{"u", 0, true}, // two live tables
		{"main.nope", 0, true},
		{"99", 0, true},
		{"nope", 0, true},
	}
	for _, tc := range tests {
		rep, err := Erasure(s, tc.name, hour(10), BoundConfig{})
		if tc.wantErr {
			if !errors.Is(err, ErrUnknownTable) {
				t.Errorf("%s: err %v, want ErrUnknownTable", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if rep.TableID != tc.want {
			t.Errorf("%s: table %d, want %d", tc.name, rep.TableID, tc.want)
		}
	}
}

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"0", 0, false},
		{"720h", 720 * time.Hour, false},
		{"30d", 30 * day, false},
		{"2w", 14 * day, false},
		{"1 week", 7 * day, false},
		{"30 days", 30 * day, false},
		{"1 day 02:30:00", day + 2*time.Hour + 30*time.Minute, false},
		{"00:05:00", 5 * time.Minute, false},
		{"1 month", 30 * day, false},
		{"", 0, true},
		{"-1h", 0, true},
		{"3 fortnights", 0, true},
		{"x days", 0, true},
		{"1:2", 0, true},
		{"9999999999999 years", 0, true},
		{"106751 days 106751 days", 0, true},
		{"99999999999:00:00", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseRetention(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseRetention: expire_older_than comes from the catalog and
// --object-retention from the command line; no input may panic, and a
// parsed retention is never negative.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"0", "720h", "30d", "1 week", "1 day 02:30:00", "00:05:00", "9999999999999 years", "1:2:3:4", "-1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRetention(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseRetention(%q) = %v", s, d)
		}
	})
}

// TestBound: each path sums its terms; catalog options win over flags; a
// term nobody configured makes the bound unbounded and is named.
func TestBound(t *testing.T) {
	day := 24 * time.Hour
	full := BoundConfig{
		CompactionInterval: Set(7 * day), MaintenanceInterval: Set(day), SnapshotRetention: Set(10 * day),
		CleanupDelay: Set(2 * day), ObjectRetention: Set(30 * day), StoreRewriteInterval: Set(day),
		StoreGC: 6 * time.Minute, StoreObjectRetention: Set(0), BackupRetention: Set(90 * day),
	}
	tests := []struct {
		name      string
		opts      map[string]string
		cfg       func(c *BoundConfig)
		total     time.Duration
		unbounded []string
	}{
		{name: "backups are the longest", cfg: func(*BoundConfig) {}, total: 90 * day},
		{
			name: "data files: compaction + retention + maintenance + cleanup + maintenance + objects",
			cfg:  func(c *BoundConfig) { c.BackupRetention = Set(0) },
			// 7 + 10 + 1 + 2 + 1 + 30
			total: 51 * day,
		},
		{
			name: "the store path when the data bucket keeps nothing",
			cfg:  func(c *BoundConfig) { c.BackupRetention, c.ObjectRetention = Set(0), Set(0) },
			// data: 7+10+1+2+1 = 21d; store: 7+10+1+1d+6m = 19d 6m
			total: 21 * day,
		},
		{
			name: "catalog options win",
			opts: map[string]string{"expire_older_than": "1 day", "delete_older_than": "00:05:00"},
			cfg:  func(c *BoundConfig) { c.BackupRetention, c.ObjectRetention = Set(0), Set(0) },
			// data: 7+1+1+5m+1 = 10d 5m; store: 7+1+1+1+6m = 10d 6m
			total: 10*day + 6*time.Minute,
		},
		{
			name:      "unconfigured terms are named",
			cfg:       func(c *BoundConfig) { c.CompactionInterval, c.BackupRetention = Retention{}, Retention{} },
			unbounded: []string{"compaction interval (--compaction-interval)", "backup retention (--backup-retention)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := full
			tc.cfg(&cfg)
			b := Bound(tc.opts, cfg)
			if !slices.Equal(b.Unbounded, tc.unbounded) {
				t.Fatalf("unbounded %q, want %q", b.Unbounded, tc.unbounded)
			}
			if len(tc.unbounded) == 0 && b.Total != tc.total {
				t.Fatalf("total %v, want %v", b.Total, tc.total)
			}
		})
	}
}
