package server

import (
	"context"
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/slate"
)

// Promotion. A replica holds the whole catalog resident and current to
// within a poll, so making it the writer costs what the writer did since
// the last poll, not a catalog load: the replica opens the store for
// writing — the new writer epoch fences whichever writer is still on it,
// and from then on nothing else can commit — reads the commits the old
// writer made up to the fence and applies them as it follows any commit,
// primes a commit pipeline from the resident catalog, and hands the
// catalog to it. Sessions stay connected: their next transactions may
// write, as after PostgreSQL's pg_promote().

// Promote makes st, a replica's stack, the writer of its store in place
// and returns the writer's stack, which shares st's object store and
// catalog; st's reader is closed. The caller must have stopped following.
// On error st is unchanged and may follow again; if the store was opened
// for writing before the error, the previous writer stays fenced.
func (st *Stack) Promote(ctx context.Context, opts StackOptions, m *Metrics) (*Stack, error) {
	log, so := opts.logAndSlate()
	if so.WALInFlight == 0 {
		so.WALInFlight = walInFlightFor(st.Store)
	}
	start := time.Now()
	kv, err := slate.Open(ctx, st.Store, so)
	if err != nil {
		return nil, fmt.Errorf("promote: open the store for writing: %w", err)
	}
	opened := time.Now()
	fail := func(err error) (*Stack, error) {
		kv.Close(context.Background())
		return nil, fmt.Errorf("promote: %w", err)
	}
	// The fence is written: the WAL the reader lists now ends with the
	// old writer's last commit.
	if err := st.KV.Refresh(ctx); err != nil {
		return fail(fmt.Errorf("read the last commits: %w", err))
	}
	if err := st.catchUp(ctx, m, log.Warn); err != nil {
		return fail(fmt.Errorf("apply the last commits: %w", err))
	}
	seq := kv.Stats().LastSeq
	if got := st.followed.Load(); got != seq {
		return fail(fmt.Errorf("the catalog reflects store sequence %d, the store holds %d", got, seq))
	}
	caughtUp := time.Now()
	// The pipeline's heads are read through the replica's reader, which
	// holds the same state at the same sequence with its table caches
	// warm from following: the new writer's are cold, and a point read
	// there loads the index of every sorted table that may hold the key
	// (seconds on a large store).
	snap, err := st.KV.Snapshot()
	if err != nil {
		return fail(err)
	}
	defer snap.Close()
	if snap.Seq() != seq {
		return fail(fmt.Errorf("the replica's reader is at store sequence %d, the store at %d", snap.Seq(), seq))
	}
	co := opts.Commit
	co.CheckNew = checkNewCatalog
	pipe := commit.New(kv, co)
	if err := pipe.PrimeLoaded(ctx, st.Cat, snap); err != nil {
		return fail(err)
	}
	st.Cat.Promote(pipe)
	log.Info("promote: the catalog is the writer's", "open_and_fence", opened.Sub(start).Round(time.Millisecond),
		"last_commits", caughtUp.Sub(opened).Round(time.Millisecond), "prime", time.Since(caughtUp).Round(time.Millisecond))
	snap.Close() // before the reader it reads
	if err := st.KV.Close(ctx); err != nil {
		log.Warn("promote: closing the replica's reader", "err", err)
	}
	w := &Stack{Store: st.Store, KV: kv, Cat: st.Cat, Pipe: pipe, Seq: seq, closers: st.closers}
	w.followed.Store(seq)
	return w, nil
}

// promotion is a request to promote this replica (pg_promote()); done
// receives its outcome.
type promotion struct{ done chan error }

// requestPromotion asks the serving loop to promote this replica and
// waits for the outcome or ctx. A promotion under way is not abandoned
// when the requester stops waiting.
func (s *Server) requestPromotion(ctx context.Context) error {
	req := promotion{done: make(chan error, 1)}
	select {
	case s.promotions <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replica reports whether this server serves as a replica: configured so
// and not promoted.
func (s *Server) replica() bool { return s.cfg.Replica && !s.promoted.Load() }

// promote runs a promotion for the serving loop: st is the replica's
// stack, its following already stopped. It returns the writer's stack.
func (s *Server) promote(ctx context.Context, st *Stack) (*Stack, error) {
	start := time.Now()
	opts, release := s.stackOptions(false)
	w, err := st.Promote(ctx, opts, s.metrics)
	if err != nil {
		if release != nil {
			release()
		}
		s.log.Error("promotion failed; still a replica", "err", err)
		return nil, err
	}
	if release != nil {
		w.closers = append(w.closers, release)
	}
	s.promoted.Store(true)
	s.metrics.Promotions.Inc()
	s.log.Info("promoted: this server is the writer of its store", "store_seq", w.Seq, "elapsed", time.Since(start).Round(time.Millisecond))
	return w, nil
}
