package slate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// freezeLocked turns the active memtable into an immutable one stamped with
// the last applied WAL id. REQUIRES: d.mu held.
func (d *DB) freezeLocked() {
	if d.mem.empty() {
		return
	}
	d.mem.lastWAL = d.appliedWAL
	d.imm = append(d.imm, d.mem)
	d.mem = newMemtable()
	d.walsInMem = 0
	d.kickBG()
}

func (d *DB) kickBG() {
	select {
	case d.wakeBG <- struct{}{}:
	default:
	}
}

// bgLoop flushes frozen memtables, compacts and collects garbage. Failures
// other than fencing are retried with backoff; they never lose data because
// the WAL holds everything not yet in a published manifest.
func (d *DB) bgLoop() {
	defer d.wg.Done()
	var tick <-chan time.Time
	if d.opts.GCInterval > 0 || d.opts.RewriteInterval > 0 {
		t := time.NewTicker(10 * time.Second)
		if d.opts.GCInterval > 0 {
			t.Reset(min(d.opts.GCInterval, 10*time.Second))
		}
		defer t.Stop()
		tick = t.C
	}
	var fenceTick <-chan time.Time
	if d.opts.FencePollInterval > 0 {
		t := time.NewTicker(d.opts.FencePollInterval)
		defer t.Stop()
		fenceTick = t.C
	}
	backoff := 100 * time.Millisecond
	var retry <-chan time.Time
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-fenceTick:
			if err := d.checkFenced(d.ctx); err != nil {
				if errors.Is(err, ErrFenced) {
					return
				}
				d.opts.Logf("slate: fence check: %v", err)
			}
			continue
		case <-d.wakeBG:
		case <-tick:
		case <-retry:
		}
		retry = nil
		err := d.flushImmutables(d.ctx)
		d.mu.Lock()
		d.flushFailing = err != nil && d.ctx.Err() == nil
		d.commitCond.Broadcast()
		d.mu.Unlock()
		if err == nil && !d.opts.DisableAutoCompaction {
			err = d.compactAll(d.ctx)
		}
		if err == nil && d.opts.RewriteInterval > 0 && d.opts.Now().Sub(d.rewrittenAt()) >= d.opts.RewriteInterval {
			err = d.Rewrite(d.ctx)
		}
		if err == nil && d.opts.GCInterval > 0 && d.opts.Now().Sub(d.lastGC) >= d.opts.GCInterval {
			_, err = d.GC(d.ctx)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if d.ctx.Err() != nil {
			return // closing
		}
		if errors.Is(err, ErrFenced) {
			d.mu.Lock()
			d.failLocked(err)
			d.mu.Unlock()
			return
		}
		d.opts.Logf("slate: background work failed (retrying in %v): %v", backoff, err)
		retry = time.After(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}

// rewrittenAt is when the store was last rewritten (Rewrite); the open
// time before the first.
func (d *DB) rewrittenAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastRewrite
}

// checkFenced looks for a manifest newer than ours written by another
// writer and, if there is one, puts the DB in the fenced state.
func (d *DB) checkFenced(ctx context.Context) error {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	d.mu.Lock()
	cur := d.man
	d.mu.Unlock()
	latest, err := probeNewerManifest(ctx, d.store, cur)
	if err != nil {
		return err
	}
	if latest.writerEpoch == d.epoch {
		return nil
	}
	fenced := fmt.Errorf("manifest %d has writer epoch %d, ours is %d: %w", latest.id, latest.writerEpoch, d.epoch, ErrFenced)
	d.mu.Lock()
	d.failLocked(fenced)
	d.mu.Unlock()
	return fenced
}

// Flush freezes the active memtable and waits until every frozen memtable
// is in a sorted table referenced by a published manifest.
func (d *DB) Flush(ctx context.Context) error {
	if d.readOnly {
		return ErrReadOnly
	}
	d.mu.Lock()
	if d.failErr != nil {
		err := d.failErr
		d.mu.Unlock()
		return err
	}
	d.freezeLocked()
	d.mu.Unlock()
	return d.flushImmutables(ctx)
}

// flushImmutables writes frozen memtables to L0, oldest first, publishing a
// manifest for each.
func (d *DB) flushImmutables(ctx context.Context) error {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	for {
		d.mu.Lock()
		if len(d.imm) == 0 {
			d.mu.Unlock()
			return nil
		}
		m, base, lastSeen := d.imm[0], d.man, d.appliedWAL
		d.mu.Unlock()
		if m.maxSeq <= base.lastL0Seq {
			// Already published by an earlier attempt whose outcome we
			// learned only on a manifest conflict.
			d.popImmutable(base)
			continue
		}
		b := newSSTBuilder(d.opts.BlockSize)
		b.reserve(m.bytes)
		m.tree.Scan(func(e entry) bool { b.add(e); return true })
		data, info := b.finish()
		info.id = newULID(d.opts.Now())
		if err := d.store.Put(ctx, sstName(info.id), data); err != nil {
			return fmt.Errorf("flush: write %s: %w", sstName(info.id), err)
		}
		next := base.clone()
		next.id++
		next.l0 = append([]*sstInfo{&info}, base.l0...)
		next.replayAfterWAL = max(base.replayAfterWAL, m.lastWAL)
		next.walIDLastSeen = max(base.walIDLastSeen, lastSeen)
		next.lastL0Seq = m.maxSeq
		if err := d.commitManifest(ctx, next); err != nil {
			if errors.Is(err, errRetry) {
				continue
			}
			return fmt.Errorf("flush: %w", err)
		}
		d.popImmutable(next)
		d.stats.flushes.Add(1)
		d.stats.flushBytes.Add(info.size)
	}
}

func (d *DB) popImmutable(man *manifest) {
	d.mu.Lock()
	d.man = man
	d.imm = d.imm[1:]
	d.commitCond.Broadcast()
	d.mu.Unlock()
}

// commitManifest creates next (whose id is the current id + 1). On a
// conflict it reloads: a higher epoch means this writer is fenced; our own
// epoch means an earlier ambiguous attempt landed, so the newer manifest is
// adopted and errRetry returned. REQUIRES: d.bgMu held.
func (d *DB) commitManifest(ctx context.Context, next *manifest) error {
	next.writerEpoch = d.epoch
	err := putManifest(ctx, d.store, next)
	if err == nil {
		d.stats.manifestWrites.Add(1)
		return nil
	}
	if !errors.Is(err, errManifestConflict) {
		return err
	}
	latest, lerr := loadLatestManifest(ctx, d.store)
	if lerr != nil {
		return fmt.Errorf("%w (reloading after conflict: %v)", err, lerr)
	}
	if latest == nil || latest.writerEpoch != d.epoch {
		fenced := fmt.Errorf("manifest epoch moved past %d: %w", d.epoch, ErrFenced)
		d.mu.Lock()
		d.failLocked(fenced)
		d.mu.Unlock()
		return fenced
	}
	d.mu.Lock()
	if latest.id > d.man.id {
		d.man = latest
	}
	d.mu.Unlock()
	return errRetry
}
