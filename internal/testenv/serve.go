package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// Server is what Start runs: server.Server satisfies it. It is an interface
// so that this package need not import the server (whose own tests use it).
type Server interface {
	// Run serves until ctx is cancelled or the server fails.
	Run(ctx context.Context) error
	// Ready is closed once the server accepts connections.
	Ready() <-chan struct{}
	// Addr is the address it listens on, valid once Ready is closed.
	Addr() net.Addr
}

// readyTimeout and stopTimeout bound how long a test waits for a server
// to start and to stop: a hang becomes a test failure, not a stuck run.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
)

// Running is a Server started by Start.
type Running struct {
	// Addr is the listening address (host:port).
	Addr   string
	cancel context.CancelFunc
	exited chan struct{} // closed once Run returned
	err    error         // Run's result, set before exited closes
	// watched: Done was called, so the test judges how Run ended.
	watched  atomic.Bool
	stopOnce sync.Once
}

// Start runs srv in a goroutine and returns once it is ready; the test
// fails if Run returns first or readiness takes over readyTimeout. The
// server is stopped when the test ends (Stop), if the test did not stop
// it: a server left running would write into directories the test's
// cleanup is removing.
func Start(t testing.TB, srv Server) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, exited: make(chan struct{})}
	go func() {
		r.err = srv.Run(ctx)
		close(r.exited)
	}()
	select {
	case <-srv.Ready():
	case <-r.exited:
		cancel()
		t.Fatalf("server exited before ready: %v", r.err)
	case <-time.After(readyTimeout):
		cancel()
		t.Fatalf("server not ready after %v", readyTimeout)
	}
	r.Addr = srv.Addr().String()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Stop cancels the server and requires Run to return within stopTimeout,
// and to return nil unless the test watches its end through Done. Only
// the first call does anything.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case <-r.exited:
			if r.err != nil && !r.watched.Load() {
				t.Fatalf("server run: %v", r.err)
			}
		case <-time.After(stopTimeout):
			t.Fatal("server did not stop")
		}
	})
}

// Done delivers Run's result, for tests that expect the server to end by
// itself (a fenced writer); Stop then no longer judges that result.
func (r *Running) Done() <-chan error {
	r.watched.Store(true)
	ch := make(chan error, 1)
	go func() {
		<-r.exited
		ch <- r.err
	}()
	return ch
}

// Conninfo is the keyword/value conninfo of database db on the server at
// addr, as the trusted local user moraine.
func Conninfo(addr, db string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "host=" + host + " port=" + port + " user=moraine dbname=" + db + " sslmode=disable"
}

// Conninfo is Conninfo(r.Addr, db).
func (r *Running) Conninfo(db string) string { return Conninfo(r.Addr, db) }

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a server that must be told its address before it starts (a
// child process, a restart on the same address).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// CreateDatabase creates the database conninfo names on its server, unless
// it exists, through the server's maintenance database (postgres), as
// createdb does: a server serves only databases that were created.
func CreateDatabase(ctx context.Context, conninfo string) error {
	cfg, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		return err
	}
	name := cfg.Database
	cfg.Database = "postgres"
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()).ReadAll()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgcode.DuplicateDatabase {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// fixtureDatabasesLock is the advisory lock key of the PostgreSQL
// databases named after the fixtures' (s01_basic, …).
const fixtureDatabasesLock = 0x6d6f7261 // "mora"

// LockFixtureDatabases holds, until the test ends, a PostgreSQL advisory
// lock on the server at conninfo that every test which drops and creates
// the databases the fixtures are named after takes first: the packages'
// tests run in parallel, and one must not drop another's database under
// it.
func LockFixtureDatabases(t testing.TB, conninfo string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgconn.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", fixtureDatabasesLock)).ReadAll(); err != nil {
		c.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) }) // ending the session releases the lock
}
