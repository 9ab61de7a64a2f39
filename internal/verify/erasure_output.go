package verify

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/slate"
)

// StoreFigures is what the store itself holds now: its oldest object
// (which may hold any value deleted since) and its checkpoints.
type StoreFigures struct {
	OldestObject time.Time
	Checkpoints  []*slate.Checkpoint
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtRetention(r Retention) string {
	if !r.Set {
		return "not configured"
	}
	return r.D.Round(time.Second).String()
}

// WriteText prints the report as `moraine erasure` does, with what the
// store holds now (st).
func (r *ErasureReport) WriteText(w io.Writer, st StoreFigures, now time.Time) {
	fmt.Fprintf(w, "%s: table %s (id %d)\n", r.Catalog, r.Table, r.TableID)
	b := r.Bound
	fmt.Fprintln(w, "upper bound from configuration:")
	if len(b.Unbounded) > 0 {
		fmt.Fprintf(w, "  unbounded: not configured: %s\n", strings.Join(b.Unbounded, ", "))
	} else {
		fmt.Fprintf(w, "  %s\n", b.Total.Round(time.Second))
	}
	paths := []struct {
		name  string
		terms []BoundTerm
	}{{"data files (the row's Parquet bytes)", b.DataFiles}, {"moraine's store (inlined rows, statistics)", b.Store}, {"backups", []BoundTerm{b.Backups}}}
	for _, p := range paths {
		fmt.Fprintf(w, "  %s:\n", p.name)
		for _, t := range p.terms {
			fmt.Fprintf(w, "    %-24s %-16s %s\n", t.Name, fmtRetention(t.Value), t.Source)
		}
	}
	fmt.Fprintln(w, "current figures:")
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
	fmt.Fprintln(w, "recoverability window so far:")
	fmt.Fprintf(w, "  compaction lag      %s (observed so far, not a bound)\n", win.CompactionLag.Round(time.Second))
	fmt.Fprintf(w, "  snapshot retention  %s (%s)\n", win.SnapshotRetention.Round(time.Second), win.RetentionSource)
	fmt.Fprintf(w, "  object retention    %s\n", win.ObjectRetention.Round(time.Second))
	fmt.Fprintf(w, "  total               %s\n", win.Total.Round(time.Second))
	fmt.Fprintln(w, "moraine's store:")
	if !st.OldestObject.IsZero() {
		fmt.Fprintf(w, "  oldest object written %s (%s ago): it may hold any catalog value deleted since\n", fmtTime(st.OldestObject), now.Sub(st.OldestObject).Round(time.Second))
	}
	fmt.Fprintf(w, "  checkpoints: %d (each holds the catalog as of its time until deleted)\n", len(st.Checkpoints))
	for _, c := range st.Checkpoints {
		fmt.Fprintf(w, "    %s created %s (%s ago), %d bytes\n", c.ID, fmtTime(c.Created), now.Sub(c.Created).Round(time.Second), c.Bytes)
	}
	fmt.Fprintln(w, "  backups: outside the store; each holds the catalog as of its checkpoint until deleted")
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

// erasureTermJSON is one term of the bound in ErasureJSON.
type erasureTermJSON struct {
	Name    string   `json:"name"`
	Seconds *float64 `json:"seconds"` // null: not configured
	Source  string   `json:"source"`
}

// ErasureJSON is the --json shape of a report: durations in seconds, times
// RFC 3339.
type ErasureJSON struct {
	Bound struct {
		Seconds   *float64          `json:"seconds"` // null: unbounded
		Unbounded []string          `json:"unbounded"`
		DataFiles []erasureTermJSON `json:"data_files"`
		Store     []erasureTermJSON `json:"store"`
		Backups   erasureTermJSON   `json:"backups"`
	} `json:"bound"`
	Store struct {
		OldestObject string   `json:"oldest_object"`
		Checkpoints  []string `json:"checkpoints"`
	} `json:"store"`
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

func termJSON(t BoundTerm) erasureTermJSON {
	j := erasureTermJSON{Name: t.Name, Source: t.Source}
	if t.Value.Set {
		s := t.Value.D.Seconds()
		j.Seconds = &s
	}
	return j
}

// JSON is the report in the shape `moraine erasure --json` prints:
// durations in seconds, times in RFC 3339.
func (r *ErasureReport) JSON(st StoreFigures) ErasureJSON {
	var j ErasureJSON
	if len(r.Bound.Unbounded) == 0 {
		s := r.Bound.Total.Seconds()
		j.Bound.Seconds = &s
	}
	j.Bound.Unbounded = append([]string{}, r.Bound.Unbounded...)
	for _, t := range r.Bound.DataFiles {
		j.Bound.DataFiles = append(j.Bound.DataFiles, termJSON(t))
	}
	for _, t := range r.Bound.Store {
		j.Bound.Store = append(j.Bound.Store, termJSON(t))
	}
	j.Bound.Backups = termJSON(r.Bound.Backups)
	if !st.OldestObject.IsZero() {
		j.Store.OldestObject = fmtTime(st.OldestObject)
	}
	j.Store.Checkpoints = []string{}
	for _, c := range st.Checkpoints {
		j.Store.Checkpoints = append(j.Store.Checkpoints, c.ID)
	}
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
