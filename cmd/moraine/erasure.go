package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

// erasureMain is `moraine erasure --table T [--store URL]
// [--object-retention D] [--json]`. It opens the store as a reader, builds
// the report for the table in every DuckLake catalog that has it, and
// prints it. Exit 0: report printed; 2: bad usage, unreadable store, or no
// catalog has the table.
func erasureMain(ctx context.Context, args []string, now time.Time, stdout, stderr io.Writer) int {
	fs := newFlags("erasure --table T [flags]", stdout, stderr)
	store := fs.storeFlag()
	table := fs.String("table", "", "table as schema.table, a bare name unique across schemas, or a numeric table id")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	// The bound's configuration: durations (30d, 720h, "1 week"); empty is
	// "not configured", which makes the bound unbounded.
	retention := func(name, def, usage string) *string { return fs.String(name, def, usage) }
	flags := map[string]*string{
		"compaction-interval":    retention("compaction-interval", "", "how often rewrite_data_files / flush_inlined_data run on the table"),
		"maintenance-interval":   retention("maintenance-interval", "", "how often expire_snapshots and cleanup_old_files run"),
		"snapshot-retention":     retention("snapshot-retention", "", "how old a snapshot gets before expiry (the catalog's expire_older_than wins)"),
		"cleanup-delay":          retention("cleanup-delay", "", "how long a scheduled file waits for cleanup (the catalog's delete_older_than wins)"),
		"object-retention":       retention("object-retention", "0", "how long the data bucket keeps old object versions"),
		"store-rewrite-interval": retention("store-rewrite-interval", "24h", "the server's store-rewrite-interval (0: off, unbounded)"),
		"store-object-retention": retention("store-object-retention", "0", "how long the store's bucket keeps old object versions"),
		"backup-retention":       retention("backup-retention", "", "how long backups of the store are kept (0: none are taken)"),
	}
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *table == "" {
		fmt.Fprintln(stderr, "moraine erasure: --table is required")
		fs.Usage()
		return 2
	}
	parsed := map[string]verify.Retention{}
	for name, v := range flags {
		if *v == "" {
			continue
		}
		d, err := verify.ParseRetention(*v)
		if err != nil {
			fmt.Fprintf(stderr, "moraine erasure: --%s: %v\n", name, err)
			return 2
		}
		parsed[name] = verify.Set(d)
	}
	if r := parsed["store-rewrite-interval"]; r.Set && r.D == 0 {
		parsed["store-rewrite-interval"] = verify.Retention{} // never rewritten: unbounded
	}
	cfg := verify.BoundConfig{
		CompactionInterval: parsed["compaction-interval"], MaintenanceInterval: parsed["maintenance-interval"],
		SnapshotRetention: parsed["snapshot-retention"], CleanupDelay: parsed["cleanup-delay"],
		ObjectRetention: parsed["object-retention"], StoreRewriteInterval: parsed["store-rewrite-interval"],
		StoreGC: slate.DefaultGCGrace + slate.DefaultGCInterval, StoreObjectRetention: parsed["store-object-retention"],
		BackupRetention: parsed["backup-retention"],
	}
	reps, st, err := erasureReports(ctx, *store, *table, now, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "moraine erasure:", err)
		return 2
	}
	if *asJSON {
		out := make([]erasureJSON, len(reps))
		for i, r := range reps {
			out[i] = toErasureJSON(r, st)
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
		writeErasure(stdout, r, st, now)
	}
	return 0
}

// storeFigures is what the store itself holds now: its oldest object
// (which may hold any value deleted since) and its checkpoints.
type storeFigures struct {
	OldestObject time.Time
	Checkpoints  []*slate.Checkpoint
}

func erasureReports(ctx context.Context, url, table string, now time.Time, cfg verify.BoundConfig) ([]*verify.ErasureReport, storeFigures, error) {
	var st storeFigures
	s, err := server.OpenStore(ctx, url)
	if err != nil {
		return nil, st, err
	}
	defer s.Close()
	var cats map[uint32]*commit.StoredCatalog
	err = server.ReadSnapshot(ctx, s, func(snap *slate.Snapshot, _ slate.Stats) (err error) {
		cats, err = commit.ReadStore(ctx, snap)
		return err
	})
	if err != nil {
		return nil, st, err
	}
	if st.Checkpoints, err = slate.ListCheckpoints(ctx, s); err != nil {
		return nil, st, err
	}
	objs, err := s.List(ctx, "")
	if err != nil {
		return nil, st, err
	}
	for _, o := range objs {
		if slate.IsCheckpointObject(o.Key) {
			continue
		}
		if st.OldestObject.IsZero() || o.ModTime.Before(st.OldestObject) {
			st.OldestObject = o.ModTime
		}
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
			return nil, st, err
		}
		rep, err := verify.Erasure(es, table, now, cfg)
		if errors.Is(err, verify.ErrUnknownTable) {
			misses = append(misses, es.Name+": "+err.Error())
			continue
		}
		if err != nil {
			return nil, st, err
		}
		out = append(out, rep)
	}
	if len(out) == 0 {
		if len(misses) == 0 {
			return nil, st, fmt.Errorf("%w: %s: the store holds no DuckLake catalog", verify.ErrUnknownTable, table)
		}
		return nil, st, errors.New(strings.Join(misses, "; "))
	}
	return out, st, nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtRetention(r verify.Retention) string {
	if !r.Set {
		return "not configured"
	}
	return r.D.Round(time.Second).String()
}

func writeErasure(w io.Writer, r *verify.ErasureReport, st storeFigures, now time.Time) {
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
		terms []verify.BoundTerm
	}{{"data files (the row's Parquet bytes)", b.DataFiles}, {"moraine's store (inlined rows, statistics)", b.Store}, {"backups", []verify.BoundTerm{b.Backups}}}
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

// erasureJSON is the --json shape: durations in seconds, times RFC 3339.
type erasureTermJSON struct {
	Name    string   `json:"name"`
	Seconds *float64 `json:"seconds"` // null: not configured
	Source  string   `json:"source"`
}

type erasureJSON struct {
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

func termJSON(t verify.BoundTerm) erasureTermJSON {
	j := erasureTermJSON{Name: t.Name, Source: t.Source}
	if t.Value.Set {
		s := t.Value.D.Seconds()
		j.Seconds = &s
	}
	return j
}

func toErasureJSON(r *verify.ErasureReport, st storeFigures) erasureJSON {
	var j erasureJSON
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
