package slate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// GC deletes objects no manifest can reach any more, and returns how many
// it deleted. An object is deleted only if it is older than GCGrace and:
//
//   - a manifest: its id is below the latest manifest's;
//   - a WAL object: it holds batches (fences are kept forever, as in SlateDB's
//     fencing: one removed would let a fenced writer's late PUT land in its
//     place) and its id is at or below the replay point of every manifest
//     younger than GCGrace and of the latest;
//   - a sorted table: neither the latest manifest nor any manifest younger
//     than GCGrace references it, and it is older than the latest manifest
//     (a younger one may be the output of a flush or compaction under way:
//     latestManifestTime).
//
// GC reads the manifests from the store, not this writer's memory, and
// stops with ErrFenced if a newer writer has taken over.
func (d *DB) GC(ctx context.Context) (int, error) {
	if d.readOnly {
		return 0, ErrReadOnly
	}
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	now := d.opts.Now()
	d.lastGC = now
	cutoff := now.Add(-d.opts.GCGrace)

	mans, err := d.store.List(ctx, manifestPrefix)
	if err != nil {
		return 0, fmt.Errorf("gc: list manifests: %w", err)
	}
	latest, err := loadLatestManifest(ctx, d.store)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	if latest == nil || latest.writerEpoch != d.epoch {
		return 0, fmt.Errorf("gc: %w", ErrFenced)
	}
	liveSST := liveTables(latest)
	replayFloor := latest.replayAfterWAL
	var oldManifests []objstore.ObjectInfo
	for _, in := range mans {
		id, ok := parseID(in.Key, manifestPrefix, manifestSuffix)
		if !ok || id >= latest.id {
			continue
		}
		if in.ModTime.Before(cutoff) {
			oldManifests = append(oldManifests, in)
			continue
		}
		m, _, err := getManifest(ctx, d.store, id)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("gc: %w", err)
		}
		for id := range liveTables(m) {
			liveSST[id] = true
		}
		replayFloor = min(replayFloor, m.replayAfterWAL)
	}
	deleted := 0
	del := func(key string) error {
		if err := d.store.Delete(ctx, key); err != nil {
			return fmt.Errorf("gc: delete %s: %w", key, err)
		}
		deleted++
		d.stats.gcDel.Add(1)
		return nil
	}

	ssts, err := d.store.List(ctx, sstPrefix)
	if err != nil {
		return deleted, fmt.Errorf("gc: list tables: %w", err)
	}
	fresh := latestManifestTime(mans, latest.id)
	for _, in := range ssts {
		id, ok := parseSSTName(in.Key)
		if ok && !liveSST[id] && in.ModTime.Before(cutoff) && in.ModTime.Before(fresh) {
			if err := del(in.Key); err != nil {
				return deleted, err
			}
		}
	}
	wals, err := d.store.List(ctx, walPrefix)
	if err != nil {
		return deleted, fmt.Errorf("gc: list WAL: %w", err)
	}
	for _, in := range wals {
		id, ok := parseID(in.Key, walPrefix, walSuffix)
		if ok && !isFence(in.Size) && id <= replayFloor && in.ModTime.Before(cutoff) {
			if err := del(in.Key); err != nil {
				return deleted, err
			}
		}
	}
	// Manifests last: a crash above leaves them, and they are harmless.
	for _, in := range oldManifests {
		if err := del(in.Key); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// latestManifestTime returns when the latest manifest (id latestID) was
// written, by the store's clock; the zero time if it is not in mans.
//
// A writer publishes no manifest while a flush or compaction runs (both
// hold bgMu, as does every manifest write but the fencing one in Open), so
// a sorted table written at or after the latest manifest may be the output
// of one still under way — however long it has run, and a compaction of a
// large store can outlast any grace period. GC keeps such tables. Once the
// next manifest lands they either are referenced or are garbage, and age
// out normally.
func latestManifestTime(mans []objstore.ObjectInfo, latestID uint64) time.Time {
	for _, in := range mans {
		if id, ok := parseID(in.Key, manifestPrefix, manifestSuffix); ok && id == latestID {
			return in.ModTime
		}
	}
	return time.Time{}
}
