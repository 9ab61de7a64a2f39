package workload

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// Landed is one acknowledged commit.
type Landed struct {
	Tag      string
	Snapshot int64
	Kind     string // "setup", "insert" or "merge"
	Table    int64
	File     int64   // the data file it registered (insert, merge)
	Path     string  // that file's path: under DataDir when set, else relative to its table
	Sources  []int64 // merge: the files it consumed
	Begin    int64   // begin_snapshot written for File
	RowIDs   []Span  // row ids File holds
	Records  int64
	Attempts int
	// Writer and Nth name a writer's commit: its writer (from 0) and its
	// place in that writer's sequence (from 0); Writer is -1 for the
	// setup and the compactor's commits.
	Writer, Nth int
	// Began is when a writer's commit took its connection from the pool
	// for its first attempt; Answered is when the answer to the batch that
	// landed arrived.
	Began, Answered time.Time
	// Phases of a writer's commit landed at its first attempt (zero
	// otherwise): Result.ChainPhases breaks the chain link down with them.
	Phases Phases
}

// Phases time a writer's commit: when the pool took the connection, and
// when the latest snapshot, the statistics and the data paths had been
// read. The batch's answer is Landed.Answered.
type Phases struct {
	Began, Pinned, StatsRead, PathsRead time.Time
}

// Result is what a run measured and acknowledged.
type Result struct {
	Config    Config
	Elapsed   time.Duration   // wall time of the timed window (Run)
	Latencies []time.Duration // per writer commit acknowledged in the window, the pool's take to COMMIT ack, retries included
	Commits   int             // writer commits acknowledged in the window
	Warmup    int             // writer commits acknowledged before it (untimed)
	Failed    int             // writer commits in the window that hit a true conflict or exhausted retries
	Retries   int             // retries (attempts beyond the first) of the writer commits that ended in the window
	Conflicts int             // true conflicts among them
	// WritersCommitted is how many writers had a commit acknowledged in
	// the window. Unanswered holds, for every writer commit begun before
	// the window closed and not yet ended then, its age at the close —
	// its first pool take to the window's end, back-off sleeps included.
	// Latencies only count commits that ended in the window; a writer
	// that keeps losing the race sleeps in DuckLake's back-off across it
	// (PostgreSQL: ten retries sleep about eight seconds in all), and
	// these two say so.
	WritersCommitted int
	Unanswered       []time.Duration
	// CPU is what the timed window cost in CPU time, when CPUMeasured.
	CPU         CPUUse
	CPUMeasured bool

	Merges         int // acknowledged compactor commits
	MergeRetries   int
	MergeConflicts int
	MergeFailed    int

	landed    []Landed
	inDoubt   []Landed
	tableIDs  []int64
	timedFrom time.Time // the timed window's start
	timedTo   time.Time // and its end
}

// CommitsPerSec is acknowledged writer commits per second of wall time.
func (r *Result) CommitsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of commit latency,
// nearest-rank.
func (r *Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.Latencies...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// ChainLinks returns, for every commit of the timed window whose snapshot's
// predecessor also landed in it, the time from the predecessor's batch
// answer to its own, sorted. DuckLake's commits form a chain (each takes
// snapshot base+1 from the head it read), so a link is what one commit
// adds to the chain: the next writer's reads and batch after the
// previous batch, plus whatever it waited for (a lock, a back-off).
func (r *Result) ChainLinks() []time.Duration {
	at := r.answeredBySnapshot()
	var out []time.Duration
	for s, l := range at {
		if prev, ok := at[s-1]; ok {
			out = append(out, l.Answered.Sub(prev.Answered))
		}
	}
	slices.Sort(out)
	return out
}

// answeredBySnapshot indexes by snapshot the commits whose batch was
// answered in the timed window: the ends of its chain links.
func (r *Result) answeredBySnapshot() map[int64]Landed {
	at := make(map[int64]Landed, len(r.landed))
	for _, l := range r.landed {
		if !l.Answered.IsZero() && !l.Answered.Before(r.timedFrom) && !l.Answered.After(r.timedTo) {
			at[l.Snapshot] = l
		}
	}
	return at
}

// ChainPhases breaks the chain links of the timed window down (see
// ChainLinks), for every link whose commit landed at its first attempt: from
// the predecessor's batch answer to the commit's latest-snapshot answer
// (Wait; negative when the snapshot was answered first, as when the
// predecessor's seal woke it while its own answer was on the way), its
// statistics reads, its path reads, and its batch. A link is Late when its
// writer took its connection from the pool only after the predecessor's
// batch was answered. On moraine, whose writers queue for the snapshot
// behind the commit under way, a late link means nobody was queued: every
// writer was still in the tail of its last commit (mostly waiting for it to
// be durable). On PostgreSQL every link is late by construction: a writer
// that began earlier read the old snapshot and fails on its key.
func (r *Result) ChainPhases() []LinkPhases {
	at := r.answeredBySnapshot()
	var out []LinkPhases
	for s, l := range at {
		prev, ok := at[s-1]
		ph := l.Phases
		if !ok || ph.Began.IsZero() {
			continue
		}
		out = append(out, LinkPhases{
			Snapshot: s,
			Wait:     ph.Pinned.Sub(prev.Answered),
			Stats:    ph.StatsRead.Sub(ph.Pinned),
			Paths:    ph.PathsRead.Sub(ph.StatsRead),
			Batch:    l.Answered.Sub(ph.PathsRead),
			Link:     l.Answered.Sub(prev.Answered),
			Late:     ph.Began.After(prev.Answered),
		})
	}
	slices.SortFunc(out, func(a, b LinkPhases) int { return cmp.Compare(a.Snapshot, b.Snapshot) })
	return out
}

// WriterCycles follows each writer from one commit to its next, for every
// commit answered in the timed window that landed at its first attempt
// and whose writer's previous commit landed too: Tail, from the previous
// commit's batch answer until the writer began this one (the COMMIT's wait
// for durability and the pool's round trips), and ToSnapshot, from then
// until its latest-snapshot answer (the pool's take, BEGIN, the prepare,
// and the wait for the commit under way). With the link's own reads and
// batch (ChainPhases) they make up a writer's whole cycle: on moraine,
// whose writers queue behind the chain, they tell a rate bound by the
// chain (long ToSnapshot) from one bound by the writers' tails (late
// links).
func (r *Result) WriterCycles() []WriterCycle {
	type key struct{ writer, nth int }
	answered := make(map[key]time.Time, len(r.landed))
	for _, l := range r.landed {
		if l.Writer >= 0 {
			answered[key{l.Writer, l.Nth}] = l.Answered
		}
	}
	var out []WriterCycle
	for _, l := range r.landed {
		ph := l.Phases
		if l.Writer < 0 || ph.Began.IsZero() || l.Answered.Before(r.timedFrom) || l.Answered.After(r.timedTo) {
			continue
		}
		prev, ok := answered[key{l.Writer, l.Nth - 1}]
		if !ok {
			continue
		}
		out = append(out, WriterCycle{Writer: l.Writer, Nth: l.Nth,
			Tail: ph.Began.Sub(prev), ToSnapshot: ph.Pinned.Sub(ph.Began)})
	}
	slices.SortFunc(out, func(a, b WriterCycle) int {
		if c := cmp.Compare(a.Writer, b.Writer); c != 0 {
			return c
		}
		return cmp.Compare(a.Nth, b.Nth)
	})
	return out
}

// WriterCycle is one step of a writer's cycle (Result.WriterCycles).
type WriterCycle struct {
	Writer, Nth      int
	Tail, ToSnapshot time.Duration
}

// LinkPhases is one chain link broken down (Result.ChainPhases).
type LinkPhases struct {
	Snapshot                        int64
	Wait, Stats, Paths, Batch, Link time.Duration
	Late                            bool
}

// Landed returns the acknowledged commits in acknowledgement order.
func (r *Result) Landed() []Landed { return append([]Landed(nil), r.landed...) }

// InDoubt returns the commits whose COMMIT got no answer — the connection
// failed during it, because the server went away (a fenced or killed
// writer) or because the run stopped and closed it — or was answered with
// a shutdown error (57P: a fenced server): each may have landed or not,
// and Verify accepts either, whole.
func (r *Result) InDoubt() []Landed { return append([]Landed(nil), r.inDoubt...) }
