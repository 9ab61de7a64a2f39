package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Server is a running moraine.
type Server struct {
	cfg     *Config
	log     *slog.Logger
	metrics *Metrics

	// ready is closed once the first stack is serving; served is set then.
	ready  chan struct{}
	served atomic.Bool
	stack  *Stack
	addr   net.Addr
	// promotions carries pg_promote() requests to the serving loop;
	// promoted is set once a replica became the writer.
	promotions chan promotion
	promoted   atomic.Bool
}

// ErrFenced is returned by Run when a newer writer opened the store: this
// server stopped taking writes at once and must exit.
var ErrFenced = errors.New("fenced by a newer writer on the same store")

// New prepares a server; Run starts it.
func New(cfg *Config, log *slog.Logger) *Server {
	return &Server{cfg: cfg, log: log, ready: make(chan struct{}), metrics: NewMetrics(), promotions: make(chan promotion)}
}

// Ready is closed when the server accepts connections.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the TCP address the server listens on (valid after Ready).
func (s *Server) Addr() net.Addr { return s.addr }

// Stack returns the stack currently served (valid after Ready).
func (s *Server) Stack() *Stack { return s.stack }

// Metrics returns the server's metrics registry.
func (s *Server) Metrics() *Metrics { return s.metrics }

func (s *Server) wireConfig() (pgwire.Config, error) {
	wc := pgwire.Config{
		MaxConnections:        s.cfg.MaxConnections,
		IdleTimeout:           s.cfg.IdleTimeout,
		StatementTimeout:      s.cfg.StatementTimeout,
		AuthTimeout:           s.cfg.AuthTimeout,
		AuthFailuresPerMinute: s.cfg.AuthFailuresPerMinute,
		RequireTLS:            s.cfg.SSLRequire,
		ClientCheckInterval:   s.cfg.ClientCheckInterval,
		LogConnections:        s.cfg.LogConnections,
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
// storeName names a store in errors: its URL redacted, with the endpoint
// of an S3-compatible server (which carries no secret) spelt out.
func storeName(raw string) string {
	name := redactURL(raw)
	if u, err := url.Parse(raw); err == nil {
		if ep := u.Query().Get("endpoint"); ep != "" {
			name += " (endpoint " + ep + ")"
		}
	}
	return name
}

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
		if cfg.UsersFile != "" {
			if users, err := ReadUsers(cfg.UsersFile); err == nil {
				for _, u := range users {
					ex.Roles = append(ex.Roles, u.Name)
				}
			}
		}
	}
	return ex
}

// newExecutor makes the stack's executor, able to terminate the wire
// server's sessions, and shows its COPY cache in the metrics.
func (s *Server) newExecutor(st *Stack, wire *pgwire.Server) *sql.Executor {
	ex := NewExecutor(st, s.cfg)
	ex.Terminate = wire.Terminate
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
