package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/slate"
)

// follow keeps a replica's catalog up to date with the writer. Every
// replica-poll it refreshes the slate reader (which follows the writer's
// manifests and WAL) and applies each batch the writer committed since the
// catalog's sequence to the resident catalog, publishing each database's
// next version per commit (catalog.Server.ApplyCommitted): a commit costs
// the replica what it changed, not the catalog's size. Sessions keep their
// pinned version until their transaction ends and see the new one at their
// next transaction, exactly as on the writer.
//
// When the replica cannot follow commit by commit — it fell so far behind
// that WAL objects it had not read were collected, or a batch alters a
// table in place — it reloads the whole catalog from one
// consistent snapshot instead, says so in its log and counts it
// (moraine_replica_reloads_total), and follows commit by commit again from
// there.
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
		if err := st.catchUp(ctx, m, logf); err != nil && ctx.Err() == nil {
			logf("replica: reloading the catalog failed; retrying", "err", err)
		}
	}
}

// catchUp brings the catalog to the reader's sequence: batch by batch when
// the reader recorded every batch since the catalog's sequence, else by a
// reload.
func (st *Stack) catchUp(ctx context.Context, m *Metrics, logf func(msg string, args ...any)) error {
	if st.KV.Stats().LastSeq <= st.followed.Load() {
		return nil
	}
	batches, complete := st.KV.TakeCommitted(st.followed.Load())
	if !complete {
		logf("replica: the store moved past commits this replica did not read (their WAL objects were collected before it read them); reloading the catalog")
		return st.reload(ctx, m)
	}
	for _, b := range batches {
		err := st.Cat.ApplyCommitted(pairOps(b))
		if errors.Is(err, catalog.ErrCannotFollow) {
			logf("replica: reloading the catalog", "reason", err)
			return st.reload(ctx, m)
		}
		if err != nil {
			// A batch the writer committed that does not apply is not
			// repaired by guessing: reload what the store holds.
			logf("replica: a committed batch did not apply; reloading the catalog", "seq", b.Seq, "err", err)
			return st.reload(ctx, m)
		}
		st.followed.Store(b.Seq)
		if m != nil {
			m.ReplicaApplied.Inc()
			m.ReplicaSeq.Set(float64(b.Seq))
			if at, ok := snapshotTime(b); ok {
				lag := time.Since(at).Seconds()
				m.ReplicaLag.Set(lag)
				m.ReplicaLagHist.Observe(lag)
			}
		}
	}
	return nil
}

func pairOps(b slate.Committed) []catalog.PairOp {
	ops := make([]catalog.PairOp, len(b.Ops))
	for i, o := range b.Ops {
		ops[i] = catalog.PairOp{Key: o.Key, Value: o.Value, Delete: o.Delete}
	}
	return ops
}

// snapshotTime is the snapshot_time of the newest DuckLake snapshot a
// batch creates: when the writer committed it (by the writer's clock).
func snapshotTime(b slate.Committed) (time.Time, bool) {
	kt, _ := keyspace.StaticTable("ducklake_snapshot")
	var newest int64
	found := false
	for _, o := range b.Ops {
		if o.Delete || len(o.Key) < 5 || keyspace.Kind(o.Key[4]) != keyspace.KindSnapshot {
			continue
		}
		e, err := keyspace.DecodeKV(o.Key, o.Value, nil)
		if err != nil {
			continue
		}
		v, err := e.Row.Column(kt.Types(), 1)
		if err != nil || v.IsNull() || v.K != datum.KindTimestampTZ {
			continue
		}
		if !found || v.I > newest {
			newest, found = v.I, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return time.UnixMicro(newest + pgEpochMicros), true
}

// pgEpochMicros is 2000-01-01 00:00:00 UTC in Unix microseconds, the zero
// of PostgreSQL's timestamps.
const pgEpochMicros = 946684800 * 1_000_000

// reload replaces the catalog with one loaded from a consistent snapshot of
// the store.
func (st *Stack) reload(ctx context.Context, m *Metrics) error {
	snap, err := st.KV.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer snap.Close()
	seq := snap.Seq()
	it := snap.ScanPrefix(ctx, nil)
	restoreGC := boostGCForLoad()
	next, err := catalog.Load(ctx, it, catalog.Options{Follow: true, ReadAt: st.readAt, BranchSeq: commit.BranchSeq(st.KV)})
	restoreGC()
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
		if ndb.Branch() != nil {
			db, ok := st.Cat.Lookup(name)
			switch {
			case !ok || db.Branch() == nil:
				st.Cat.Forget(name)
				st.Cat.AdoptBranch(ndb)
			case ndb.Branch().Writable():
				for db.Publish(db.Current(), ndb.Current()) != nil {
				}
			}
			// A read-only branch never changes: the one held is the same.
			continue
		}
		db := st.Cat.Database(name)
		// Only this loop publishes on a replica (writes are refused), so
		// the swap cannot lose a race; retry defensively anyway.
		for {
			if err := db.Publish(db.Current(), ndb.Current()); err == nil {
				break
			}
		}
	}
	st.Cat.AdoptFollow(next)
	st.followed.Store(seq)
	if m != nil {
		m.ReplicaReloads.Inc()
		m.ReplicaSeq.Set(float64(seq))
	}
	return nil
}
