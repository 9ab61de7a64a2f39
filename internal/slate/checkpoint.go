package slate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// Checkpoints (docs/operations.md, "Backups").
//
// A checkpoint is a consistent point of the store that garbage collection
// can never take away. It is pinned by copy: CreateCheckpoint copies the
// objects of one point — the latest manifest, the sorted tables it
// references and the contiguous WAL objects after its replay point — under
// checkpoints/<id>/, keeping their names, and then writes the descriptor
// checkpoints/<id>.checkpoint. GC only ever lists manifest/, wal/ and
// compacted/, so nothing under checkpoints/ is collected, whatever the
// writer does afterwards. The descriptor is written last: a checkpoint
// without one is an interrupted copy and is ignored (DeleteCheckpoint
// removes it).
//
// INVARIANT: the objects of a checkpoint, placed at the root of an empty
// store, form a store that Open and OpenReader accept and whose contents
// are exactly the store's contents at the checkpoint's sequence number.
//
// Copying costs the store's size in space and transfer; a catalog store is
// small (its sorted tables hold the catalog, not the lake's data).

const (
	checkpointPrefix = "checkpoints/"
	checkpointSuffix = ".checkpoint"
)

// ErrNoCheckpoint is returned for an unknown checkpoint id.
var ErrNoCheckpoint = errors.New("slate: no such checkpoint")

// Checkpoint describes one pinned point of a store.
type Checkpoint struct {
	ID       string    `json:"id"`       // ULID: checkpoints sort by creation
	Created  time.Time `json:"created"`  // wall clock of the creator
	Manifest uint64    `json:"manifest"` // manifest id copied
	LastWAL  uint64    `json:"last_wal"` // last WAL id copied (the manifest's replay point if none)
	Seq      uint64    `json:"seq"`      // store sequence number of the checkpoint
	Objects  []string  `json:"objects"`  // object names, relative to the store root
	Bytes    int64     `json:"bytes"`    // their total size
}

func checkpointDescName(id string) string { return checkpointPrefix + id + checkpointSuffix }
func checkpointDir(id string) string      { return checkpointPrefix + id + "/" }

// Progress is told of every object a copy has written and its size, in
// order; nil tells nobody.
type Progress func(key string, bytes int)

func (p Progress) copied(key string, n int) {
	if p != nil {
		p(key, n)
	}
}

// CreateCheckpoint pins the current point of store (it may be served by a
// live writer: the checkpoint reads only, and takes whatever the writer
// has made durable) and returns its descriptor.
func CreateCheckpoint(ctx context.Context, store objstore.Store, p Progress) (*Checkpoint, error) {
	id := newULID(time.Now())
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		cp, err := copyPoint(ctx, store, id, p)
		if err == nil {
			return cp, nil
		}
		lastErr = err
		// A copied object vanished: GC collected it after a newer manifest
		// superseded the one we started from. Start over from the latest.
		if !errors.Is(err, objstore.ErrNotFound) {
			break
		}
	}
	_ = deletePrefix(context.WithoutCancel(ctx), store, checkpointDir(id))
	if errors.Is(lastErr, ErrNoDB) || errors.Is(lastErr, ErrCorrupt) {
		return nil, lastErr // they name the store's state themselves
	}
	return nil, fmt.Errorf("slate: checkpoint: %w", lastErr)
}

func copyPoint(ctx context.Context, store objstore.Store, id string, p Progress) (*Checkpoint, error) {
	man, err := loadLatestManifest(ctx, store)
	if err != nil {
		return nil, err
	}
	if man == nil {
		return nil, ErrNoDB
	}
	objects := []string{manifestName(man.id)}
	for t := range liveTables(man) {
		objects = append(objects, sstName(t))
	}
	wal, err := listWAL(ctx, store)
	if err != nil {
		return nil, err
	}
	// The copy takes the WAL up to its first missing object (a live
	// writer's PUT may be in flight); a gap the writer could not have left
	// would end it early and drop acknowledged commits: refuse it.
	if err := checkGaps(ctx, store, wal, man.replayAfterWAL, wal.end(man.replayAfterWAL)); err != nil {
		return nil, err
	}
	last := man.replayAfterWAL
	for _, ok := wal[last+1]; ok; _, ok = wal[last+1] {
		last++
		objects = append(objects, walName(last))
	}
	sort.Strings(objects)
	cp := &Checkpoint{ID: id, Created: time.Now().UTC(), Manifest: man.id, LastWAL: last, Objects: objects}
	dir := checkpointDir(id)
	for _, key := range objects {
		data, err := store.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", key, err)
		}
		if err := store.Put(ctx, dir+key, data); err != nil {
			return nil, fmt.Errorf("copy %s: %w", key, err)
		}
		p.copied(key, len(data))
		cp.Bytes += int64(len(data))
	}
	// Prove the copy opens and learn its sequence number.
	r, err := OpenReader(ctx, Prefixed(store, dir), Options{})
	if err != nil {
		return nil, fmt.Errorf("verify the copy: %w", err)
	}
	cp.Seq = r.Stats().LastSeq
	r.Close(ctx)
	desc, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := store.PutIfAbsent(ctx, checkpointDescName(id), desc); err != nil {
		return nil, fmt.Errorf("write descriptor: %w", err)
	}
	return cp, nil
}

// ListCheckpoints returns the complete checkpoints of store, oldest first.
func ListCheckpoints(ctx context.Context, store objstore.Store) ([]*Checkpoint, error) {
	infos, err := store.List(ctx, checkpointPrefix)
	if err != nil {
		return nil, fmt.Errorf("slate: list checkpoints: %w", err)
	}
	var out []*Checkpoint
	for _, in := range infos {
		rest := strings.TrimPrefix(in.Key, checkpointPrefix)
		if strings.Contains(rest, "/") || !strings.HasSuffix(rest, checkpointSuffix) {
			continue
		}
		cp, err := GetCheckpoint(ctx, store, strings.TrimSuffix(rest, checkpointSuffix))
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// GetCheckpoint reads one checkpoint's descriptor.
func GetCheckpoint(ctx context.Context, store objstore.Store, id string) (*Checkpoint, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, fmt.Errorf("%w: %q", ErrNoCheckpoint, id)
	}
	data, err := store.Get(ctx, checkpointDescName(id))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoCheckpoint, id)
	}
	if err != nil {
		return nil, fmt.Errorf("slate: checkpoint %s: %w", id, err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, corruptf(checkpointDescName(id), "%v", err)
	}
	if cp.ID != id {
		return nil, corruptf(checkpointDescName(id), "holds checkpoint %q", cp.ID)
	}
	return &cp, nil
}

// DeleteCheckpoint removes a checkpoint (descriptor first, so that a
// crash leaves an ignored partial copy rather than a broken checkpoint).
func DeleteCheckpoint(ctx context.Context, store objstore.Store, id string) error {
	if _, err := GetCheckpoint(ctx, store, id); err != nil {
		return err
	}
	if err := store.Delete(ctx, checkpointDescName(id)); err != nil {
		return fmt.Errorf("slate: delete checkpoint %s: %w", id, err)
	}
	return deletePrefix(ctx, store, checkpointDir(id))
}

func deletePrefix(ctx context.Context, store objstore.Store, prefix string) error {
	infos, err := store.List(ctx, prefix)
	if err != nil {
		return err
	}
	keys := make([]string, len(infos))
	for i, in := range infos {
		keys[i] = in.Key
	}
	return store.DeleteMany(ctx, keys)
}

// OpenCheckpoint opens a checkpoint read-only, in place.
func OpenCheckpoint(ctx context.Context, store objstore.Store, id string, opts Options) (*DB, error) {
	if _, err := GetCheckpoint(ctx, store, id); err != nil {
		return nil, err
	}
	opts.PollInterval = 0
	return OpenReader(ctx, Prefixed(store, checkpointDir(id)), opts)
}

// CopyCheckpoint copies checkpoint id of src to the root of dst, which must
// hold no database, and records the descriptor there as
// backup/<id>.checkpoint. dst then opens as the store was at the checkpoint.
func CopyCheckpoint(ctx context.Context, src objstore.Store, id string, dst objstore.Store, p Progress) (*Checkpoint, error) {
	cp, err := GetCheckpoint(ctx, src, id)
	if err != nil {
		return nil, err
	}
	if err := RequireEmpty(ctx, dst); err != nil {
		return nil, err
	}
	dir := checkpointDir(id)
	for _, key := range cp.Objects {
		data, err := src.Get(ctx, dir+key)
		if err != nil {
			return nil, fmt.Errorf("slate: backup %s: %w", key, err)
		}
		if err := dst.Put(ctx, key, data); err != nil {
			return nil, fmt.Errorf("slate: backup %s: %w", key, err)
		}
		p.copied(key, len(data))
	}
	desc, _ := json.MarshalIndent(cp, "", "  ")
	if err := dst.Put(ctx, "backup/"+id+checkpointSuffix, desc); err != nil {
		return nil, fmt.Errorf("slate: backup descriptor: %w", err)
	}
	return cp, nil
}

// CopyDB copies the database objects (manifests, WAL, sorted tables) of
// src to the root of dst, which must hold no database. src must not have a
// writer (a backup, or a stopped server's store): the copy is not atomic.
func CopyDB(ctx context.Context, src, dst objstore.Store, p Progress) (int, error) {
	if err := RequireEmpty(ctx, dst); err != nil {
		return 0, err
	}
	n := 0
	for _, prefix := range []string{sstPrefix, walPrefix, manifestPrefix} {
		infos, err := src.List(ctx, prefix)
		if err != nil {
			return n, fmt.Errorf("slate: copy: %w", err)
		}
		for _, in := range infos {
			data, err := src.Get(ctx, in.Key)
			if err != nil {
				return n, fmt.Errorf("slate: copy %s: %w", in.Key, err)
			}
			if err := dst.Put(ctx, in.Key, data); err != nil {
				return n, fmt.Errorf("slate: copy %s: %w", in.Key, err)
			}
			p.copied(in.Key, len(data))
			n++
		}
	}
	return n, nil
}

// ErrNotEmpty is returned when a backup or restore target already holds a
// database.
var ErrNotEmpty = errors.New("slate: target store already holds a database")

// RequireEmpty returns ErrNotEmpty if dst holds a database: a backup or a
// restore goes only into an empty store, and checks before it copies.
func RequireEmpty(ctx context.Context, dst objstore.Store) error {
	for _, prefix := range []string{manifestPrefix, walPrefix, sstPrefix} {
		infos, err := dst.List(ctx, prefix)
		if err != nil {
			return fmt.Errorf("slate: check target: %w", err)
		}
		if len(infos) > 0 {
			return fmt.Errorf("%w (%s)", ErrNotEmpty, infos[0].Key)
		}
	}
	return nil
}

// Prefixed returns a view of store under prefix (which ends in "/"). It
// does not close store.
func Prefixed(store objstore.Store, prefix string) objstore.Store {
	return &prefixed{s: store, p: prefix}
}

type prefixed struct {
	s objstore.Store
	p string
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte) error {
	return p.s.Put(ctx, p.p+key, data)
}
func (p *prefixed) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return p.s.PutIfAbsent(ctx, p.p+key, data)
}
func (p *prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	return p.s.Get(ctx, p.p+key)
}
func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return p.s.GetRange(ctx, p.p+key, off, n)
}
func (p *prefixed) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	infos, err := p.s.List(ctx, p.p+prefix)
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.p)
	}
	return infos, err
}
func (p *prefixed) Delete(ctx context.Context, key string) error { return p.s.Delete(ctx, p.p+key) }
func (p *prefixed) DeleteMany(ctx context.Context, keys []string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = p.p + k
	}
	return p.s.DeleteMany(ctx, full)
}
func (p *prefixed) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	in, err := p.s.Stat(ctx, p.p+key)
	in.Key = strings.TrimPrefix(in.Key, p.p)
	return in, err
}
func (p *prefixed) Close() error { return nil }

// IsCheckpointObject reports whether key belongs to a checkpoint (its
// descriptor or its copied objects) rather than to the live store.
func IsCheckpointObject(key string) bool { return strings.HasPrefix(key, checkpointPrefix) }

// DefaultGCInterval is how often the writer collects garbage when
// Options.GCInterval is unset.
const DefaultGCInterval = time.Minute

// DefaultGCGrace is the grace GC uses when Options.GCGrace is unset.
const DefaultGCGrace = 5 * time.Minute
