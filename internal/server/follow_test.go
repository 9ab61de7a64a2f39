package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// storePairs is every keyspace pair a catalog server's state is stored as:
// every row of every table of every database, and the definitions.
func storePairs(t *testing.T, s *catalog.Server) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := s.Pairs(func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// writerAndReplica starts a writer (with serve flags extra) on a fresh
// local store and opens a replica stack on it; both stop when t ends.
func writerAndReplica(t *testing.T, ctx context.Context, extra ...string) (*testenv.Running, *Stack) {
	t.Helper()
	store := "file://" + t.TempDir()
	w := start(t, store, extra...)
	t.Cleanup(func() { w.Stop(t) })
	st, err := OpenStack(ctx, store, StackOptions{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return w, st
}

// sameAsStore fails t unless the replica's catalog equals a fresh load of
// the store at the sequence it follows.
func sameAsStore(t *testing.T, ctx context.Context, st *Stack) {
	t.Helper()
	snap, err := st.KV.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if snap.Seq() != st.followed.Load() {
		t.Fatalf("replica at %d after catching up to the reader's %d", st.followed.Load(), snap.Seq())
	}
	it := snap.ScanPrefix(ctx, nil)
	fresh, err := catalog.Load(ctx, it, catalog.Options{ReadAt: st.readAt})
	it.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d := firstDifference(storePairs(t, fresh), storePairs(t, st.Cat)); d != "" {
		t.Fatalf("seq %d: the replica differs from a load of the store: %s", snap.Seq(), d)
	}
}

// differingKeys returns, sorted, the keys whose values differ between
// want and got or that only one of them has.
func differingKeys(want, got map[string]string) []string {
	var keys []string
	for k, v := range want {
		if w, ok := got[k]; !ok || v != w {
			keys = append(keys, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func firstDifference(want, got map[string]string) string {
	keys := differingKeys(want, got)
	if len(keys) == 0 {
		return ""
	}
	return fmt.Sprintf("%d keys differ, first %s", len(keys), keyspace.FormatKey([]byte(keys[0])))
}

// TestReplicaFollowsCommitByCommit drives DuckLake's own conversations
// (schema evolution, partitioning and sorting, compaction and expiry,
// inlining, a busy commit mix) and a concurrent writer workload with a
// compactor on a writer, and follows it with a replica stack that applies
// each commit as it reads it. After every round of following, the
// replica's catalog must equal, row for row in every table of every
// database, a fresh load of the store at the same sequence; and the
// replica must have followed by applying commits, reloading nowhere:
// databases created and dropped are followed too.
func TestReplicaFollowsCommitByCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The conversations' data files are not here to read: no row-id hold.
	w, st := writerAndReplica(t, ctx, "--row-id-hold=false")
	m := NewMetrics()

	var wg sync.WaitGroup
	var workErr error
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if workErr == nil {
			workErr = err
		}
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		fresh := &replay.Fresh{Admin: w.Conninfo("postgres")}
		for _, name := range []string{"s02_schema_evolution", "s03_partition_sort", "s04_compaction", "s05_inlining", "s11_commit_mix"} {
			tr, err := replay.LoadFixture(name)
			if err != nil {
				fail(err)
				return
			}
			if err := fresh.Prepare(ctx, tr); err != nil {
				fail(err)
				return
			}
			if res := replay.Replay(ctx, tr, replay.Options{Addr: w.Addr, Timeout: 30 * time.Second}); !res.Passed() {
				fail(fmt.Errorf("%s: %v\n%s", name, res.Err, replay.Explain(res.Err)))
				return
			}
		}
		c, err := pgconn.Connect(ctx, w.Conninfo("postgres"))
		if err != nil {
			fail(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE s02_schema_evolution").ReadAll(); err != nil {
			fail(err)
		}
	}()
	go func() {
		defer wg.Done()
		cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 2, CommitsPerWriter: 30, Tables: 2,
			RetryWait: time.Millisecond, Seed: 11, Compactor: true}
		if err := workload.Prepare(ctx, cfg); err != nil {
			fail(err)
			return
		}
		if _, err := workload.Run(ctx, cfg); err != nil {
			fail(err)
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	logf := func(msg string, args ...any) { t.Logf(msg+" %v", args) }
	rounds := 0
	check := func() {
		t.Helper()
		if err := st.KV.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.catchUp(ctx, m, logf); err != nil {
			t.Fatal(err)
		}
		sameAsStore(t, ctx, st)
		rounds++
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-time.After(20 * time.Millisecond):
		}
		check()
	}
	if workErr != nil {
		t.Fatal(workErr)
	}
	check()
	applied, reloads := testutil.ToFloat64(m.ReplicaApplied), testutil.ToFloat64(m.ReplicaReloads)
	t.Logf("%d rounds: %v commits applied one by one, %v reloads", rounds, applied, reloads)
	if _, ok := st.Cat.Lookup("s02_schema_evolution"); ok {
		t.Fatal("the replica still serves a database the writer dropped")
	}
	if applied < 100 || reloads != 0 {
		t.Fatalf("applied %v commits, reloaded %v times", applied, reloads)
	}
}

// TestReplicaReloadsWhenItCannotFollow: batches the replica did not read
// one by one (here taken from its record, as a flush it fell behind
// would skip them) make it reload the catalog once, equal to a load of the
// store, and it follows commit by commit again afterwards.
func TestReplicaReloadsWhenItCannotFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, st := writerAndReplica(t, ctx)
	m := NewMetrics()
	logf := func(msg string, args ...any) { t.Logf(msg+" %v", args) }
	cfg := workload.Config{ConnString: w.Conninfo("lake"), Writers: 1, CommitsPerWriter: 5, Tables: 1, RetryWait: time.Millisecond, Seed: 3}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	round := func() {
		t.Helper()
		if _, err := workload.Run(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if err := st.KV.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	round()
	st.KV.TakeCommitted(0) // the batches are gone from the record
	if err := st.catchUp(ctx, m, logf); err != nil {
		t.Fatal(err)
	}
	sameAsStore(t, ctx, st)
	if got := testutil.ToFloat64(m.ReplicaReloads); got != 1 {
		t.Fatalf("%v reloads, want 1", got)
	}
	round()
	if err := st.catchUp(ctx, m, logf); err != nil {
		t.Fatal(err)
	}
	sameAsStore(t, ctx, st)
	if r, a := testutil.ToFloat64(m.ReplicaReloads), testutil.ToFloat64(m.ReplicaApplied); r != 1 || a < 5 {
		t.Fatalf("after the reload: %v reloads, %v commits applied", r, a)
	}
}
