package slate

import (
	"context"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// OpenReader opens store read-only. The reader sees the sorted tables of
// the latest manifest plus every WAL object written after it, and follows
// the writer on Refresh (and every Options.PollInterval if set). It writes
// nothing, so it never disturbs the writer; it does not pin objects either,
// so a reader that falls more than Options.GCGrace behind the writer's
// garbage collection may get ErrCorrupt (a missing table) and should
// Refresh. It exposes only durable data.
func OpenReader(ctx context.Context, store objstore.Store, opts Options) (*DB, error) {
	d := newDB(store, opts, true)
	man, err := loadLatestManifest(ctx, store)
	if err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open reader: %w", err)
	}
	if man == nil {
		d.cancel()
		return nil, ErrNoDB
	}
	d.man = man
	d.visibleSeq = man.lastL0Seq
	d.nextWAL = man.replayAfterWAL + 1
	if d.walEpoch, err = d.fenceEpochBelow(ctx, d.nextWAL); err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open reader: %w", err)
	}
	// A reader stops at the first missing WAL object (a live writer's PUT
	// may still be in flight), so a lost object in the middle would end its
	// view early and silently drop the commits after it: it checks the
	// WAL's gaps as the writer does at open, and refuses what the writer
	// would refuse.
	wal, err := listWAL(ctx, store)
	if err != nil {
		d.cancel()
		return nil, fmt.Errorf("slate: open reader: %w", err)
	}
	if err := checkGaps(ctx, store, wal, man.replayAfterWAL, wal.end(man.replayAfterWAL)); err != nil {
		d.cancel()
		return nil, err
	}
	if err := d.replay(ctx, man, d.nextWAL, ^uint64(0), false); err != nil {
		d.cancel()
		return nil, err
	}
	if d.opts.PollInterval > 0 {
		d.wg.Add(1)
		go d.pollLoop()
	}
	return d, nil
}

func (d *DB) pollLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
			if err := d.Refresh(d.ctx); err != nil && d.ctx.Err() == nil {
				d.opts.Logf("slate: reader refresh: %v", err)
			}
		}
	}
}

// Refresh brings a reader up to date with the writer: it follows newer
// manifests and replays WAL objects written since the last refresh.
func (d *DB) Refresh(ctx context.Context) error {
	if !d.readOnly {
		return fmt.Errorf("slate: Refresh is for readers")
	}
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	d.mu.Lock()
	cur := d.man
	d.mu.Unlock()
	latest, err := probeNewerManifest(ctx, d.store, cur)
	if err != nil {
		return fmt.Errorf("slate: refresh: %w", err)
	}
	if latest.id != cur.id && d.committed.on {
		// The writer flushed: replay the WAL objects its new sorted tables
		// absorbed before adopting them, so that the record of committed
		// batches stays whole (objects already collected end the replay,
		// and the record breaks below).
		d.mu.Lock()
		from := d.nextWAL
		d.mu.Unlock()
		if from <= latest.replayAfterWAL {
			if err := d.replay(ctx, cur, from, latest.replayAfterWAL+1, false); err != nil {
				return fmt.Errorf("slate: refresh: %w", err)
			}
		}
	}
	if latest.id != cur.id {
		d.mu.Lock()
		if latest.lastL0Seq > d.visibleSeq {
			// The new sorted tables hold batches this reader never
			// replayed.
			d.committed.breakAt()
		}
		if latest.lastL0Seq > cur.lastL0Seq {
			// Drop what the new sorted tables now hold.
			mem := newMemtable()
			d.mem.tree.Scan(func(e entry) bool {
				if e.seq > latest.lastL0Seq {
					mem.tree.Set(e)
					mem.bytes += len(e.key) + len(e.value) + 16
					mem.maxSeq = max(mem.maxSeq, e.seq)
				}
				return true
			})
			d.mem = mem
		}
		d.man = latest
		d.visibleSeq = max(d.visibleSeq, latest.lastL0Seq)
		jumped := d.nextWAL <= latest.replayAfterWAL
		if jumped {
			d.nextWAL = latest.replayAfterWAL + 1
		}
		d.mu.Unlock()
		if jumped {
			// Fences between the last object replayed and the new start
			// were skipped with it.
			epoch, err := d.fenceEpochBelow(ctx, latest.replayAfterWAL+1)
			if err != nil {
				return fmt.Errorf("slate: refresh: %w", err)
			}
			d.mu.Lock()
			d.walEpoch = max(d.walEpoch, epoch)
			d.mu.Unlock()
		}
		d.tables.retain(liveTables(latest))
	}
	d.mu.Lock()
	from := d.nextWAL
	d.mu.Unlock()
	return d.replay(ctx, latest, from, ^uint64(0), false)
}

// fenceEpochBelow lists the WAL and reads the epoch of the last fence
// below from (the package function), for a reader starting to replay at
// from.
func (d *DB) fenceEpochBelow(ctx context.Context, from uint64) (uint64, error) {
	wal, err := listWAL(ctx, d.store)
	if err != nil {
		return 0, err
	}
	return fenceEpochBelow(ctx, d.store, wal, from)
}

// liveTables returns the ids of every table m references.
func liveTables(m *manifest) map[string]bool {
	live := make(map[string]bool)
	for _, t := range m.l0 {
		live[t.id] = true
	}
	for _, r := range m.runs {
		for _, t := range r.tables {
			live[t.id] = true
		}
	}
	return live
}
