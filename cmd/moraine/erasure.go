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
		out := make([]verify.ErasureJSON, len(reps))
		for i, r := range reps {
			out[i] = r.JSON(st)
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
		r.WriteText(stdout, st, now)
	}
	return 0
}

func erasureReports(ctx context.Context, url, table string, now time.Time, cfg verify.BoundConfig) ([]*verify.ErasureReport, verify.StoreFigures, error) {
	var st verify.StoreFigures
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
