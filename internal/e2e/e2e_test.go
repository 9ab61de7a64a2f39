// Package e2e holds end-to-end tests of moraine serve: the contended
// DuckLake workload against the real server, crash safety (kill -9 of a child
// process, crash points injected in the object store), durability after a
// failed store write, and clean shutdown on SIGTERM/SIGINT.
//
// Heavier variants run with MORAINE_E2E_LONG=1.
package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// moraineBin is the moraine binary TestMain builds for child-process tests.
var moraineBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "moraine-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		moraineBin = filepath.Join(dir, "moraine")
		root, err := moduleRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		cmd := exec.Command(goTool(), "build", "-o", moraineBin, "./cmd/moraine")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: go build ./cmd/moraine:", err)
			return 1
		}
		return m.Run()
	}())
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// moduleRoot walks up from the test's directory to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test directory")
		}
		dir = parent
	}
}

// long reports whether the heavy variants were asked for.
func long() bool { return os.Getenv("MORAINE_E2E_LONG") == "1" }

func conninfo(addr, db string) string {
	return testenv.Conninfo(addr, db) + " connect_timeout=5"
}

// stackServer serves a stack opened over an explicit object store (the
// fault wrapper) with the same executor and wire settings as moraine serve.
type stackServer struct {
	st   *server.Stack
	wire *pgwire.Server
	addr string
}

func serveStack(ctx context.Context, store objstore.Store, opts server.StackOptions) (*stackServer, error) {
	st, err := server.OpenStackOn(ctx, store, opts)
	if err != nil {
		return nil, err
	}
	wire, err := pgwire.New(pgwire.Config{
		TrustedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Parameters:  map[string]string{"TimeZone": "Etc/UTC"},
	}, server.NewExecutor(st, nil))
	if err != nil {
		st.Close(ctx)
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close(ctx)
		return nil, err
	}
	go wire.Serve(l)
	return &stackServer{st: st, wire: wire, addr: l.Addr().String()}, nil
}

// close drops every client at once and closes the stack; after a crash the
// close error is expected and ignored by callers that crashed it.
func (s *stackServer) close() error {
	s.wire.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.st.Close(ctx)
}

// checkAt connects to addr/db and runs checkPrefix.
func checkAt(ctx context.Context, addr, db string, res *workload.Result, columns int) (int, error) {
	conn, err := pgconn.Connect(ctx, conninfo(addr, db))
	if err != nil {
		return 0, fmt.Errorf("connect for check: %w", err)
	}
	defer conn.Close(context.Background())
	return checkPrefix(ctx, conn, res, columns)
}

// verifyAt connects to addr/db and runs the workload's own full Verify
// (which requires that nothing unacknowledged is present).
func verifyAt(ctx context.Context, addr, db string, res *workload.Result) error {
	conn, err := pgconn.Connect(ctx, conninfo(addr, db))
	if err != nil {
		return fmt.Errorf("connect for verify: %w", err)
	}
	defer conn.Close(context.Background())
	return res.Verify(ctx, conn)
}
