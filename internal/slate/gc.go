package slate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// GC deletes the objects GCPlan names, manifests last, and returns how
// many it deleted. It stops with ErrFenced if a newer writer has taken
// over.
func (d *DB) GC(ctx context.Context) (int, error) {
	if d.readOnly {
		return 0, ErrReadOnly
	}
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	now := d.opts.Now()
	d.lastGC = now
	plan, latest, err := gcPlan(ctx, d.store, d.opts.GCGrace, now)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	if latest == nil || latest.writerEpoch != d.epoch {
		return 0, fmt.Errorf("gc: %w", ErrFenced)
	}
	deleted, err := DeletePlan(ctx, d.store, plan, nil)
	d.stats.gcDel.Add(uint64(deleted))
	if err != nil {
		return deleted, fmt.Errorf("gc: %w", err)
	}
	return deleted, nil
}

// DeletePlan deletes a GCPlan's objects in its order, gcDeleteBatch to a
// DeleteMany, and returns how many it deleted. each, if not nil, is called
// with every object before the call that deletes it.
func DeletePlan(ctx context.Context, store objstore.Store, plan []objstore.ObjectInfo, each func(objstore.ObjectInfo)) (int, error) {
	deleted := 0
	for chunk := range slices.Chunk(plan, gcDeleteBatch) {
		keys := make([]string, len(chunk))
		for i, in := range chunk {
			keys[i] = in.Key
			if each != nil {
				each(in)
			}
		}
		if err := store.DeleteMany(ctx, keys); err != nil {
			return deleted, fmt.Errorf("delete %s…: %w", keys[0], err)
		}
		deleted += len(chunk)
	}
	return deleted, nil
}

// GCPlan lists the objects no manifest can reach any more, in the order
// they are to be deleted: what GC deletes now with the given grace, read
// from the store without being the writer. An object is in the plan only
// if it is older than grace and:
//
//   - a sorted table: neither the latest manifest nor any manifest younger
//     than grace references it, and it is older than the latest manifest
//     (a younger one may be the output of a flush or compaction under way:
//     latestManifestTime);
//   - a WAL object: it holds batches (fences are kept forever, as in
//     SlateDB's fencing: one removed would let a fenced writer's late PUT
//     land in its place) and its id is at or below the replay point of
//     every manifest younger than grace and of the latest;
//   - a manifest: its id is below the latest manifest's. Manifests come
//     last: a deletion that stops before them leaves them, and they are
//     harmless.
//
// Deleting exactly these objects in this order is safe while a writer
// runs: a writer only ever adds manifests that reference the latest
// manifest's tables or tables younger than grace, and only WAL objects
// above the latest replay point.
func GCPlan(ctx context.Context, store objstore.Store, grace time.Duration, now time.Time) ([]objstore.ObjectInfo, error) {
	plan, latest, err := gcPlan(ctx, store, grace, now)
	if err != nil {
		return nil, fmt.Errorf("gc plan: %w", err)
	}
	if latest == nil {
		return nil, ErrNoDB
	}
	return plan, nil
}

// gcPlan is GCPlan, with the latest manifest it read (nil, and no plan,
// for a store without one).
func gcPlan(ctx context.Context, store objstore.Store, grace time.Duration, now time.Time) ([]objstore.ObjectInfo, *manifest, error) {
	cutoff := now.Add(-grace)
	mans, err := store.List(ctx, manifestPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list manifests: %w", err)
	}
	latest, err := loadLatestManifest(ctx, store)
	if err != nil || latest == nil {
		return nil, nil, err
	}
	live := liveTables(latest)
	floor := latest.replayAfterWAL
	var plan, oldMans []objstore.ObjectInfo
	for _, in := range mans {
		id, ok := parseID(in.Key, manifestPrefix, manifestSuffix)
		if !ok || id >= latest.id {
			continue
		}
		if in.ModTime.Before(cutoff) {
			oldMans = append(oldMans, in)
			continue
		}
		m, _, err := getManifest(ctx, store, id)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for t := range liveTables(m) {
			live[t] = true
		}
		floor = min(floor, m.replayAfterWAL)
	}
	ssts, err := store.List(ctx, sstPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	fresh := latestManifestTime(mans, latest.id)
	for _, in := range ssts {
		if id, ok := parseSSTName(in.Key); ok && !live[id] && in.ModTime.Before(cutoff) && in.ModTime.Before(fresh) {
			plan = append(plan, in)
		}
	}
	wals, err := store.List(ctx, walPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list WAL: %w", err)
	}
	for _, in := range wals {
		if id, ok := parseID(in.Key, walPrefix, walSuffix); ok && !isFence(in.Size) && id <= floor && in.ModTime.Before(cutoff) {
			plan = append(plan, in)
		}
	}
	return append(plan, oldMans...), latest, nil
}

// gcDeleteBatch bounds the objects GC hands the store in one DeleteMany: a
// round that fails has deleted what it reports, and at most this many
// more.
const gcDeleteBatch = 1000

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
