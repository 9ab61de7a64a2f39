package testenv

import (
	"context"
	"net"
	"testing"
	"time"
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
	done   chan error
}

// Start runs srv in a goroutine and returns once it is ready; the test
// fails if Run returns first or readiness takes over readyTimeout.
func Start(t testing.TB, srv Server) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-r.done:
		cancel()
		t.Fatalf("server exited before ready: %v", err)
	case <-time.After(readyTimeout):
		cancel()
		t.Fatalf("server not ready after %v", readyTimeout)
	}
	r.Addr = srv.Addr().String()
	return r
}

// Stop cancels the server and requires Run to return nil within
// stopTimeout. It must not be called after Done has delivered Run's result.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("server run: %v", err)
		}
	case <-time.After(stopTimeout):
		t.Fatal("server did not stop")
	}
}

// Done delivers Run's result, once, for tests that expect the server to end
// by itself (a fenced writer); such a test does not call Stop.
func (r *Running) Done() <-chan error { return r.done }

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
