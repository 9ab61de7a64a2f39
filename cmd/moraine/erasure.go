package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

func runErasure(ctx context.Context, args []string) int {
	return erasureMain(ctx, args, time.Now(), os.Stdout, os.Stderr)
}

// erasureMain is `moraine erasure --table T [--store URL]
// [--object-retention D] [--json]`. It opens the store as a reader, builds
// the report for the table in every DuckLake catalog that has it, and
// prints it. Exit 0: report printed; 2: bad usage, unreadable store, or no
// catalog has the table.
func erasureMain(ctx context.Context, args []string, now time.Time, stdout, stderr io.Writer) int {
	fs := newFlags("erasure --table T [flags]", stdout, stderr)
	store := fs.storeFlag()
	table := fs.String("table", "", "table as schema.table, a bare name unique across schemas, or a numeric table id")
	objRet := fs.String("object-retention", "0", "how long the data bucket keeps old object versions (e.g. 30d, 720h, \"1 week\")")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *table == "" {
		fmt.Fprintln(stderr, "moraine erasure: --table is required")
		fs.Usage()
		return 2
	}
	ret, err := verify.ParseRetention(*objRet)
	if err != nil {
		fmt.Fprintln(stderr, "moraine erasure: --object-retention:", err)
		return 2
	}
	reps, err := erasureReports(ctx, *store, *table, now, ret)
	if err != nil {
		fmt.Fprintln(stderr, "moraine erasure:", err)
		return 2
	}
	if *asJSON {
		out := make([]erasureJSON, len(reps))
		for i, r := range reps {
			out[i] = toErasureJSON(r)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "moraine erasure:", err)
			return 2
		}
		return 0
	}
	for i, r := range reps {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeErasure(stdout, r)
	}
	return 0
}

func erasureReports(ctx context.Context, url, table string, now time.Time, objRet time.Duration) ([]*verify.ErasureReport, error) {
	var cats map[uint32]*commit.StoredCatalog
	err := server.ReadSnapshotURL(ctx, url, func(snap *slate.Snapshot, _ slate.Stats) (err error) {
		cats, err = commit.ReadStore(ctx, snap)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []*verify.ErasureReport
	var misses []string
	for _, id := range slices.Sorted(maps.Keys(cats)) {
		c := cats[id]
		if !verify.IsDuckLake(c) {
			continue
		}
		es, err := verify.ErasureFromStored(c)
		if err != nil {
			return nil, err
		}
		rep, err := verify.Erasure(es, table, now, objRet)
		if errors.Is(err, verify.ErrUnknownTable) {
			misses = append(misses, es.Name+": "+err.Error())
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	if len(out) == 0 {
		if len(misses) == 0 {
			return nil, fmt.Errorf("%w: %s: the store holds no DuckLake catalog", verify.ErrUnknownTable, table)
		}
		return nil, errors.New(strings.Join(misses, "; "))
	}
	return out, nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeErasure(w io.Writer, r *verify.ErasureReport) {
	fmt.Fprintf(w, "%s: table %s (id %d)\n", r.Catalog, r.Table, r.TableID)
	fmt.Fprintf(w, "retained snapshots referencing deleted rows: %d\n", len(r.Snapshots))
	for _, s := range r.Snapshots {
		fmt.Fprintf(w, "  snapshot %d at %s: data files %v", s.ID, fmtTime(s.Time), s.Files)
		if s.InlinedRows > 0 {
			fmt.Fprintf(w, ", %d deleted inlined row(s)", s.InlinedRows)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "files scheduled for deletion still holding bytes: %d\n", len(r.Scheduled))
	for _, f := range r.Scheduled {
		owner := "this table"
		if !f.Attributed {
			owner = "table unknown"
		}
		fmt.Fprintf(w, "  file %d %s scheduled %s (%s)\n", f.FileID, f.Path, fmtTime(f.ScheduleStart), owner)
	}
	win := r.Window
	fmt.Fprintln(w, "recoverability window:")
	fmt.Fprintf(w, "  compaction lag      %s\n", win.CompactionLag.Round(time.Second))
	fmt.Fprintf(w, "  snapshot retention  %s (%s)\n", win.SnapshotRetention.Round(time.Second), win.RetentionSource)
	fmt.Fprintf(w, "  object retention    %s\n", win.ObjectRetention.Round(time.Second))
	fmt.Fprintf(w, "  total               %s\n", win.Total.Round(time.Second))
}

type erasureSnapJSON struct {
	ID          int64   `json:"snapshot_id"`
	Time        string  `json:"snapshot_time"`
	Files       []int64 `json:"data_files"`
	InlinedRows int     `json:"deleted_inlined_rows"`
}

type erasureSchedJSON struct {
	FileID        int64  `json:"data_file_id"`
	Path          string `json:"path"`
	ScheduleStart string `json:"schedule_start"`
	Attributed    bool   `json:"attributed"`
}

// erasureJSON is the --json shape: durations in seconds, times RFC 3339.
type erasureJSON struct {
	Catalog   string             `json:"catalog"`
	Table     string             `json:"table"`
	TableID   int64              `json:"table_id"`
	Snapshots []erasureSnapJSON  `json:"snapshots"`
	Scheduled []erasureSchedJSON `json:"scheduled"`
	Window    struct {
		CompactionLag     float64 `json:"compaction_lag_seconds"`
		SnapshotRetention float64 `json:"snapshot_retention_seconds"`
		RetentionSource   string  `json:"snapshot_retention_source"`
		ObjectRetention   float64 `json:"object_retention_seconds"`
		Total             float64 `json:"total_seconds"`
	} `json:"window"`
}

func toErasureJSON(r *verify.ErasureReport) erasureJSON {
	var j erasureJSON
	j.Catalog, j.Table, j.TableID = r.Catalog, r.Table, r.TableID
	j.Snapshots = make([]erasureSnapJSON, len(r.Snapshots))
	for i, s := range r.Snapshots {
		j.Snapshots[i] = erasureSnapJSON{ID: s.ID, Time: fmtTime(s.Time), Files: s.Files, InlinedRows: s.InlinedRows}
	}
	j.Scheduled = make([]erasureSchedJSON, len(r.Scheduled))
	for i, f := range r.Scheduled {
		j.Scheduled[i] = erasureSchedJSON{FileID: f.FileID, Path: f.Path, ScheduleStart: fmtTime(f.ScheduleStart), Attributed: f.Attributed}
	}
	w := r.Window
	j.Window.CompactionLag = w.CompactionLag.Seconds()
	j.Window.SnapshotRetention = w.SnapshotRetention.Seconds()
	j.Window.RetentionSource = w.RetentionSource
	j.Window.ObjectRetention = w.ObjectRetention.Seconds()
	j.Window.Total = w.Total.Seconds()
	return j
}
