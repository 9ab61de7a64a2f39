package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// Config configures a Server. The zero value serves trust-only clients
// with PostgreSQL-like defaults.
type Config struct {
	// TLS enables SSLRequest → TLS. Nil answers SSLRequest with 'N'.
	TLS *tls.Config
	// Users are the logins. A user not listed cannot log in except from a
	// trusted address.
	Users []User
	// TrustedNets are client address ranges that log in without a
	// password, whatever the user's method (pg_hba "trust" lines).
	TrustedNets []netip.Prefix
	// TrustUnixSocket trusts every Unix-socket connection.
	TrustUnixSocket bool
	// MaxConnections bounds concurrent client connections (default 100);
	// beyond it clients get 53300 "sorry, too many clients already".
	MaxConnections int
	// MaxMessageSize bounds one frontend message body (default 64 MiB);
	// a larger one closes the connection with 54000.
	MaxMessageSize int
	// IdleTimeout closes a connection idle (outside a statement) for longer
	// (57P05). Zero disables it.
	IdleTimeout time.Duration
	// StatementTimeout cancels a statement running longer (57014). Zero
	// disables it.
	StatementTimeout time.Duration
	// WriteTimeout closes a connection whose client has not taken the
	// server's output for this long (a stalled reader during a big COPY
	// OUT, say). Zero disables it.
	WriteTimeout time.Duration
	// AuthTimeout bounds the startup and authentication phase (default
	// 60 s, PostgreSQL's authentication_timeout).
	AuthTimeout time.Duration
	// MockAuthKey keys the fake SCRAM salts of unknown users (mockSCRAM):
	// the same key gives the same salts after a restart. Empty: a random
	// key per process.
	MockAuthKey []byte
	// AuthFailuresPerMinute bounds the failed authentications one client
	// address may make in a minute; past it, its connections are refused
	// before authentication until the minute has passed. Zero: no bound.
	AuthFailuresPerMinute int
	// RequireTLS refuses TCP clients that did not negotiate TLS (Unix
	// sockets are exempt), as hostssl-only pg_hba lines do.
	RequireTLS bool
	// LogConnections logs each connection's arrival, its authorization and
	// its end (PostgreSQL's log_connections and log_disconnections).
	LogConnections bool
	// ClientCheckInterval is how often a running statement looks whether
	// its client closed the connection, and is abandoned if so
	// (PostgreSQL's client_connection_check_interval). Zero disables it.
	ClientCheckInterval time.Duration
	// ServerVersion is reported as the server_version parameter (default
	// "16.4").
	ServerVersion string
	// Parameters are extra ParameterStatus values sent at startup (they
	// override the defaults of the same name).
	Parameters map[string]string
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("pgwire: server closed")

// Server accepts PostgreSQL wire-protocol connections and hands their
// statements to an Executor.
type Server struct {
	cfg   Config
	exec  Executor
	users map[string]User
	log   *slog.Logger

	active atomic.Int64 // connections being served (for MaxConnections)
	// params are Config.Parameters as SetParameter last left them.
	params atomic.Pointer[map[string]string]
	// shutdownMsg, when set, replaces the text of the FATAL that a shutdown
	// sends to the connections it closes.
	shutdownMsg atomic.Pointer[string]
	panics      atomic.Int64 // connection goroutines that panicked (a pgwire bug)

	authFails *authLimiter // failed authentications per client address
	starting  atomic.Int64 // connections still in their startup phase

	mockOnce sync.Once // mockKey salts the SCRAM exchange of unknown users
	mockKey  []byte
	wg       sync.WaitGroup

	closing atomic.Bool // mirrors mu.closing for lock-free reads per message

	mu struct {
		sync.Mutex
		closing   bool
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		byPID     map[uint32]*conn
		nextPID   uint32
	}
}

// New returns a server for exec. It validates cfg.
func New(cfg Config, exec Executor) (*Server, error) {
	if exec == nil {
		return nil, errors.New("pgwire: nil executor")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 100
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = 64 << 20
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = 60 * time.Second
	}
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = "16.4"
	}
	s := &Server{cfg: cfg, exec: exec, users: map[string]User{}, log: cfg.Logger, authFails: newAuthLimiter(cfg.AuthFailuresPerMinute)}
	params := maps.Clone(cfg.Parameters)
	s.params.Store(&params)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, u := range cfg.Users {
		if u.Name == "" {
			return nil, errors.New("pgwire: user with empty name")
		}
		if _, dup := s.users[u.Name]; dup {
			return nil, fmt.Errorf("pgwire: user %q configured twice", u.Name)
		}
		if err := validateUser(u); err != nil {
			return nil, err
		}
		s.users[u.Name] = u
	}
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*conn]struct{}{}
	s.mu.byPID = map[uint32]*conn{}
	s.mu.nextPID = 1000
	return s, nil
}

// SetParameter changes a ParameterStatus value that connections starting
// from now on are sent (a promoted standby's in_hot_standby, which libpq's
// target_session_attrs reads).
func (s *Server) SetParameter(name, value string) {
	next := maps.Clone(*s.params.Load())
	if next == nil {
		next = map[string]string{}
	}
	next[name] = value
	s.params.Store(&next)
}

// parameters are the extra ParameterStatus values of a starting connection.
func (s *Server) parameters() map[string]string { return *s.params.Load() }

// ListenUnix listens on a Unix socket named like PostgreSQL's,
// <dir>/.s.PGSQL.<port>, so that `psql -h <dir> -p <port>` finds it. A stale
// socket file left by a dead server is removed first.
func ListenUnix(dir string, port int) (net.Listener, error) {
	path := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("pgwire: socket %s is in use", path)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("pgwire: listen %s: %w", path, err)
	}
	return l, nil
}

// Serve accepts connections on l until Shutdown or Close, serving each on
// its own goroutine. It returns ErrServerClosed after a shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("pgwire: accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("pgwire: accept: %w", err)
		}
		backoff = 0
		c, ok := s.admit(nc)
		if !ok {
			nc.Close()
			return ErrServerClosed
		}
		go s.serveConn(c)
	}
}

// admit makes a just-accepted connection one the server tracks and waits
// for, or refuses it (false) once the server is closing. It does both under
// s.mu, where Close and Shutdown set closing before they collect the
// connections to close and wait for their goroutines: each connection is
// either admitted before that, and then closed and waited for, or refused.
// Counting the goroutine outside the lock would let it start after Close
// returned, serving a session on what Close tore down.
func (s *Server) admit(nc net.Conn) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		return nil, false
	}
	c := &conn{srv: s, raw: nc}
	c.mu.netConn = nc
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	return c, true
}

func (s *Server) isClosing() bool { return s.closing.Load() }

// Shutdown stops accepting, closes idle connections at once (57P01) and
// lets busy ones finish their current request; when ctx ends first, running
// statements are canceled and every connection is closed. It returns when
// all connection goroutines have exited, or ctx's error if that took
// longer than ctx allowed.
// ShutdownWithMessage is Shutdown, except that the FATAL 57P01 sent to
// connections it closes carries message instead of PostgreSQL's "terminating
// connection due to administrator command" — so that clients learn why (a
// fenced writer names the fencing).
func (s *Server) ShutdownWithMessage(ctx context.Context, message string) error {
	s.shutdownMsg.Store(&message)
	return s.Shutdown(ctx)
}

// shutdownError is the FATAL sent to connections closed by a shutdown.
func (s *Server) shutdownError() *Error {
	if m := s.shutdownMsg.Load(); m != nil {
		return &Error{Severity: SeverityFatal, Code: pgcode.AdminShutdown, Message: *m}
	}
	return errShutdown
}

func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	s.closing.Store(true)
	for l := range s.mu.listeners {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.interruptIfIdle()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.closeAll()
	<-done
	return ctx.Err()
}

// Close closes all listeners and connections immediately.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closing = true
	s.closing.Store(true)
	for l := range s.mu.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.closeAll()
	s.wg.Wait()
	return nil
}

// CloseConnections ends every connection now, keeping the listeners: a
// running statement is canceled, and each client gets message as a FATAL
// 57P01 before its connection closes. New connections are served as usual.
// The server uses it when the catalog its sessions read is replaced (the
// store was reopened): sessions of the old one must not go on.
func (s *Server) CloseConnections(message string) {
	e := &Error{Severity: SeverityFatal, Code: pgcode.AdminShutdown, Message: message}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.evict(e)
	}
}

// Terminate ends the connection whose backend pid is pid, as PostgreSQL's
// pg_terminate_backend: its running statement is canceled and the client
// gets FATAL 57P01 "terminating connection due to administrator command".
// It reports whether such a connection was open.
func (s *Server) Terminate(pid uint32) bool {
	s.mu.Lock()
	c, ok := s.mu.byPID[pid]
	s.mu.Unlock()
	if ok {
		c.evict(errShutdown)
	}
	return ok
}

// evict ends c with e: its statement is canceled and its next read fails,
// so that its goroutine sends e and closes.
func (c *conn) evict(e *Error) {
	c.evicted.Store(e)
	c.cancelStatement(errAdminShutdownCause)
	c.mu.Lock()
	_ = c.mu.netConn.SetReadDeadline(time.Now())
	c.mu.Unlock()
}

func (s *Server) closeAll() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.cancelStatement(errAdminShutdownCause)
		c.nc().Close()
	}
}

var errAdminShutdownCause = errors.New("pgwire: server shutting down")

// register assigns a backend key to c and makes it cancelable.
func (s *Server) register(c *conn) error {
	var secret [4]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return fmt.Errorf("pgwire: backend key: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.mu.nextPID++
		if s.mu.nextPID == 0 {
			s.mu.nextPID = 1000
		}
		if _, used := s.mu.byPID[s.mu.nextPID]; !used {
			break
		}
	}
	c.pid = s.mu.nextPID
	c.secret = binary.BigEndian.Uint32(secret[:])
	s.mu.byPID[c.pid] = c
	return nil
}

// untrack forgets an ended connection that admit registered.
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, c)
	if c.pid != 0 && s.mu.byPID[c.pid] == c {
		delete(s.mu.byPID, c.pid)
	}
}

// cancel handles a CancelRequest: the running statement of the backend
// with this key, if any, is canceled. Wrong keys are ignored silently, as in
// PostgreSQL, so a CancelRequest reveals nothing.
func (s *Server) cancel(pid uint32, secret []byte) {
	s.mu.Lock()
	c := s.mu.byPID[pid]
	s.mu.Unlock()
	if c == nil || len(secret) != 4 {
		return
	}
	var want [4]byte
	binary.BigEndian.PutUint32(want[:], c.secret)
	if subtle.ConstantTimeCompare(want[:], secret) != 1 {
		return
	}
	c.cancelStatement(errCancelRequestCause)
}

// trusted reports whether addr matches a trust rule.
func (s *Server) trusted(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.UnixAddr:
		return s.cfg.TrustUnixSocket
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			return false
		}
		ip = ip.Unmap()
		for _, p := range s.cfg.TrustedNets {
			if p.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// validateUser checks that u's secret can serve its method.
func validateUser(u User) error {
	_, isSCRAM := parseSCRAMVerifier(u.Secret)
	isMD5 := isMD5Verifier(u.Secret)
	switch u.Method {
	case AuthTrust:
		return nil
	case AuthPassword, AuthMD5:
		if u.Secret == "" {
			return fmt.Errorf("pgwire: user %q: %s needs a password, md5 hash or SCRAM verifier", u.Name, u.Method)
		}
	case AuthSCRAM:
		if u.Secret == "" || isMD5 {
			return fmt.Errorf("pgwire: user %q: scram-sha-256 needs a SCRAM verifier or a password (an md5 hash cannot serve SCRAM)", u.Name)
		}
	default:
		return fmt.Errorf("pgwire: user %q: unknown auth method %d", u.Name, u.Method)
	}
	if strings.HasPrefix(u.Secret, "SCRAM-SHA-256$") && !isSCRAM {
		return fmt.Errorf("pgwire: user %q: malformed SCRAM verifier", u.Name)
	}
	return nil
}
