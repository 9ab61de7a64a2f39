package sql

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
)

// TestConcurrentCommits runs DuckLake's optimistic commit loop from several
// sessions at once: read the latest snapshot, insert snapshot+1 and its
// changes, commit; a loser gets an error naming a unique violation (or a
// serialization failure), rolls back and retries. Every commit must land
// exactly once and the snapshot ids must be dense.
func TestConcurrentCommits(t *testing.T) {
	ex := testServer()
	ctx := context.Background()
	setup := ex.Open("lake", "postgres", "", 1)
	if out := runSQL(ctx, setup, `CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE);
CREATE TABLE "public"."ducklake_snapshot_changes"("snapshot_id" BIGINT PRIMARY KEY, "changes_made" VARCHAR);
INSERT INTO "public".ducklake_snapshot VALUES (0, NOW())`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	const writers, commits = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := ex.Open("lake", "postgres", "", uint32(10+w))
			defer s.Close()
			for done := 0; done < commits; {
				ts := &textSink{}
				if err := s.query(ctx, `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT max(snapshot_id) FROM "public".ducklake_snapshot`, ts); err != nil {
					errs <- err
					return
				}
				lines := strings.Split(strings.TrimSpace(ts.b.String()), "\n")
				head, err := strconv.Atoi(lines[len(lines)-2])
				if err != nil {
					errs <- fmt.Errorf("reading head: %q", ts.b.String())
					return
				}
				next := head + 1
				batch := fmt.Sprintf(`INSERT INTO "public".ducklake_snapshot VALUES (%d, NOW()); INSERT INTO "public".ducklake_snapshot_changes VALUES (%d, 'writer %d')`, next, next, w)
				err = s.query(ctx, batch, &textSink{})
				if err == nil {
					err = s.query(ctx, "COMMIT", &textSink{})
					if err == nil {
						done++
						continue
					}
				}
				pe, ok := wireError(err)
				if !ok || !(strings.Contains(pe.Message, "unique") || strings.Contains(pe.Message, "concurrent")) {
					errs <- fmt.Errorf("writer %d: unexpected error %v", w, err)
					return
				}
				_ = s.query(ctx, "ROLLBACK", &textSink{})
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v := setup.db.Head()
	tb, ok := v.Lookup("public", "ducklake_snapshot")
	if !ok {
		t.Fatal("no snapshot table")
	}
	var ids []int64
	if err := tb.Scan(func(_ int64, vals []datum.Value) bool { ids = append(ids, vals[0].I); return true }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != writers*commits+1 {
		t.Fatalf("%d snapshots, want %d", len(ids), writers*commits+1)
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		if id < 0 || id > writers*commits || seen[id] {
			t.Fatalf("snapshot ids not dense: %v", ids)
		}
		seen[id] = true
	}
}

// TestLatestSnapshotLinear pins that the latest-snapshot template runs its
// uncorrelated MAX subquery once, not once per row: with 20000 snapshots
// it must answer quickly (per-row evaluation would take minutes).
func TestLatestSnapshotLinear(t *testing.T) {
	ex := testServer()
	ctx := context.Background()
	s := ex.Open("lake", "postgres", "", 1)
	var b strings.Builder
	b.WriteString(`CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "schema_version" BIGINT); INSERT INTO "public".ducklake_snapshot VALUES `)
	const n = 20000
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "(%d, %d)", i, i/10)
	}
	if out := runSQL(ctx, s, b.String(), ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	start := time.Now()
	out := runSQL(ctx, s, `SELECT snapshot_id, schema_version FROM "public".ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM "public".ducklake_snapshot)`, "")
	if !strings.Contains(out, fmt.Sprintf("%d | %d", n-1, (n-1)/10)) {
		t.Fatalf("latest snapshot: %s", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("latest-snapshot read took %v", d)
	}
	// A correlated subquery still sees the outer row.
	out = runSQL(ctx, s, `SELECT snapshot_id FROM "public".ducklake_snapshot o WHERE snapshot_id < 3 AND EXISTS (SELECT 1 FROM "public".ducklake_snapshot i WHERE i.snapshot_id = o.snapshot_id + 1) ORDER BY 1`, "")
	if !strings.Contains(out, "0\n1\n2\nSELECT 3") {
		t.Fatalf("correlated EXISTS: %s", out)
	}
}

// TestFreshSessionQueuesLikeAWriter: a session that has not written yet
// takes its first transaction block's snapshot as a writing session does —
// after the write under way — so that a burst of new DuckLake connections
// committing at once does not all pin one head (and all but one fail and
// back off). Once one of its blocks ended without writing, it reads like
// any reader: at once, without waiting for the write under way.
// snapshotServer returns a server whose database lake holds a
// ducklake_snapshot table with snapshot 0, for the tests of how writers pin.
func snapshotServer(t *testing.T) *Executor {
	t.Helper()
	ex := testServer()
	setup := ex.Open("lake", "postgres", "", 1)
	defer setup.Close()
	if out := runSQL(context.Background(), setup, `CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY);
INSERT INTO "public".ducklake_snapshot VALUES (0)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	return ex
}

// twoSessions opens two sessions on a fresh snapshotServer, closed when
// the test ends.
func twoSessions(t *testing.T) (a, b *Session) {
	t.Helper()
	ex := snapshotServer(t)
	a, b = ex.Open("lake", "postgres", "", 2), ex.Open("lake", "postgres", "", 3)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// headOf is the newest snapshot id s reads.
func headOf(ctx context.Context, s *Session) (int, error) {
	ts := &textSink{}
	if err := s.query(ctx, `SELECT max(snapshot_id) FROM "public".ducklake_snapshot`, ts); err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSpace(ts.b.String()), "\n")
	return strconv.Atoi(lines[len(lines)-2])
}

func TestFreshSessionQueuesLikeAWriter(t *testing.T) {
	ex := snapshotServer(t)
	ctx := context.Background()
	head := func(s *Session) (int, error) { return headOf(ctx, s) }
	mustQuery := func(s *Session, sql string) {
		t.Helper()
		if err := s.query(ctx, sql, &textSink{}); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	pid := uint32(10)
	open := func() *Session {
		pid++
		s := ex.Open("lake", "postgres", "", pid)
		t.Cleanup(func() { s.Close() })
		return s
	}
	// A reader: one of its blocks ended without writing.
	reader := open()
	mustQuery(reader, "BEGIN")
	if _, err := head(reader); err != nil {
		t.Fatal(err)
	}
	mustQuery(reader, "COMMIT")

	next := 0
	for attempt := 1; ; attempt++ {
		next++
		w := open() // claims next and commits it a moment later
		mustQuery(w, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
		mustQuery(w, fmt.Sprintf(`INSERT INTO "public".ducklake_snapshot VALUES (%d)`, next))
		// The reader pins at once, before the commit.
		mustQuery(reader, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
		got, err := head(reader)
		if err != nil {
			t.Fatal(err)
		}
		if got != next-1 {
			t.Fatalf("a reader waited for the write under way: it read %d, want %d", got, next-1)
		}
		mustQuery(reader, "COMMIT")
		// A fresh session waits for it (settle bounds the wait for a
		// claim to 10 ms from the claim; a machine that took longer than
		// that to get here is retried).
		fresh := open()
		mustQuery(fresh, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ")
		res := make(chan int, 1)
		go func() {
			h, err := head(fresh)
			if err != nil {
				h = -1
			}
			res <- h
		}()
		time.Sleep(2 * time.Millisecond)
		mustQuery(w, "COMMIT")
		got = <-res
		mustQuery(fresh, "ROLLBACK")
		if got == next {
			return
		}
		if got != next-1 || attempt == 5 {
			t.Fatalf("attempt %d: a fresh session's first block read %d, want %d (after the write under way)", attempt, got, next)
		}
	}
}

// TestPoolChecksDoNotQueue: DuckDB's connection pool sends `SELECT 1` and
// `DISCARD ALL` around every DuckLake transaction, outside any block, on a
// session that writes. They read no table, so they must answer at once
// while another writer holds the writers' lease mid-transaction, rather
// than queue for it (and join the commit chain). A read of a table by the
// same session still queues: it pins like a writer's.
func TestPoolChecksDoNotQueue(t *testing.T) {
	ctx := context.Background()
	holder, pool := twoSessions(t)
	// Waits long enough that waiting cannot pass for scheduling noise.
	pool.db.SetWaits(time.Hour, time.Hour)
	for _, q := range []string{`INSERT INTO "public".ducklake_snapshot VALUES (1)`, "BEGIN", `INSERT INTO "public".ducklake_snapshot VALUES (2)`} {
		s := pool // the pool's session has written before
		if q == "BEGIN" || strings.Contains(q, "(2)") {
			s = holder // holds the lease until it ends its block
		}
		if out := runSQL(ctx, s, q, ""); strings.Contains(out, "ERROR") {
			t.Fatalf("%s: %s", q, out)
		}
	}
	for _, q := range []string{"SELECT 1", "DISCARD ALL", "SELECT 1", "SET application_name = 'x'", "SHOW application_name", "SELECT CAST(1 AS BIGINT), 'a'"} {
		// The lease is held for an hour: a statement that queued for it
		// runs into this minute-long deadline, one that does not never
		// comes near it.
		qctx, cancel := context.WithTimeout(ctx, time.Minute)
		ts := &textSink{}
		err := pool.query(qctx, q, ts)
		cancel()
		if err != nil {
			t.Fatalf("%s while another writer holds the lease: %v", q, err)
		}
	}
	// A read of a table does wait: for the holder's commit.
	done := make(chan int, 1)
	go func() {
		n, err := headOf(ctx, pool)
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	select {
	case n := <-done:
		t.Fatalf("a writing session's read did not wait for the lease: it read %d", n)
	case <-time.After(200 * time.Millisecond):
	}
	if out := runSQL(ctx, holder, "COMMIT", ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	if n := <-done; n != 2 {
		t.Fatalf("after the holder's commit the read saw %d, want 2", n)
	}
}

func TestReadsNothing(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"SELECT 1", true},
		{"SELECT 1, 'x', CAST(2 AS BIGINT)", true},
		{"DISCARD ALL", true},
		{"SET application_name = 'x'", true},
		{"SHOW search_path", true},
		{"SELECT max(snapshot_id) FROM t", false},
		{"SELECT (SELECT 1 FROM t)", false},
		{"SELECT 1 WHERE true", false},
		{"SELECT now()", false},
		{"SELECT 'a'::regclass", true}, // the durable version answers it
		{"SELECT 1 UNION SELECT 2", false},
		{"INSERT INTO t VALUES (1)", false},
		{"VALUES (1)", false},
		{"WITH a AS (SELECT 1) SELECT 1", false},
	} {
		stmts, err := newParseCache(16).parse(c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if got := readsNothing(stmts[0].node); got != c.want {
			t.Errorf("readsNothing(%s) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// slowSink is a textSink whose rows block until release is closed: a
// statement that takes as long as the test wants.
type slowSink struct {
	textSink
	entered chan struct{}
	release chan struct{}
}

func (s *slowSink) rows(cols []colInfo, rows [][]datum.Value, tag string) error {
	close(s.entered)
	<-s.release
	return s.textSink.rows(cols, rows, tag)
}

// TestLeaseHeldThroughAStatement: the writers' lease lapses only after its
// holder sat idle between statements for leaseHold, not while one of its
// statements runs (a DuckLake commit's whole-table reads on a large
// catalog): the session marks each statement's start and end.
func TestLeaseHeldThroughAStatement(t *testing.T) {
	ctx := context.Background()
	holder, other := twoSessions(t)
	const hold = 100 * time.Millisecond // leaseMax is 10× this
	holder.db.SetWaits(time.Hour, hold)
	for _, c := range []struct {
		s *Session
		q string
	}{
		{holder, `INSERT INTO "public".ducklake_snapshot VALUES (1)`},
		{other, `INSERT INTO "public".ducklake_snapshot VALUES (2)`},
		{holder, "BEGIN"},
	} {
		if out := runSQL(ctx, c.s, c.q, ""); strings.Contains(out, "ERROR") {
			t.Fatalf("%s: %s", c.q, out)
		}
	}
	slow := &slowSink{entered: make(chan struct{}), release: make(chan struct{})}
	ran := make(chan error, 1)
	go func() {
		ran <- holder.query(ctx, `SELECT snapshot_id FROM "public".ducklake_snapshot`, slow)
	}()
	<-slow.entered // holder pinned and holds the lease, mid-statement
	done := make(chan time.Time, 1)
	go func() {
		if _, err := headOf(ctx, other); err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	select {
	case <-done:
		t.Fatal("a writing session pinned while the lease holder ran a statement")
	case <-time.After(3 * hold):
	}
	close(slow.release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	at := <-done
	if el := at.Sub(ended); el < hold/2 {
		t.Fatalf("the next writer pinned %v after the holder's statement ended, want about leaseHold (%v)", el, hold)
	}
	if out := runSQL(ctx, holder, "ROLLBACK", ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
}
