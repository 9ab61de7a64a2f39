package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Server is a running moraine.
type Server struct {
	cfg     *Config
	log     *slog.Logger
	metrics *Metrics

	// ready is closed once the first stack is serving.
	ready chan struct{}
	stack *Stack
	addr  net.Addr
}

// ErrFenced is returned by Run when a newer writer opened the store: this
// server stopped taking writes at once and must exit.
var ErrFenced = errors.New("fenced by a newer writer on the same store")

// New prepares a server; Run starts it.
func New(cfg *Config, log *slog.Logger) *Server {
	return &Server{cfg: cfg, log: log, ready: make(chan struct{}), metrics: NewMetrics()}
}

// Ready is closed when the server accepts connections.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the TCP address the server listens on (valid after Ready).
func (s *Server) Addr() net.Addr { return s.addr }

// Stack returns the stack currently served (valid after Ready).
func (s *Server) Stack() *Stack { return s.stack }

// Metrics returns the server's metrics registry.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Run opens the store, serves clients until ctx ends, and closes everything
// cleanly: in-flight statements finish or are canceled, then the store is
// flushed and closed. If a store write fails, Run closes the clients, reopens
// the store and serves the catalog as the store has it: it never keeps
// serving state that is not durable. If the server is fenced it returns
// ErrFenced.
func (s *Server) Run(ctx context.Context) error {
	wcfg, err := s.wireConfig()
	if err != nil {
		return err
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
	for attempt := 0; ; attempt++ {
		err := s.serveOnce(ctx, wcfg)
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrFenced):
			return err
		case errors.Is(err, errReopen):
			s.log.Warn("reopening the store after a failed write", "attempt", attempt+1)
			s.metrics.Reopens.Inc()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff(attempt)):
			}
			continue
		default:
			return err
		}
	}
}

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 6)
	return d
}

var errReopen = errors.New("store failed: reopen")

func (s *Server) serveOnce(ctx context.Context, wcfg pgwire.Config) error {
	opts := StackOptions{
		Replica: s.cfg.Replica,
		Log:     s.log,
		Metrics: s.metrics,
		// A replica's follow loop refreshes the reader itself, right
		// before it reloads the catalog (one poll, not two in series).
		Slate: slate.Options{WALInFlight: s.cfg.WALInFlight},
	}
	opts.Commit.Observe = s.metrics.observeCommit
	if s.cfg.RowIDHold {
		opener := &rowids.URLOpener{Query: s.cfg.DataPathOptions}
		defer opener.Close()
		opts.Commit.Hold = &rowids.Checker{Open: opener}
	}
	st, err := OpenStack(ctx, s.cfg.Store, opts)
	if err != nil {
		if errors.Is(err, slate.ErrFenced) {
			return fmt.Errorf("%w: %v", ErrFenced, err)
		}
		return err
	}
	s.stack = st
	s.metrics.setStack(st)
	exec := s.newExecutor(st)
	g := newGuard(exec, s.cfg.Replica, s.metrics)
	wire, err := pgwire.New(wcfg, g)
	if err != nil {
		st.Close(context.Background())
		return err
	}
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		st.Close(context.Background())
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.addr = l.Addr()
	listeners := []net.Listener{l}
	if s.cfg.UnixSocketDir != "" {
		_, p, _ := net.SplitHostPort(l.Addr().String())
		port, _ := strconv.Atoi(p)
		u, err := pgwire.ListenUnix(s.cfg.UnixSocketDir, port)
		if err != nil {
			l.Close()
			st.Close(context.Background())
			return err
		}
		listeners = append(listeners, u)
	}
	for _, l := range listeners {
		go func(l net.Listener) {
			if err := wire.Serve(l); err != nil && !errors.Is(err, pgwire.ErrServerClosed) {
				s.log.Error("serve", "listener", l.Addr().String(), "err", err)
			}
		}(l)
	}
	s.log.Info("moraine is ready", "listen", l.Addr().String(), "store", redactURL(s.cfg.Store), "replica", s.cfg.Replica)
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}

	if s.cfg.Replica {
		s.metrics.ReplicaSeq.Set(float64(st.Seq))
		fctx, stopFollow := context.WithCancel(ctx)
		followDone := make(chan struct{})
		go func() {
			defer close(followDone)
			st.follow(fctx, s.cfg.ReplicaPoll, s.metrics, s.log.Warn)
		}()
		defer func() { stopFollow(); <-followDone }()
	}

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
		case <-tick.C:
			if st.Pipe == nil {
				continue
			}
			ferr := st.Pipe.Failed()
			if kerr := st.KV.Err(); ferr == nil && errors.Is(kerr, slate.ErrFenced) {
				ferr = kerr
			}
			if ferr != nil {
				if errors.Is(ferr, slate.ErrFenced) {
					g.fence(ferr)
					s.log.Error("this server was fenced by a newer writer; it stops taking writes and exits", "err", ferr)
					result = fmt.Errorf("%w: %v", ErrFenced, ferr)
				} else {
					s.log.Error("a store write failed; closing clients and reopening the store", "err", ferr)
					result = errReopen
				}
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
	case errors.Is(result, errReopen):
		// Nothing more may be acknowledged from this stack: close at once.
		wire.Close()
	default:
		if err := wire.Shutdown(sctx); err != nil {
			s.log.Warn("shutdown", "err", err)
		}
	}
	if err := st.Close(sctx); err != nil && !errors.Is(result, ErrFenced) && !errors.Is(result, errReopen) {
		s.log.Warn("closing the store", "err", err)
	}
	if errors.Is(result, context.Canceled) {
		return nil
	}
	return result
}

func (s *Server) wireConfig() (pgwire.Config, error) {
	wc := pgwire.Config{
		MaxConnections:        s.cfg.MaxConnections,
		IdleTimeout:           s.cfg.IdleTimeout,
		StatementTimeout:      s.cfg.StatementTimeout,
		AuthTimeout:           s.cfg.AuthTimeout,
		AuthFailuresPerMinute: s.cfg.AuthFailuresPerMinute,
		RequireTLS:            s.cfg.SSLRequire,
		ClientCheckInterval:   s.cfg.ClientCheckInterval,
		TrustUnixSocket:       true,
		Logger:                s.log,
		TrustedNets:           []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		// Debian's PostgreSQL reports its zone as Etc/UTC; clients compare.
		Parameters: map[string]string{"TimeZone": "Etc/UTC"},
		// The SQL layer serves PostgreSQL 15.18's own pg_catalog rows and
		// answers version() as 15.18; the startup parameter agrees.
		ServerVersion: "15.18",
	}
	if s.cfg.UsersFile != "" {
		users, err := ReadUsers(s.cfg.UsersFile)
		if err != nil {
			return wc, err
		}
		wc.Users = users
		// Unknown users get fake SCRAM salts keyed by the users file's
		// secrets: the same after a restart (and on a standby with the
		// same file), so they cannot be told from real users by watching
		// salts across restarts.
		key, err := mockAuthKey(s.cfg.UsersFile)
		if err != nil {
			return wc, err
		}
		wc.MockAuthKey = key
		// With users configured, every TCP client authenticates, loopback
		// included; the Unix socket stays trusted (peer-local).
		wc.TrustedNets = nil
	}
	if s.cfg.SSLRequire && s.cfg.TLSCert == "" {
		return wc, fmt.Errorf("%w: ssl-require needs tls-cert and tls-key", ErrUsage)
	}
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return wc, fmt.Errorf("%w: tls-cert/tls-key: %v", ErrUsage, err)
		}
		wc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return wc, nil
}

// ReadUsers reads a users file: one `name:verifier` per line, where the
// verifier is a SCRAM-SHA-256 verifier (never a plaintext password).
func ReadUsers(path string) ([]pgwire.User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: users-file: %v", ErrUsage, err)
	}
	defer f.Close()
	var out []pgwire.User
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, ":")
		if !ok || name == "" || !strings.HasPrefix(secret, "SCRAM-SHA-256$") {
			return nil, fmt.Errorf("%w: users-file %s:%d: expected name:SCRAM-SHA-256$… (use `moraine user add`)", ErrUsage, path, n)
		}
		out = append(out, pgwire.User{Name: name, Method: pgwire.AuthSCRAM, Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: users-file: %v", ErrUsage, err)
	}
	return out, nil
}

// redactURL drops credentials and query parameters that may carry secrets.
func redactURL(u string) string {
	if i := strings.Index(u, "?"); i >= 0 {
		u = u[:i] + "?…"
	}
	if at := strings.Index(u, "@"); at >= 0 {
		if p := strings.Index(u, "://"); p >= 0 && p < at {
			u = u[:p+3] + "…" + u[at:]
		}
	}
	return u
}

// NewExecutor is the SQL executor moraine serve runs over a stack, with
// the configuration's settings (nil: the defaults). It is the one place an
// executor is made: the server, the tools and the tests above it use it.
func NewExecutor(st *Stack, cfg *Config) *sql.Executor {
	ex := sql.New(memcat.On(st.Cat))
	if cfg != nil {
		ex.SetCopyCacheBytes(cfg.CopyCacheMiB << 20)
		ex.StatementMem = int64(cfg.StatementMemMiB) << 20
	}
	return ex
}

// newExecutor makes the stack's executor and shows its COPY cache in the
// metrics.
func (s *Server) newExecutor(st *Stack) *sql.Executor {
	ex := NewExecutor(st, s.cfg)
	s.metrics.setCopyCache(ex)
	return ex
}

// mockAuthKey derives the key of unknown users' fake SCRAM salts from the
// users file: a hash of its verifiers, which nobody without the file can
// compute.
func mockAuthKey(usersFile string) ([]byte, error) {
	b, err := os.ReadFile(usersFile)
	if err != nil {
		return nil, fmt.Errorf("%w: users-file: %v", ErrUsage, err)
	}
	sum := sha256.Sum256(append([]byte("moraine mock SCRAM salt key\x00"), b...))
	return sum[:], nil
}
