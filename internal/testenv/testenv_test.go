package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records the first Fatal or Skip and ends
// the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	skip     string
	called   bool
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// cleanup runs the registered cleanups, last first, on a goroutine of their
// own: a Fatal in one is recorded in r and ends that goroutine.
func (r *recorder) cleanup() {
	run(func(testing.TB) {
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
	})
}

func (r *recorder) end(dst *string, msg string) {
	r.mu.Lock()
	if !r.called {
		*dst, r.called = msg, true
	}
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any)                 { r.end(&r.fatal, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.end(&r.fatal, fmt.Sprintf(format, args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.end(&r.skip, fmt.Sprintf(format, args...)) }

// run calls f with a fresh recorder on its own goroutine (Goexit must not
// end the test's) and returns the recorder once f has returned or ended.
func run(f func(tb testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestPostgres(t *testing.T) {
	for _, tc := range []struct {
		name, conninfo, ci string
		want, fatal, skip  string
	}{
		{name: "set", conninfo: "host=h", ci: "true", want: "host=h"},
		{name: "set outside CI", conninfo: "host=h", want: "host=h"},
		{name: "unset under CI fails", ci: "true", fatal: "MORAINE_TEST_POSTGRES not set (required under CI=true)"},
		{name: "unset elsewhere skips", skip: "MORAINE_TEST_POSTGRES not set"},
		{name: "CI other than true skips", ci: "1", skip: "MORAINE_TEST_POSTGRES not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(PostgresEnv, tc.conninfo)
			t.Setenv("CI", tc.ci)
			var got string
			r := run(func(tb testing.TB) { got = Postgres(tb) })
			if got != tc.want || r.fatal != tc.fatal || r.skip != tc.skip {
				t.Fatalf("Postgres = %q, fatal %q, skip %q; want %q, %q, %q", got, r.fatal, r.skip, tc.want, tc.fatal, tc.skip)
			}
		})
	}
}

// fake is a Server whose Run ends with runErr, after ready when ready is
// set, or when its context is cancelled.
type fake struct {
	ready    chan struct{}
	markRdy  bool
	runErr   error
	endEarly bool
}

func (f *fake) Ready() <-chan struct{} { return f.ready }
func (f *fake) Addr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5433} }
func (f *fake) Run(ctx context.Context) error {
	if f.markRdy {
		close(f.ready)
	}
	if f.endEarly {
		return f.runErr
	}
	<-ctx.Done()
	return f.runErr
}

func TestStartStop(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name             string
		srv              *fake
		startFatal       string
		stopFatal        string
		wantDone         error
		checkDoneNotStop bool
	}{
		{name: "clean", srv: &fake{markRdy: true}},
		{name: "exits before ready", srv: &fake{endEarly: true, runErr: errBoom}, startFatal: "server exited before ready: boom"},
		{name: "run fails at stop", srv: &fake{markRdy: true, runErr: errBoom}, stopFatal: "server run: boom"},
		{name: "ends by itself", srv: &fake{markRdy: true, endEarly: true, runErr: errBoom}, wantDone: errBoom, checkDoneNotStop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.srv.ready = make(chan struct{})
			var r *Running
			rec := run(func(tb testing.TB) { r = Start(tb, tc.srv) })
			if rec.fatal != tc.startFatal {
				t.Fatalf("Start: fatal %q, want %q", rec.fatal, tc.startFatal)
			}
			if tc.startFatal != "" {
				return
			}
			if r.Addr != "127.0.0.1:5433" || r.Conninfo("lake") != "host=127.0.0.1 port=5433 user=moraine dbname=lake sslmode=disable" {
				t.Fatalf("Addr %q, Conninfo %q", r.Addr, r.Conninfo("lake"))
			}
			if tc.checkDoneNotStop {
				if err := <-r.Done(); !errors.Is(err, tc.wantDone) {
					t.Fatalf("Done: %v, want %v", err, tc.wantDone)
				}
				// The end-of-test Stop does not judge a watched end.
				if rec.cleanup(); rec.fatal != "" {
					t.Fatalf("cleanup after Done: fatal %q", rec.fatal)
				}
				return
			}
			start := rec
			rec = run(func(tb testing.TB) { r.Stop(tb) })
			if rec.fatal != tc.stopFatal {
				t.Fatalf("Stop: fatal %q, want %q", rec.fatal, tc.stopFatal)
			}
			// The end-of-test Stop is a no-op after Stop.
			if start.cleanup(); start.fatal != "" {
				t.Fatalf("cleanup after Stop: fatal %q", start.fatal)
			}
		})
	}
}

// TestStartStopsAtCleanup: a server the test never stopped is stopped when
// the test ends, before the test's directories are removed.
func TestStartStopsAtCleanup(t *testing.T) {
	srv := &fake{markRdy: true, ready: make(chan struct{})}
	var r *Running
	rec := run(func(tb testing.TB) { r = Start(tb, srv) })
	select {
	case <-r.exited:
		t.Fatal("server ended before the test did")
	default:
	}
	rec.cleanup()
	select {
	case <-r.exited:
	default:
		t.Fatal("the end of the test did not stop the server")
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr %s is not free: %v", addr, err)
	}
	l.Close()
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Fatalf("FreeAddr %s is not loopback", addr)
	}
}
