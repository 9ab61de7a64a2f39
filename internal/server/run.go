package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/slate"
)

// Run binds the listeners, opens the store and serves clients until ctx
// ends, then closes everything cleanly: in-flight statements finish or are
// canceled, and the store is flushed and closed. It returns ErrFenced if a
// newer writer took the store.
//
// The listeners are bound before the store is touched, so a second server
// started by mistake on a busy port fails before it can disturb the store;
// until the catalog is loaded, clients are told the database system is
// starting up (57P03).
//
// A store that refuses writes never takes reads down. When a write fails
// (a full disk, a lost bucket permission), the sessions of the failed
// catalog are closed — nothing it holds that is not durable may be served —
// and the store is opened again read-only: clients read what is durable and
// every write is refused with 58030 naming the cause, while the server
// retries opening it for writing with a back-off (reset after a healthy
// period) and resumes writes by itself once the store accepts them.
func (s *Server) Run(ctx context.Context) error {
	wcfg, err := s.wireConfig()
	if err != nil {
		return err
	}
	if s.cfg.Replica {
		// libpq's target_session_attrs reads these at startup.
		wcfg.Parameters["in_hot_standby"] = "on"
		wcfg.Parameters["default_transaction_read_only"] = "on"
	}
	gcCtx, stopGC := context.WithCancel(context.Background())
	gcDone := make(chan struct{})
	go func() { runGCFloor(gcCtx, uint64(s.cfg.GCMinHeapMiB)<<20); close(gcDone) }()
	defer func() { stopGC(); <-gcDone }()
	if s.cfg.MetricsListen != "" {
		stop, err := s.serveMetrics(s.cfg.MetricsListen)
		if err != nil {
			return err
		}
		defer stop()
	}
	g := &gate{}
	wire, err := pgwire.New(wcfg, g)
	if err != nil {
		return err
	}
	listeners, err := s.listen()
	if err != nil {
		return err
	}
	s.addr = listeners[0].Addr()
	for _, l := range listeners {
		go func(l net.Listener) {
			if err := wire.Serve(l); err != nil && !errors.Is(err, pgwire.ErrServerClosed) {
				s.log.Error("serve", "listener", l.Addr().String(), "err", err)
			}
		}(l)
	}
	err = s.serve(ctx, wire, g)
	// Whatever ended serving, no listener outlives Run.
	wire.Close()
	return err
}

// listen binds the TCP listener and, if configured, the Unix socket on
// the same port.
func (s *Server) listen() ([]net.Listener, error) {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	out := []net.Listener{l}
	if s.cfg.UnixSocketDir != "" {
		_, p, _ := net.SplitHostPort(l.Addr().String())
		port, _ := strconv.Atoi(p)
		u, err := pgwire.ListenUnix(s.cfg.UnixSocketDir, port)
		if err != nil {
			l.Close()
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// healthyPeriod is how long a writer must serve without a failed write for
// the reopen back-off to start again from its shortest wait.
const healthyPeriod = time.Minute

// backoff is the wait before the attempt-th try to open the store for
// writing again: 100 ms doubling to 6.4 s.
func backoff(attempt int) time.Duration {
	return 100 * time.Millisecond << min(attempt, 6)
}

// attemptAfterServing is the reopen attempt count after a writer served
// for served and then failed a write: a writer that was healthy for
// healthyPeriod starts the back-off over, one that failed sooner goes on
// where it was (a store that fails every few seconds must not be hammered).
func attemptAfterServing(attempt int, served time.Duration) int {
	if served >= healthyPeriod {
		return 0
	}
	return attempt
}

// errStoreFailed wraps the cause of a failed store write.
type errStoreFailed struct{ cause error }

func (e *errStoreFailed) Error() string { return "a store write failed: " + e.cause.Error() }
func (e *errStoreFailed) Unwrap() error { return e.cause }

// serve opens the store and serves it until ctx ends or the server is
// fenced, going through serveDegraded whenever the store refuses a writer.
func (s *Server) serve(ctx context.Context, wire *pgwire.Server, g *gate) error {
	attempt := 0
	st, err := s.open(ctx, s.cfg.Replica)
	for {
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, slate.ErrFenced):
				return fmt.Errorf("%w: %v", ErrFenced, err)
			case s.replica() || !storeRefusesWrites(err):
				return err
			}
			st, err = s.serveDegraded(ctx, wire, g, err, &attempt)
			if err != nil || st == nil {
				return err
			}
		}
		opened := time.Now()
		res := s.serveStack(ctx, wire, g, st)
		var failed *errStoreFailed
		if !errors.As(res, &failed) {
			return res
		}
		attempt = attemptAfterServing(attempt, time.Since(opened))
		err = failed.cause
	}
}

// open opens the store: for writing, or read-only (a replica, or a writer
// whose store refuses writes).
func (s *Server) open(ctx context.Context, readOnly bool) (*Stack, error) {
	opts, release := s.stackOptions(readOnly)
	st, err := OpenStack(ctx, s.cfg.Store, opts)
	if release != nil {
		if err != nil {
			release()
			return nil, err
		}
		st.closers = append(st.closers, release)
	}
	return st, err
}

// stackOptions are the options of a stack opened for writing or read-only,
// and what releases what they hold beyond the stack (nil if nothing).
func (s *Server) stackOptions(readOnly bool) (StackOptions, func() error) {
	opts := StackOptions{
		Replica:  readOnly,
		Create:   s.cfg.CreateStore && !readOnly,
		Takeover: s.cfg.Takeover,
		Log:      s.log,
		Metrics:  s.metrics,
		Slate:    slate.Options{WALInFlight: s.cfg.WALInFlight, RewriteInterval: s.cfg.StoreRewriteInterval},
	}
	opts.Commit.Observe = s.metrics.observeCommit
	if !s.cfg.RowIDHold || readOnly {
		return opts, nil
	}
	opener := &rowids.URLOpener{Query: s.cfg.DataPathOptions}
	opts.Commit.Hold = &rowids.Checker{Open: opener}
	return opts, opener.Close
}

// storeRefusesWrites reports an error of opening a writer that a read-only
// open may get past: anything but a store that is not there, is corrupt,
// is misconfigured, or has another live writer.
func storeRefusesWrites(err error) bool {
	return !errors.Is(err, ErrUsage) && !errors.Is(err, slate.ErrCorrupt) && !errors.Is(err, slate.ErrNoDB) &&
		!errors.Is(err, ErrStoreHeld) && !errors.Is(err, ErrNoCreateIfAbsent) && !errors.Is(err, context.Canceled)
}

// serveStack serves st until ctx ends (nil), the server is fenced
// (ErrFenced) or a store write fails (*errStoreFailed).
func (s *Server) serveStack(ctx context.Context, wire *pgwire.Server, g *gate, st *Stack) error {
	s.stack = st
	s.metrics.setStack(st)
	ex := s.newExecutor(st, wire)
	ex.SetStandby(s.replica())
	if s.replica() {
		ex.Promote = s.requestPromotion
	}
	gd := newGuard(ex, s.metrics, s.log, s.cfg.LogMinDuration)
	var beat *beater
	if !s.replica() {
		b, err := startHeartbeat(ctx, st.Store, s.addr.String())
		if err != nil {
			st.Close(context.Background())
			return &errStoreFailed{cause: err}
		}
		beat = b
	}
	g.set(gd)
	s.announce(st, "")

	stopFollowing := func() {}
	startFollowing := func() {
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			st.follow(fctx, s.cfg.ReplicaPoll, s.metrics, s.log.Warn)
		}()
		stopFollowing = func() { stop(); <-done; stopFollowing = func() {} }
	}
	if s.replica() {
		s.metrics.ReplicaSeq.Set(float64(st.Seq))
		startFollowing()
	}
	defer func() { stopFollowing() }()

	// Watch for the end: a signal, a failed store write, a fence. The
	// store notices a fence at its next write or, idle, at its next fence
	// poll (slate.Options.FencePollInterval, 1s by default).
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var result error
	for result == nil {
		select {
		case <-ctx.Done():
			result = ctx.Err()
		case req := <-s.promotions:
			if !s.replica() {
				req.done <- nil // promoted by an earlier request
				continue
			}
			stopFollowing()
			w, err := s.promote(ctx, st)
			if err != nil {
				startFollowing()
				req.done <- err
				continue
			}
			st = w
			s.stack = w
			s.metrics.setStack(w)
			wire.SetParameter("in_hot_standby", "off")
			wire.SetParameter("default_transaction_read_only", "off")
			ex.SetStandby(false)
			req.done <- nil
			b, err := startHeartbeat(ctx, st.Store, s.addr.String())
			if err != nil {
				s.log.Error("a store write failed; closing the sessions and serving reads while the store is reopened", "err", err)
				result = &errStoreFailed{cause: err}
				continue
			}
			beat = b
		case <-tick.C:
			if st.Pipe == nil {
				continue
			}
			ferr := st.Pipe.Failed()
			if kerr := st.KV.Err(); ferr == nil && errors.Is(kerr, slate.ErrFenced) {
				ferr = kerr
			}
			switch {
			case ferr == nil:
			case errors.Is(ferr, slate.ErrFenced):
				gd.fence(ferr)
				s.log.Error("this server was fenced by a newer writer; it stops taking writes and exits", "err", ferr)
				result = fmt.Errorf("%w: %v", ErrFenced, ferr)
			default:
				s.log.Error("a store write failed; closing the sessions and serving reads while the store is reopened", "err", ferr)
				result = &errStoreFailed{cause: ferr}
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if beat != nil {
		// Only a clean stop marks the heartbeat stopped: a fenced or
		// failed writer's simply beats no more.
		defer beat.close(errors.Is(result, context.Canceled))
	}
	switch {
	case errors.Is(result, ErrFenced):
		// The store refuses every write from now on and the guard refuses
		// every new statement, naming the fencing. Busy connections get a
		// moment to send the answers of statements already running (a
		// commit that became durable before the fence is acknowledged);
		// then everything is closed.
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		wire.ShutdownWithMessage(fctx, "terminating connection: this moraine was fenced by a newer writer on the same store and accepts no more writes")
		fcancel()
	case errors.As(result, new(*errStoreFailed)):
		// Nothing more may be acknowledged from this catalog: its sessions
		// end at once; the listeners stay.
		g.set(nil)
		wire.CloseConnections("terminating connection: the store refused a write; moraine reopens it and serves reads meanwhile")
	default:
		g.set(nil)
		if err := wire.Shutdown(sctx); err != nil {
			s.log.Warn("shutdown", "err", err)
		}
	}
	if err := st.Close(sctx); err != nil && !errors.Is(result, ErrFenced) && !errors.As(result, new(*errStoreFailed)) {
		s.log.Warn("closing the store", "err", err)
	}
	if errors.Is(result, context.Canceled) {
		return nil
	}
	return result
}

// serveDegraded serves reads from the store opened read-only while it
// refuses a writer, and retries the writer with a back-off. It returns the
// writer's stack once it opens, nil when ctx ends first, or the error that
// ends the server (a fence, a store that cannot even be read on a first
// start).
func (s *Server) serveDegraded(ctx context.Context, wire *pgwire.Server, g *gate, cause error, attempt *int) (*Stack, error) {
	var why atomic.Pointer[error]
	why.Store(&cause)
	var rst *Stack
	s.metrics.refusing.Store(true)
	defer s.metrics.refusing.Store(false)
	defer func() {
		if rst != nil {
			g.set(nil)
			wire.CloseConnections("terminating connection: the store accepts writes again; reconnect")
			rst.Close(context.Background())
		}
	}()
	for {
		if rst == nil {
			r, err := s.open(ctx, true)
			switch {
			case err == nil:
				rst = r
				s.stack = r
				s.metrics.setStack(r)
				ex := s.newExecutor(r, wire)
				ex.WriteRefusal = func() error { return writeRefused(*why.Load()) }
				g.set(newGuard(ex, s.metrics, s.log, s.cfg.LogMinDuration))
				s.announce(r, (*why.Load()).Error())
			case !s.served.Load():
				// Never served: this is a start that fails, with the
				// writer's own error.
				return nil, cause
			default:
				s.log.Error("the store cannot be read either; retrying", "err", err)
			}
		}
		s.metrics.Reopens.Inc()
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(backoff(*attempt)):
		}
		*attempt++
		st, err := s.open(ctx, false)
		switch {
		case err == nil:
			s.log.Info("the store accepts writes again; serving writes", "attempts", *attempt)
			return st, nil
		case ctx.Err() != nil:
			return nil, nil
		case errors.Is(err, slate.ErrFenced):
			return nil, fmt.Errorf("%w: %v", ErrFenced, err)
		case !storeRefusesWrites(err):
			return nil, err
		}
		why.Store(&err)
		s.log.Warn("the store still refuses writes; serving reads", "err", err, "attempt", *attempt, "retry_in", backoff(*attempt))
	}
}

// writeRefused is the error every write gets while the store refuses
// writes: PostgreSQL's 58030 (io_error), naming the cause.
func writeRefused(cause error) error {
	return &pgwire.Error{Code: pgcode.IOError, Message: "could not write to the store: " + cause.Error(),
		Hint: "moraine serves reads of what is durable and retries the store; writes resume by themselves once it accepts them."}
}

// ReadyMessage is what serve logs, with its address as "listen", once it
// accepts connections; a parent process waits for it.
const ReadyMessage = "moraine is ready"

// announce logs that st is served (and, the first time, that moraine is
// ready), with the reason writes are refused if they are.
func (s *Server) announce(st *Stack, refusing string) {
	first := !s.served.Swap(true)
	if refusing != "" {
		s.log.Error("serving reads only: the store refuses writes", "listen", s.addr.String(), "err", refusing)
	} else if first {
		s.log.Info(ReadyMessage, "listen", s.addr.String(), "store", redactURL(s.cfg.Store), "replica", s.cfg.Replica)
	} else {
		s.log.Info("serving the reopened store", "seq", st.Seq)
	}
	if first {
		close(s.ready)
	}
}

// gate is the executor the wire server serves for the life of the process:
// it hands new sessions to the current catalog's guard, and while there is
// none (the catalog is loading, or the store is being reopened) answers
// 57P03 as PostgreSQL does while it starts up.
type gate struct{ cur atomic.Pointer[guard] }

func (g *gate) set(gd *guard) { g.cur.Store(gd) }

func (g *gate) NewSession(ctx context.Context, info pgwire.StartupInfo) (pgwire.Session, error) {
	if gd := g.cur.Load(); gd != nil {
		return gd.NewSession(ctx, info)
	}
	return nil, &pgwire.Error{Severity: pgwire.SeverityFatal, Code: pgcode.CannotConnectNow, Message: "the database system is starting up"}
}
