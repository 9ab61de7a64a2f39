package slate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
)

// compactionPlan names the inputs of one compaction.
type compactionPlan struct {
	l0Count    int // > 0: merge the oldest l0Count L0 tables into a new newest run
	runStart   int // otherwise: merge runs[runStart:runEnd] into one run in place
	runEnd     int
	dropTombs  bool // destination is the oldest run: tombstones at or below the horizon can go
	sourceSize uint64
}

// pickCompaction applies the size-tiered policy: first L0 once it holds
// L0CompactionTrigger tables, else the oldest window of at least
// RunMergeWidth consecutive runs whose largest is within RunSizeRatio of its
// smallest.
func pickCompaction(m *manifest, o Options) (compactionPlan, bool) {
	if len(m.l0) >= o.L0CompactionTrigger {
		n := min(len(m.l0), o.MaxCompactionSources)
		return compactionPlan{l0Count: n, dropTombs: len(m.runs) == 0}, true
	}
	for end := len(m.runs); end >= o.RunMergeWidth; end-- {
		lo, hi := m.runs[end-1].size(), m.runs[end-1].size()
		start := end - 1
		for start > 0 && end-start < o.MaxCompactionSources {
			s := m.runs[start-1].size()
			nlo, nhi := min(lo, s), max(hi, s)
			if float64(nhi) > o.RunSizeRatio*float64(max(nlo, 1)) {
				break
			}
			lo, hi = nlo, nhi
			start--
		}
		if end-start >= o.RunMergeWidth {
			return compactionPlan{runStart: start, runEnd: end, dropTombs: end == len(m.runs)}, true
		}
	}
	return compactionPlan{}, false
}

// Compact runs compactions until the policy proposes none.
func (d *DB) Compact(ctx context.Context) error {
	if d.readOnly {
		return ErrReadOnly
	}
	return d.compactAll(ctx)
}

func (d *DB) compactAll(ctx context.Context) error {
	for {
		did, err := d.compactOnce(ctx)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil || !did {
			return err
		}
	}
}

// compactOnce runs one compaction if the policy proposes one.
func (d *DB) compactOnce(ctx context.Context) (bool, error) {
	return d.compactWith(ctx, func(m *manifest) (compactionPlan, bool) { return pickCompaction(m, d.opts) })
}

// Rewrite rewrites the whole store: it flushes the memtable, merges every
// L0 table into a run, then every run into one, keeping of each key only
// the versions a reader may still read (the retention horizon) and
// dropping tombstones. Afterwards no live object holds a value that was
// deleted or overwritten below the horizon; the objects that did become
// garbage, which GC deletes once they are older than GCGrace. It is what
// bounds how long a deleted value stays in the store (Options.RewriteInterval).
func (d *DB) Rewrite(ctx context.Context) error {
	if d.readOnly {
		return ErrReadOnly
	}
	if err := d.Flush(ctx); err != nil {
		return err
	}
	steps := []func(m *manifest) (compactionPlan, bool){
		func(m *manifest) (compactionPlan, bool) {
			return compactionPlan{l0Count: len(m.l0), dropTombs: len(m.runs) == 0}, len(m.l0) > 0
		},
		func(m *manifest) (compactionPlan, bool) {
			return compactionPlan{runStart: 0, runEnd: len(m.runs), dropTombs: true}, len(m.runs) > 0
		},
	}
	for _, pick := range steps {
		for {
			_, err := d.compactWith(ctx, pick)
			if !errors.Is(err, errRetry) {
				if err != nil {
					return fmt.Errorf("rewrite: %w", err)
				}
				break
			}
		}
	}
	d.mu.Lock()
	d.lastRewrite = d.opts.Now()
	d.mu.Unlock()
	return nil
}

// compactWith runs the compaction pick proposes, if any.
func (d *DB) compactWith(ctx context.Context, pick func(*manifest) (compactionPlan, bool)) (bool, error) {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	d.mu.Lock()
	base, horizon, failed := d.man, d.retentionHorizonLocked(), d.failErr
	st, serr := d.stateLocked()
	d.mu.Unlock()
	if failed != nil && errors.Is(failed, ErrFenced) {
		return false, failed
	}
	if serr != nil {
		return false, serr
	}
	plan, ok := pick(base)
	if !ok {
		return false, nil
	}
	// A pin written after st has a seq above horizon, whose versions are
	// all kept anyway.
	pins, err := d.pinnedSeqs(ctx, st)
	if err != nil {
		return false, fmt.Errorf("compaction: %w", err)
	}
	keep := newRetention(horizon, pins)
	var srcs []internalIter
	if plan.l0Count > 0 {
		for _, t := range base.l0[len(base.l0)-plan.l0Count:] {
			srcs = append(srcs, newSSTIter(ctx, d.tables, t, true))
		}
	} else {
		for _, r := range base.runs[plan.runStart:plan.runEnd] {
			srcs = append(srcs, &runIter{ctx: ctx, c: d.tables, tables: r.tables, scan: true})
		}
	}
	outs, err := d.writeCompacted(ctx, newMergeIter(srcs), keep, plan.dropTombs)
	if err != nil {
		return false, fmt.Errorf("compaction: %w", err)
	}
	next := base.clone()
	next.id++
	var newRuns []*sortedRun
	if len(outs) > 0 {
		newRuns = []*sortedRun{{id: next.nextRunID, tables: outs}}
		next.nextRunID++
	}
	if plan.l0Count > 0 {
		next.l0 = slices.Clone(base.l0[:len(base.l0)-plan.l0Count])
		next.runs = append(newRuns, base.runs...)
	} else {
		next.runs = slices.Concat(base.runs[:plan.runStart], newRuns, base.runs[plan.runEnd:])
	}
	if err := d.commitManifest(ctx, next); err != nil {
		return false, fmt.Errorf("compaction: %w", err)
	}
	d.mu.Lock()
	d.man = next
	d.mu.Unlock()
	d.tables.retain(liveTables(next))
	d.stats.compactions.Add(1)
	return true, nil
}

// writeCompacted merges src into new tables, applying retention: every
// version above the horizon is kept, plus the newest version at or below
// each retention point; with dropTombs the oldest version kept is dropped
// if it is a tombstone (nothing older is kept for it to hide). Tables are
// cut only between keys, so all versions of a key share a table.
func (d *DB) writeCompacted(ctx context.Context, src *mergeIter, r retention, dropTombs bool) ([]*sstInfo, error) {
	var outs []*sstInfo
	var b *sstBuilder
	upload := func() error {
		data, info := b.finish()
		info.id = newULID(d.opts.Now())
		if err := d.store.Put(ctx, sstName(info.id), data); err != nil {
			return fmt.Errorf("write %s: %w", sstName(info.id), err)
		}
		d.stats.compactedBytes.Add(info.size)
		outs = append(outs, &info)
		b = nil
		return nil
	}
	var lastKey []byte
	var last entry
	haveLast := false
	next := 0 // the first retention point of the current key not yet covered
	if err := src.seek(nil); err != nil {
		return nil, err
	}
	for src.ok() {
		e := src.cur()
		newKey := !haveLast || !bytes.Equal(e.key, lastKey)
		dup := haveLast && !newKey && e.seq == last.seq
		if newKey {
			if b != nil && b.estimatedSize() >= d.opts.MaxSSTBytes {
				if err := upload(); err != nil {
					return nil, err
				}
			}
			lastKey = append(lastKey[:0], e.key...)
			next = 0
		}
		haveLast, last = true, e
		keep := !dup
		if keep && e.seq <= r.horizon {
			// e is the version the points from next down to e.seq see.
			keep = next < len(r.points) && e.seq <= r.points[next]
			for next < len(r.points) && r.points[next] >= e.seq {
				next++
			}
			if keep && dropTombs && e.kind == kindDelete && next == len(r.points) {
				keep = false
			}
		}
		if keep {
			if b == nil {
				b = newSSTBuilder(d.opts.BlockSize)
			}
			b.add(e)
		}
		if err := src.next(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if b != nil {
		if err := upload(); err != nil {
			return nil, err
		}
	}
	return outs, nil
}
