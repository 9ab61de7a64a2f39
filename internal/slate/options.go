package slate

import "time"

// Options tune a DB. The zero value selects the defaults.
type Options struct {
	// MemtableBytes freezes the active memtable once its approximate size
	// reaches this many bytes (default 16 MiB).
	MemtableBytes int
	// MaxWALsPerMemtable freezes the active memtable after this many WAL
	// objects, so a slow-writing catalog keeps replay short (default 256).
	MaxWALsPerMemtable int
	// MaxImmutables is how many frozen memtables may wait for their flush
	// before writers are held back (default 4).
	MaxImmutables int
	// MaxWALBytes caps the encoded size of one WAL object; a group commit
	// stops adding batches once it would exceed it (a single larger batch is
	// still written whole). Default 16 MiB.
	MaxWALBytes int
	// WALInFlight is how many WAL objects the writer may have in flight at
	// once (default 1, at most MaxWALInFlight). On an object store, where a
	// PUT takes tens of milliseconds, more than one lets the batches that
	// arrive during a PUT start their own instead of waiting for it; they
	// are still acknowledged strictly in WAL order (package comment,
	// invariant 4).
	WALInFlight int
	// BlockSize is the target size of a data block (default 4 KiB).
	BlockSize int
	// MaxSSTBytes caps the size of a compacted table (default 64 MiB).
	MaxSSTBytes int
	// L0CompactionTrigger starts an L0 compaction at this many L0 tables
	// (default 4).
	L0CompactionTrigger int
	// RunMergeWidth is the minimum number of consecutive sorted runs of
	// similar size merged by size-tiered compaction (default 4).
	RunMergeWidth int
	// RunSizeRatio bounds largest/smallest within a merged window (default 4).
	RunSizeRatio float64
	// MaxCompactionSources caps the inputs of one compaction (default 8).
	MaxCompactionSources int
	// DisableAutoCompaction leaves compaction to explicit Compact calls.
	DisableAutoCompaction bool
	// GCInterval is how often the writer garbage-collects; <0 disables the
	// background GC (explicit GC calls still work). Default 1 minute.
	GCInterval time.Duration
	// RewriteInterval is how often the writer rewrites the whole store
	// (DB.Rewrite), so that a deleted or overwritten value leaves every
	// live object within RewriteInterval, and the store altogether GCGrace
	// (plus a GC round) later. 0 disables the rewrite: compaction alone is
	// driven by volume and bounds nothing in time.
	RewriteInterval time.Duration
	// GCGrace is the minimum age of an object before GC may delete it, and
	// how long superseded manifests keep their objects alive (default 5 min).
	GCGrace time.Duration
	// BlockCacheBytes bounds the memory of the decoded-block cache (default
	// 64 MiB).
	BlockCacheBytes int64
	// FencePollInterval is how often an idle writer checks the manifest for
	// a newer writer, so a fenced writer notices without writing; <0
	// disables the check (the next write still detects fencing). Default 1s.
	FencePollInterval time.Duration
	// PollInterval is how often a reader refreshes; 0 disables polling
	// (call Refresh). Ignored by writers.
	PollInterval time.Duration
	// Now is the clock used by GC (default time.Now).
	Now func() time.Time
	// PinPrefix names the store's pins: every live key beginning with it
	// pins the store as of its own version's seq. Compaction keeps, of every
	// key, the newest version at or below each pinned seq, so SnapshotAt can
	// read the whole store as it was when the pinning key was written —
	// until that key is deleted or overwritten. Nil: no pins.
	PinPrefix []byte
	// PinValue, when set, may name one more seq a pin's value pins (a
	// record that reads the store as of another's seq); it returns false
	// for none.
	PinValue func(value []byte) (uint64, bool)
	// Logf receives background errors (flush, compaction, GC) that are
	// retried; nil discards them.
	Logf func(format string, args ...any)
}

// MaxWALInFlight bounds Options.WALInFlight for every writer, past and
// future: a writer that opens covers the WAL ids a fenced writer may still
// have in flight above its fence with fences of its own (Open), and it
// knows how far to go only because no writer ever has more in flight.
// Part of the storage format.
const MaxWALInFlight = 4

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MemtableBytes, 16<<20)
	def(&o.MaxWALsPerMemtable, 256)
	def(&o.MaxImmutables, 4)
	def(&o.MaxWALBytes, 16<<20)
	def(&o.WALInFlight, 1)
	o.WALInFlight = min(o.WALInFlight, MaxWALInFlight)
	def(&o.BlockSize, 4<<10)
	def(&o.MaxSSTBytes, 64<<20)
	def(&o.L0CompactionTrigger, 4)
	def(&o.RunMergeWidth, 4)
	def(&o.MaxCompactionSources, 8)
	if o.RunMergeWidth < 2 {
		o.RunMergeWidth = 2
	}
	if o.RunSizeRatio <= 1 {
		o.RunSizeRatio = 4
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.FencePollInterval == 0 {
		o.FencePollInterval = time.Second
	}
	if o.GCGrace <= 0 {
		o.GCGrace = DefaultGCGrace
	}
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = 64 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}
