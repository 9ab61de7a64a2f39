package slate

import "sync/atomic"

// Stats are cumulative counters since the DB was opened, and two gauges
// (LastSeq, BlockCacheBytes).
type Stats struct {
	WALObjects     uint64 // WAL objects written (group commits)
	WALBytes       uint64 // bytes of WAL objects written
	Batches        uint64 // batches made durable
	Flushes        uint64 // memtables flushed to L0
	FlushBytes     uint64 // bytes of L0 tables written
	Compactions    uint64 // compactions published
	CompactedBytes uint64 // bytes of compacted tables written
	ManifestWrites uint64 // manifests created
	GCDeleted      uint64 // objects deleted by GC
	ReplayedWALs   uint64 // WAL objects replayed at open or refresh
	LastSeq        uint64 // highest durable, visible seq
	// BlockCacheBytes is the memory the block cache's decoded blocks hold
	// now (at most Options.BlockCacheBytes).
	BlockCacheBytes int64
}

type stats struct {
	walObjects, walBytes, batches, flushes, flushBytes atomic.Uint64
	compactions, compactedBytes, manifestWrites, gcDel atomic.Uint64
	replayed                                           atomic.Uint64
}

// Stats returns a snapshot of the DB's counters.
func (d *DB) Stats() Stats {
	d.mu.Lock()
	seq := d.visibleSeq
	d.mu.Unlock()
	s := &d.stats
	return Stats{
		WALObjects: s.walObjects.Load(), WALBytes: s.walBytes.Load(), Batches: s.batches.Load(),
		Flushes: s.flushes.Load(), FlushBytes: s.flushBytes.Load(), Compactions: s.compactions.Load(),
		CompactedBytes: s.compactedBytes.Load(), ManifestWrites: s.manifestWrites.Load(),
		GCDeleted: s.gcDel.Load(), ReplayedWALs: s.replayed.Load(), LastSeq: seq,
		BlockCacheBytes: d.tables.blocks.size(),
	}
}
