package verify

import (
	"math"
	"time"
)

// The erasure bound: how long, at most, a value deleted from a table stays
// recoverable, computed from configuration alone. A deleted value takes two
// paths, and each term of a path is one wait it may have to sit out in the
// worst case; the bound is the longer path. A term nobody configured makes
// its path, and the bound, unbounded: the report names it rather than guess.
//
// Data files (the row's bytes in Parquet):
//
//	compaction interval   rewrite_data_files (or flush) rewrites the file without the row
//	snapshot retention    snapshots taken before still see the old file
//	maintenance interval  the next expire_snapshots run drops them and schedules the file
//	cleanup delay         cleanup_old_files deletes it only once this old
//	maintenance interval  … on its next run after that
//	object retention      a versioned data bucket keeps the old bytes
//
// moraine's store (inlined rows, column statistics, file paths):
//
//	compaction interval, snapshot retention, maintenance interval
//	                      until expiry deletes the catalog rows
//	store rewrite         the writer rewrites its store (store-rewrite-interval)
//	store GC              garbage older than the grace goes at the next GC round
//	store object retention a versioned store bucket keeps old objects
//
// Checkpoints and backups hold the catalog as of their time until they are
// deleted: the backup retention is the operator's, and a checkpoint's age
// is a current figure, not configuration.

// Retention is a duration that may be unset.
type Retention struct {
	D   time.Duration
	Set bool
}

// Set returns a set retention.
func Set(d time.Duration) Retention { return Retention{D: d, Set: true} }

// BoundConfig is what the bound is computed from. The snapshot retention and
// cleanup delay come from the catalog options expire_older_than and
// delete_older_than when set there, else from these.
type BoundConfig struct {
	CompactionInterval   Retention
	MaintenanceInterval  Retention
	SnapshotRetention    Retention
	CleanupDelay         Retention
	ObjectRetention      Retention
	StoreRewriteInterval Retention
	StoreGC              time.Duration // the store's GC grace plus one GC round
	StoreObjectRetention Retention
	BackupRetention      Retention
}

// BoundTerm is one term of a path.
type BoundTerm struct {
	Name   string
	Value  Retention
	Source string // the option or flag it came from
}

// ErasureBound is the bound and its two paths.
type ErasureBound struct {
	DataFiles, Store []BoundTerm
	Backups          BoundTerm
	// Total is the longest path (and the backup retention); valid only when
	// Unbounded is empty, which lists the terms nobody configured.
	Total     time.Duration
	Unbounded []string
}

// Bound computes the configured bound for a catalog with options opts.
func Bound(opts map[string]string, cfg BoundConfig) ErasureBound {
	fromCatalog := func(option string, flag Retention, flagName string) BoundTerm {
		if v, ok := opts[option]; ok {
			if d, err := ParseRetention(v); err == nil {
				return BoundTerm{Value: Set(d), Source: option + " = " + v}
			}
		}
		return BoundTerm{Value: flag, Source: flagName}
	}
	term := func(name string, t BoundTerm) BoundTerm { t.Name = name; return t }
	compaction := BoundTerm{Name: "compaction interval", Value: cfg.CompactionInterval, Source: "--compaction-interval"}
	retention := term("snapshot retention", fromCatalog("expire_older_than", cfg.SnapshotRetention, "--snapshot-retention"))
	maintenance := BoundTerm{Name: "maintenance interval", Value: cfg.MaintenanceInterval, Source: "--maintenance-interval"}
	b := ErasureBound{
		DataFiles: []BoundTerm{
			compaction, retention, maintenance,
			term("cleanup delay", fromCatalog("delete_older_than", cfg.CleanupDelay, "--cleanup-delay")),
			maintenance,
			{Name: "data object retention", Value: cfg.ObjectRetention, Source: "--object-retention"},
		},
		Store: []BoundTerm{
			compaction, retention, maintenance,
			{Name: "store rewrite", Value: cfg.StoreRewriteInterval, Source: "--store-rewrite-interval"},
			{Name: "store GC", Value: Set(cfg.StoreGC), Source: "GC grace and round"},
			{Name: "store object retention", Value: cfg.StoreObjectRetention, Source: "--store-object-retention"},
		},
		Backups: BoundTerm{Name: "backup retention", Value: cfg.BackupRetention, Source: "--backup-retention"},
	}
	seen := map[string]bool{}
	sum := func(terms []BoundTerm) time.Duration {
		var total time.Duration
		for _, t := range terms {
			if !t.Value.Set {
				if !seen[t.Name] {
					seen[t.Name] = true
					b.Unbounded = append(b.Unbounded, t.Name+" ("+t.Source+")")
				}
				continue
			}
			total = saturatingAdd(total, t.Value.D)
		}
		return total
	}
	b.Total = max(sum(b.DataFiles), sum(b.Store), sum([]BoundTerm{b.Backups}))
	return b
}

func saturatingAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
