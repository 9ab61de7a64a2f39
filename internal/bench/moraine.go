// Package bench holds what the `moraine bench` subcommands share: starting
// a moraine (in-process, or as a child `moraine serve` process; on a local
// directory or on an in-process S3 whose PUTs are slowed down), naming the
// PostgreSQL they compare against, and the side-by-side table / ratio line /
// JSON output.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/objstore/s3"
	"github.com/moraine-db/moraine/internal/server"
)

// Moraine is a moraine server started for one benchmark.
type Moraine struct {
	// Server is the in-process server; nil when moraine runs as a child
	// process (StoreSpec.Process).
	Server *server.Server
	// PID is the child process's id; 0 when moraine runs in-process.
	PID int
	// StoreDesc says what the store is, for the printed table.
	StoreDesc string
	addr      string // the address it accepts PostgreSQL clients on
	// metricsAddr is a child process's /metrics listener ("" in-process:
	// the benchmark's own runtime is the server's).
	metricsAddr string
	args        []string // its serve arguments (the store among them)
	cancel      context.CancelFunc
	done        chan error // the server's (or child's) exit, sent once
	// stopped and stopErr record the exit once it was received (shutdown),
	// so that a later Stop does not wait for a second one.
	stopped bool
	stopErr error
	cleanup []func()
	// log is the end of a child process's log.
	log *logTail
}

// StoreSpec says which store a benchmark's moraine runs on, and where it
// runs.
type StoreSpec struct {
	Kind       string        // "local" (a fresh temp directory) or "s3" (in-process S3)
	PutLatency fault.Latency // added to every S3 PUT (s3 only)
	Dir        string        // parent of the temp directory; "" means os.TempDir
	// Process, when set, is a moraine executable to run as a child
	// `moraine serve` process, as a deployment runs it: its clients then
	// pay the cross-process wake-ups PostgreSQL's pay, which an in-process
	// server (the default) spares them. An S3 store stays in this process;
	// the child reaches it over loopback HTTP.
	Process string
	// Args are extra `moraine serve` flags.
	Args []string
}

// ErrStoreKind is returned for a StoreSpec.Kind that is not local or s3.
var ErrStoreKind = errors.New("store kind must be local or s3")

// StartMoraine starts a moraine server on a fresh store and waits until it
// accepts connections. Stop it with Stop; it also stops when ctx ends.
func StartMoraine(ctx context.Context, spec StoreSpec) (*Moraine, error) {
	m := &Moraine{done: make(chan error, 1)}
	var storeURL string
	switch spec.Kind {
	case "local", "":
		dir, err := os.MkdirTemp(spec.Dir, "moraine-bench-")
		if err != nil {
			return nil, fmt.Errorf("start moraine: %w", err)
		}
		m.cleanup = append(m.cleanup, func() { os.RemoveAll(dir) })
		storeURL = "file://" + dir
		m.StoreDesc = "local directory"
	case "s3":
		url, stop, err := StartS3(spec.PutLatency)
		if err != nil {
			return nil, err
		}
		m.cleanup = append(m.cleanup, stop)
		storeURL = url
		m.StoreDesc = fmt.Sprintf("in-process S3 (gofakes3), PUT latency %s", latencyString(spec.PutLatency))
	default:
		return nil, fmt.Errorf("start moraine: %q: %w", spec.Kind, ErrStoreKind)
	}
	args := append([]string{"--store", storeURL, "--listen", "127.0.0.1:0", "--max-connections", "1000"}, spec.Args...)
	m.args = args
	if spec.Process != "" {
		// The child's /metrics tells how long its goroutines waited to run
		// (RunQueue).
		if err := m.startProcess(ctx, spec.Process, serveArgv(append(args, "--metrics-listen", "127.0.0.1:0"))); err != nil {
			m.runCleanup()
			return nil, err
		}
		return m, nil
	}
	cfg, err := server.ParseConfig(args, nil, io.Discard)
	if err != nil {
		m.runCleanup()
		return nil, fmt.Errorf("start moraine: %w", err)
	}
	m.Server = server.New(cfg, slog.New(slog.DiscardHandler))
	rctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() { m.done <- m.Server.Run(rctx) }()
	select {
	case <-m.Server.Ready():
		m.addr = m.Server.Addr().String()
		return m, nil
	case err := <-m.done:
		cancel()
		m.runCleanup()
		return nil, fmt.Errorf("start moraine: exited before ready: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		m.runCleanup()
		return nil, errors.New("start moraine: not ready after 60s")
	}
}

// StoreURL is the store the server serves.
func (m *Moraine) StoreURL() string {
	for i, a := range m.args {
		if a == "--store" && i+1 < len(m.args) {
			return m.args[i+1]
		}
	}
	return ""
}

// ConnInfo is a libpq conninfo for database db on this server.
func (m *Moraine) ConnInfo(db string) string {
	host, port, _ := net.SplitHostPort(m.addr)
	return "host=" + host + " port=" + port + " user=moraine dbname=" + db + " sslmode=disable"
}

// Stop shuts the server down (flushing its store) and removes the store.
func (m *Moraine) Stop() error {
	err := m.shutdown()
	m.runCleanup()
	return err
}

// Halt shuts the server down and keeps its store until Stop. A benchmark
// that starts a fresh server per run halts each after its run and removes
// the stores at the end: removing a run's files at once would slow the
// next run's file creation where the file system skips recently freed
// inodes (ext4 without a journal walks past every inode freed in the last
// minutes of its group before it allocates one).
func (m *Moraine) Halt() error { return m.shutdown() }

// shutdown asks the server to stop and waits for its exit, at most
// processWait; once it has, later calls return the same outcome at once. A
// Moraine is used by one goroutine at a time.
func (m *Moraine) shutdown() error {
	if !m.stopped {
		m.cancel()
		select {
		case m.stopErr = <-m.done:
		case <-time.After(processWait):
			m.stopErr = fmt.Errorf("moraine did not stop within %v", processWait)
		}
		m.stopped = true
	}
	return m.stopErr
}

// ServeFromProcess stops an in-process server, keeping its store, and
// serves that store again from a child `moraine serve` process of exe, as
// a deployment would after the catalog was built (the child loads it from
// the store as any restart does). The address changes; ConnInfo follows.
func (m *Moraine) ServeFromProcess(ctx context.Context, exe string) error {
	if m.Server == nil {
		return errors.New("serve from process: moraine already runs as a child process")
	}
	if err := m.shutdown(); err != nil {
		return fmt.Errorf("serve from process: stopping the in-process server: %w", err)
	}
	m.Server, m.stopped, m.stopErr = nil, false, nil
	// The in-process catalog is garbage now: hand its memory back before
	// the child loads the same catalog again (at ten million data files
	// the two would not fit together).
	debug.FreeOSMemory()
	return m.startProcess(ctx, exe, serveArgv(m.args))
}

// Restart stops a child-process server cleanly and starts it again on the
// same store, returning the time from the new process's start to its
// readiness (a restart at the store's size).
func (m *Moraine) Restart(ctx context.Context, exe string) (time.Duration, error) {
	if m.Server != nil {
		return 0, errors.New("restart: moraine runs in-process")
	}
	if err := m.shutdown(); err != nil {
		return 0, fmt.Errorf("restart: stopping: %w", err)
	}
	m.stopped, m.stopErr = false, nil
	m.done = make(chan error, 1)
	t := time.Now()
	if err := m.startProcess(ctx, exe, serveArgv(m.args)); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}

// serveArgv is the command line of a child `moraine serve` with args.
func serveArgv(args []string) []string { return append([]string{"serve"}, args...) }

func (m *Moraine) runCleanup() {
	for i := len(m.cleanup) - 1; i >= 0; i-- {
		m.cleanup[i]()
	}
	m.cleanup = nil
}

func latencyString(l fault.Latency) string { return l.String() }

// drawLatency picks one delay from l (uniform over [Min, Max]).
func drawLatency(l fault.Latency) time.Duration {
	if l.Max <= l.Min {
		return l.Min
	}
	return l.Min + rand.N(l.Max-l.Min+1)
}

// StartS3 starts an in-process S3 server (gofakes3 over memory) on loopback
// with one bucket, and returns an s3:// URL for it. Every PUT request
// (object writes, including conditional If-None-Match ones) is held for the
// latency before it is served, so the delay is on the S3 protocol path the
// store really uses. stop shuts the server down.
func StartS3(putLatency fault.Latency) (url string, stop func(), err error) {
	backend := s3mem.New()
	if err := backend.CreateBucket("moraine-bench"); err != nil {
		return "", nil, fmt.Errorf("start s3: %w", err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	inner := faker.Server()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			if d := drawLatency(putLatency); d > 0 {
				time.Sleep(d)
			}
		}
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	c := s3.Config{Bucket: "moraine-bench", Prefix: "catalog/", Endpoint: srv.URL, Region: s3.DefaultRegion, UsePathStyle: true, Anonymous: true}
	return c.String(), srv.Close, nil
}
