package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
	"github.com/moraine-db/moraine/internal/slate"
)

// The operator tools (moraine inspect, snapshots, gc, checkpoint, backup,
// restore). The read-only ones open the store as a slate reader, which
// writes nothing, so they are safe against a live server's store.

// CreateStore opens the object store at url to write into it, creating a
// file:// store's directory if needed (a backup's or a restore's target).
func CreateStore(ctx context.Context, url string) (objstore.Store, error) {
	s, err := objurl.Create(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redactURL(url), err)
	}
	return s, nil
}

// OpenStore opens the existing object store at url; a file:// store that
// does not exist is an error, never created.
func OpenStore(ctx context.Context, url string) (objstore.Store, error) {
	s, err := objurl.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redactURL(url), err)
	}
	return s, nil
}

// ReadSnapshot opens a store as a read-only follower (it never fences a
// running writer) and calls fn with one consistent snapshot of it and the
// reader's stats. Every read-only operator command goes through it.
func ReadSnapshot(ctx context.Context, store objstore.Store, fn func(*slate.Snapshot, slate.Stats) error) error {
	r, err := slate.OpenReader(ctx, store, slate.Options{})
	if err != nil {
		return err
	}
	defer r.Close(context.Background())
	snap, err := r.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	return fn(snap, r.Stats())
}

// ReadSnapshotURL is ReadSnapshot over the store at url (errors name the
// store with its credentials redacted).
func ReadSnapshotURL(ctx context.Context, url string, fn func(*slate.Snapshot, slate.Stats) error) error {
	s, err := OpenStore(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := ReadSnapshot(ctx, s, fn); err != nil {
		return fmt.Errorf("read store %s: %w", redactURL(url), err)
	}
	return nil
}

// readCatalogs reads every stored catalog at one consistent point.
func readCatalogs(ctx context.Context, store objstore.Store) (cats map[uint32]*commit.StoredCatalog, stats slate.Stats, err error) {
	err = ReadSnapshot(ctx, store, func(snap *slate.Snapshot, st slate.Stats) error {
		stats = st
		cats, err = commit.ReadStore(ctx, snap)
		return err
	})
	return cats, stats, err
}

func sortedCatalogs(cats map[uint32]*commit.StoredCatalog) []*commit.StoredCatalog {
	out := make([]*commit.StoredCatalog, 0, len(cats))
	for _, c := range cats {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Database != out[j].Database {
			return out[i].Database < out[j].Database
		}
		return out[i].Schema < out[j].Schema
	})
	return out
}

// Inspect writes a report of the store: its sequence number, objects by
// kind, checkpoints, branches (what each reads, at which store seq), and
// per catalog the head snapshot, commits, live data
// files and every table with its rows and encoded bytes.
func Inspect(ctx context.Context, store objstore.Store, w io.Writer) error {
	var cats map[uint32]*commit.StoredCatalog
	var branches []*commit.StoredBranch
	var stats slate.Stats
	err := ReadSnapshot(ctx, store, func(snap *slate.Snapshot, st slate.Stats) error {
		stats = st
		var err error
		if cats, err = commit.ReadStore(ctx, snap); err != nil {
			return err
		}
		branches, err = commit.ReadBranches(ctx, snap)
		return err
	})
	if err != nil {
		return err
	}
	objs, err := store.List(ctx, "")
	if err != nil {
		return fmt.Errorf("inspect: list: %w", err)
	}
	type agg struct {
		n     int
		bytes int64
	}
	kinds := map[string]*agg{}
	var total agg
	for _, in := range objs {
		k, _, _ := strings.Cut(in.Key, "/")
		if kinds[k] == nil {
			kinds[k] = &agg{}
		}
		kinds[k].n++
		kinds[k].bytes += in.Size
		total.n++
		total.bytes += in.Size
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "store sequence\t%d\n", stats.LastSeq)
	fmt.Fprintf(tw, "store objects\t%d\t%d bytes\n", total.n, total.bytes)
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s/\t%d\t%d bytes\n", k, kinds[k].n, kinds[k].bytes)
	}
	cps, err := slate.ListCheckpoints(ctx, store)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		fmt.Fprintf(tw, "checkpoint %s\tseq %d\t%s\t%d objects, %d bytes\n", cp.ID, cp.Seq, cp.Created.Format(time.RFC3339), len(cp.Objects), cp.Bytes)
	}
	for _, b := range branches {
		at := make([]string, 0, len(b.Branch.Catalogs))
		for _, c := range b.Branch.Catalogs {
			snap := "none"
			if c.HasSnapshot {
				snap = fmt.Sprint(c.Snapshot)
			}
			at = append(at, fmt.Sprintf("%s (id %d) at snapshot %s", c.Schema, c.ID, snap))
		}
		fmt.Fprintf(tw, "branch %s\tof %s\tstore seq %d\t%s\n", b.Name, b.Branch.Parent, b.Seq, strings.Join(at, ", "))
	}
	fmt.Fprintf(tw, "catalogs\t%d\n", len(cats))
	for _, c := range sortedCatalogs(cats) {
		head := "none"
		if c.HasHead && c.Head.HasSnapshot {
			head = fmt.Sprint(c.Head.Snapshot)
		}
		var rows, bytes int64
		for _, t := range c.Order {
			rows += int64(len(c.Rows[t]))
			for _, r := range c.Rows[t] {
				bytes += int64(len(r))
			}
		}
		fmt.Fprintf(tw, "\ncatalog %s.%s (id %d)\thead snapshot %s\tcommits %d\tlive data files %d\tresident %d rows, %d bytes\n",
			c.Database, c.Schema, c.ID, head, c.Head.Commits, liveFiles(c), rows, bytes)
		fmt.Fprintf(tw, "  table\trows\tbytes\n")
		for _, t := range c.Order {
			var b int64
			for _, r := range c.Rows[t] {
				b += int64(len(r))
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\n", t, len(c.Rows[t]), b)
		}
	}
	return tw.Flush()
}

// liveFiles counts ducklake_data_file rows whose end_snapshot is NULL.
func liveFiles(c *commit.StoredCatalog) int {
	def := c.Defs["ducklake_data_file"]
	if def == nil {
		return 0
	}
	col := colIndex(def, "end_snapshot")
	if col < 0 {
		return 0
	}
	types := colTypes(def)
	n := 0
	for _, r := range c.Rows["ducklake_data_file"] {
		if v, err := r.Column(types, col); err == nil && v.IsNull() {
			n++
		}
	}
	return n
}

func colIndex(def *keyspace.TableDef, name string) int {
	for i, c := range def.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

func colTypes(def *keyspace.TableDef) []datum.Type {
	out := make([]datum.Type, len(def.Columns))
	for i, c := range def.Columns {
		out[i] = c.Type
	}
	return out
}

// SnapshotRow is one DuckLake snapshot with its change record.
type SnapshotRow struct {
	Database, Schema string
	ID               int64
	Time             string
	SchemaVersion    string
	Changes          string
	Author           string
	Message          string
}

// ErrNoCatalog is returned when the filters of Snapshots match no catalog.
var ErrNoCatalog = errors.New("no such catalog")

// Snapshots lists the snapshots of the catalogs matching db and schema
// (empty matches all), oldest first, with their changes.
func Snapshots(ctx context.Context, store objstore.Store, db, schema string) ([]SnapshotRow, error) {
	cats, _, err := readCatalogs(ctx, store)
	if err != nil {
		return nil, err
	}
	var out []SnapshotRow
	matched := false
	for _, c := range sortedCatalogs(cats) {
		if (db != "" && c.Database != db) || (schema != "" && c.Schema != schema) {
			continue
		}
		matched = true
		changes := map[int64][3]string{}
		if def := c.Defs["ducklake_snapshot_changes"]; def != nil {
			types := colTypes(def)
			idc, ch, au, msg := colIndex(def, "snapshot_id"), colIndex(def, "changes_made"), colIndex(def, "author"), colIndex(def, "commit_message")
			for _, r := range c.Rows["ducklake_snapshot_changes"] {
				vals, err := r.Decode(types, nil)
				if err != nil || idc < 0 {
					return nil, fmt.Errorf("snapshots: %s.%s: ducklake_snapshot_changes: %v", c.Database, c.Schema, err)
				}
				changes[vals[idc].Int()] = [3]string{text(types, vals, ch), text(types, vals, au), text(types, vals, msg)}
			}
		}
		def := c.Defs["ducklake_snapshot"]
		if def == nil {
			continue
		}
		types := colTypes(def)
		idc, tc, sv := colIndex(def, "snapshot_id"), colIndex(def, "snapshot_time"), colIndex(def, "schema_version")
		if idc < 0 {
			return nil, fmt.Errorf("snapshots: %s.%s: ducklake_snapshot has no snapshot_id", c.Database, c.Schema)
		}
		for _, r := range c.Rows["ducklake_snapshot"] {
			vals, err := r.Decode(types, nil)
			if err != nil {
				return nil, fmt.Errorf("snapshots: %s.%s: ducklake_snapshot: %w", c.Database, c.Schema, err)
			}
			id := vals[idc].Int()
			ch := changes[id]
			out = append(out, SnapshotRow{Database: c.Database, Schema: c.Schema, ID: id,
				Time: text(types, vals, tc), SchemaVersion: text(types, vals, sv), Changes: ch[0], Author: ch[1], Message: ch[2]})
		}
	}
	if !matched {
		return nil, fmt.Errorf("%w: database %q schema %q", ErrNoCatalog, db, schema)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Database != out[j].Database || out[i].Schema != out[j].Schema {
			return out[i].Database+"\x00"+out[i].Schema < out[j].Database+"\x00"+out[j].Schema
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func text(types []datum.Type, vals []datum.Value, i int) string {
	if i < 0 || i >= len(vals) || vals[i].IsNull() {
		return ""
	}
	return datum.FormatText(types[i], vals[i])
}

// WriteSnapshots prints rows as a table.
func WriteSnapshots(w io.Writer, rows []SnapshotRow) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "catalog\tsnapshot\ttime\tschema_version\tchanges\tauthor\tmessage")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s.%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Database, r.Schema, r.ID, r.Time, r.SchemaVersion, r.Changes, r.Author, r.Message)
	}
	return tw.Flush()
}

// GC deletes (or with dryRun only lists) the store objects no manifest
// can reach, older than grace. It does not open the store as a writer, so
// it never fences a running server (whose own GC runs every minute).
func GC(ctx context.Context, store objstore.Store, grace time.Duration, dryRun bool, w io.Writer) (int, error) {
	plan, err := slate.GCPlan(ctx, store, grace, time.Now())
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	var bytes int64
	verb := "delete"
	if dryRun {
		verb = "would delete"
	}
	// Each line is printed before its object's deletion is attempted.
	each := func(in objstore.ObjectInfo) {
		bytes += in.Size
		fmt.Fprintf(w, "%s %s (%d bytes, %s)\n", verb, in.Key, in.Size, in.ModTime.UTC().Format(time.RFC3339))
	}
	if dryRun {
		for _, in := range plan {
			each(in)
		}
	} else if _, err := slate.DeletePlan(ctx, store, plan, each); err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	fmt.Fprintf(w, "%d objects, %d bytes\n", len(plan), bytes)
	return len(plan), nil
}
