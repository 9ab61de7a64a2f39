package server

import (
	"context"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
)

// follow keeps a replica's catalog up to date with the writer. Every
// replica-poll it refreshes the slate reader (which follows the writer's
// manifests and WAL); whenever the reader's sequence moves past the one the
// catalog was built at, follow loads a new catalog from one consistent
// snapshot and
// publishes each database's new version into the served catalog. Sessions
// keep their pinned version until their transaction ends and see the new one
// at their next transaction, exactly as on the writer.
//
// A reload costs a full catalog load (O(catalog size)); commits arriving
// while it runs are picked up by the next round.
func (st *Stack) follow(ctx context.Context, every time.Duration, m *Metrics, logf func(msg string, args ...any)) {
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := st.KV.Refresh(ctx); err != nil && ctx.Err() == nil {
			logf("replica: following the writer failed; retrying", "err", err)
			continue
		}
		if err := st.catchUp(ctx, m); err != nil && ctx.Err() == nil {
			logf("replica: reloading the catalog failed; retrying", "err", err)
		}
	}
}

// catchUp reloads the catalog if the store moved on since the last load.
func (st *Stack) catchUp(ctx context.Context, m *Metrics) error {
	if st.KV.Stats().LastSeq <= st.followed.Load() {
		return nil
	}
	snap, err := st.KV.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer snap.Close()
	seq := snap.Seq()
	it := snap.ScanPrefix(ctx, nil)
	next, err := catalog.Load(ctx, it, catalog.Options{})
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for _, name := range st.Cat.Databases() {
		if _, ok := next.Lookup(name); !ok {
			st.Cat.Forget(name) // the writer dropped it
		}
	}
	for _, name := range next.Databases() {
		ndb, _ := next.Lookup(name)
		db := st.Cat.Database(name)
		// Only this loop publishes on a replica (writes are refused), so
		// the swap cannot lose a race; retry defensively anyway.
		for {
			if err := db.Publish(db.Current(), ndb.Current()); err == nil {
				break
			}
		}
	}
	st.followed.Store(seq)
	if m != nil {
		m.ReplicaReloads.Inc()
		m.ReplicaSeq.Set(float64(seq))
	}
	return nil
}
