package workload

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/testenv"
)

// TestChainLinks: a link is the time between the batch answers of
// consecutive snapshots, both answered in the timed window; a snapshot
// whose predecessor did not land (or landed during the warm-up) has none,
// nor has one answered after the window closed.
func TestChainLinks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &Result{timedFrom: at(10), timedTo: at(30), landed: []Landed{
		{Snapshot: 12, Answered: at(31)}, // after the window
		{Snapshot: 4, Answered: at(5)},   // warm-up
		{Snapshot: 5, Answered: at(11)},  // its predecessor was warm-up: no link
		{Snapshot: 7, Answered: at(14)},  // out of acknowledgement order
		{Snapshot: 6, Answered: at(12)},
		{Snapshot: 9, Answered: at(20)}, // 8 did not land: no link
		{Snapshot: 10, Answered: at(25)},
		{Snapshot: 11}, // never answered (setup): no time
	}}
	got := r.ChainLinks()
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("ChainLinks = %v, want %v", got, want)
	}
}

// TestChainPhases: a link breaks down into the wait for the snapshot's
// answer after the previous batch's (negative when it came first), the
// statistics reads, the path reads and the batch, which add up to the
// link. Links whose commit was retried (no phases) or whose predecessor
// did not land in the timed window have none; a link is late when its
// writer took its connection from the pool only after the previous batch
// was answered. SummarizePhases gives each phase's median and mean, and the
// late links' share of the time.
func TestChainPhases(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	ph := func(began, pinned, stats, paths int) Phases {
		return Phases{Began: us(began), Pinned: us(pinned), StatsRead: us(stats), PathsRead: us(paths)}
	}
	r := &Result{timedFrom: us(1000), timedTo: us(5000), landed: []Landed{
		{Snapshot: 9, Answered: us(900)},                                       // warm-up
		{Snapshot: 10, Answered: us(1100), Phases: ph(950, 1000, 1050, 1080)},  // predecessor in the warm-up
		{Snapshot: 11, Answered: us(1500), Phases: ph(1000, 1090, 1200, 1260)}, // waited; snapshot answered 10 µs early
		{Snapshot: 12, Answered: us(1800)},                                     // retried: no phases
		{Snapshot: 13, Answered: us(4800), Phases: ph(2000, 2100, 2300, 2400)}, // late: began after 12's answer
	}}
	got := r.ChainPhases()
	want := []LinkPhases{
		{Snapshot: 11, Wait: -10 * time.Microsecond, Stats: 110 * time.Microsecond, Paths: 60 * time.Microsecond, Batch: 240 * time.Microsecond, Link: 400 * time.Microsecond},
		{Snapshot: 13, Wait: 300 * time.Microsecond, Stats: 200 * time.Microsecond, Paths: 100 * time.Microsecond, Batch: 2400 * time.Microsecond, Link: 3000 * time.Microsecond, Late: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ChainPhases =\n%+v\nwant\n%+v", got, want)
	}
	for _, l := range got {
		if l.Wait+l.Stats+l.Paths+l.Batch != l.Link {
			t.Errorf("snapshot %d: phases add up to %v, the link is %v", l.Snapshot, l.Wait+l.Stats+l.Paths+l.Batch, l.Link)
		}
	}
}

// TestWriterCycles: a writer's step from one commit to its next is counted
// for commits answered in the window, landed at their first attempt, whose
// writer's previous commit landed (wherever it was answered); the setup's
// and the compactor's commits are not a writer's.
func TestWriterCycles(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	ph := func(began, pinned int) Phases {
		return Phases{Began: us(began), Pinned: us(pinned), StatsRead: us(pinned + 10), PathsRead: us(pinned + 20)}
	}
	r := &Result{timedFrom: us(1000), timedTo: us(5000), landed: []Landed{
		{Writer: 0, Nth: 0, Answered: us(900), Phases: ph(500, 600)},     // the warm-up: a predecessor only
		{Writer: 0, Nth: 1, Answered: us(1500), Phases: ph(1200, 1300)},  // tail 300, to snapshot 100
		{Writer: 1, Nth: 3, Answered: us(1600), Phases: ph(1100, 1400)},  // its Nth 2 did not land
		{Writer: 2, Nth: 0, Answered: us(2400)},                          // retried: a predecessor only
		{Writer: -1, Nth: 5, Answered: us(2500), Phases: ph(2000, 2100)}, // the compactor
		{Writer: 1, Nth: 4, Answered: us(2000), Phases: ph(1800, 1900)},  // tail 200, to snapshot 100
		{Writer: 0, Nth: 2, Answered: us(2600)},                          // retried: no phases
		{Writer: 2, Nth: 1, Answered: us(3000), Phases: ph(2800, 2960)},  // tail 400, to snapshot 160
		{Writer: 0, Nth: 3, Answered: us(6000), Phases: ph(2700, 2800)},  // after the window
	}}
	got := r.WriterCycles()
	want := []WriterCycle{
		{Writer: 0, Nth: 1, Tail: 300 * time.Microsecond, ToSnapshot: 100 * time.Microsecond},
		{Writer: 1, Nth: 4, Tail: 200 * time.Microsecond, ToSnapshot: 100 * time.Microsecond},
		{Writer: 2, Nth: 1, Tail: 400 * time.Microsecond, ToSnapshot: 160 * time.Microsecond},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("WriterCycles =\n%+v\nwant\n%+v", got, want)
	}
}

// TestWindowHasNoBarrier: the timed window opens while writers are in the
// middle of commits they began during the warm-up — nobody waits for the
// others at its edge (a barrier there would start every writer at once,
// which on PostgreSQL collides them all on the same snapshot id). Eight
// writers commit back to back, so when the 16th commit ends some of the
// other seven have begun theirs.
func TestWindowHasNoBarrier(t *testing.T) {
	ctx := context.Background()
	dial, drop, err := FreshDatabase(ctx, testenv.Postgres(t), "moraine_wl")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	cfg := Config{Dial: dial, Writers: 8, CommitsPerWriter: 2, Warmup: 16, Tables: 2, MaxRetries: 1000, RetryWait: 5 * time.Millisecond, Seed: 9}
	if err := Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	straddling := 0
	for _, l := range res.Landed() {
		if l.Kind == "insert" && l.Began.Before(res.timedFrom) && l.Answered.After(res.timedFrom) {
			straddling++
		}
	}
	if straddling == 0 {
		t.Fatalf("no commit began before the window opened (%v) and was answered in it: the writers waited at its edge", res.timedFrom)
	}
	if res.Commits+res.Failed != 16 || res.timedTo.Sub(res.timedFrom) != res.Elapsed {
		t.Fatalf("window: %d commits, %d failed, %v from %v to %v", res.Commits, res.Failed, res.Elapsed, res.timedFrom, res.timedTo)
	}
	// Nor at its end: when it closes, other writers are in the middle of
	// commits (begun before it closed, at most one each).
	if n := len(res.Unanswered); n == 0 || n > 7 {
		t.Fatalf("%d commits under way at the window's end, of 7 other writers", n)
	}
	for _, a := range res.Unanswered {
		if a <= 0 {
			t.Fatalf("a commit under way at the window's end is %v old", a)
		}
	}
	if res.WritersCommitted < 1 || res.WritersCommitted > 8 {
		t.Fatalf("%d of 8 writers committed in the window", res.WritersCommitted)
	}
}

// TestWindowNotesLosers: when the window closes it counts the writers that
// had a commit acknowledged in it and the commits still under way then,
// with their ages — a failed commit is no writer's success, and a commit
// begun after the close is not under way in the window.
func TestWindowNotesLosers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	d := newDriver(Config{Writers: 4, CommitsPerWriter: 1})
	d.mu.win.opened, d.mu.win.ended = make(chan struct{}), make(chan struct{})
	d.mu.Lock()
	d.openWindowLocked(t0)
	d.mu.Unlock()
	d.began[0].Store(ms(1).UnixNano()) // under way across the close
	d.began[3].Store(ms(9).UnixNano()) // begun after the close
	d.countOutcome(1, ms(2), outcome{}, nil, time.Millisecond)
	d.countOutcome(2, ms(3), outcome{failed: true}, nil, 2*time.Millisecond)
	d.countOutcome(1, ms(4), outcome{}, nil, time.Millisecond)
	if d.windowClosed() {
		t.Fatal("the window closed after 3 of 4 outcomes")
	}
	d.countOutcome(1, ms(5), outcome{}, nil, time.Millisecond)
	if !d.windowClosed() {
		t.Fatal("the window is open after 4 of 4 outcomes")
	}
	res := d.mu.res
	if res.Commits != 3 || res.Failed != 1 || res.WritersCommitted != 1 {
		t.Fatalf("commits %d, failed %d, writers committed %d; want 3, 1, 1", res.Commits, res.Failed, res.WritersCommitted)
	}
	if !slices.Equal(res.Unanswered, []time.Duration{4 * time.Millisecond}) {
		t.Fatalf("unanswered %v; want writer 0's commit, 4ms old at the close", res.Unanswered)
	}
	d.countOutcome(0, ms(6), outcome{}, nil, 5*time.Millisecond)
	if res := d.mu.res; res.Commits != 3 || res.WritersCommitted != 1 {
		t.Fatalf("an outcome after the close counted: %+v", res)
	}
}
