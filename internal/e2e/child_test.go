package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// child is `moraine serve` run as a child process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testenv.SyncBuffer
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// startChild starts moraine serve on store at addr and waits until it
// accepts a catalog connection.
func startChild(t *testing.T, store, addr string) *child {
	t.Helper()
	return startChildArgs(t, store, addr)
}

// startChildArgs is startChild with more flags for serve.
func startChildArgs(t *testing.T, store, addr string, extra ...string) *child {
	t.Helper()
	c := &child{addr: addr, stderr: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(moraineBin, append([]string{"serve", "--store", store, "--listen", addr, "--log-level", "warn"}, extra...)...)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgconn.Connect(ctx, conninfo(addr, "postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return c
		}
		select {
		case <-c.exited:
			t.Fatalf("moraine serve exited before accepting connections: %v\n%s", c.err, c.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("moraine serve not accepting connections after 30s: %v\n%s", err, c.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig and waits for the exit, returning the exit code (-1 if
// killed by a signal).
func (c *child) signal(t *testing.T, sig syscall.Signal, within time.Duration) int {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(within):
		t.Fatalf("moraine serve did not exit within %v of %v\n%s", within, sig, c.stderr)
	}
	return c.cmd.ProcessState.ExitCode()
}

// round is one workload started against a child, cut short by fn.
type round struct {
	db  string
	res *workload.Result
	err error
}

const childColumns = 4

// childConfig writes real Parquet files under dataDir, which moraine
// serve's row-id hold reads when it checks a merge.
func childConfig(addr, db, dataDir string, writers, commits int, seed uint64) workload.Config {
	return workload.Config{
		ConnString: conninfo(addr, db), DataDir: dataDir, Writers: writers, CommitsPerWriter: commits, Tables: 4,
		Columns: childColumns, RowsPerFile: 20, Compactor: true, CompactPause: 2 * time.Millisecond,
		RetryWait: 2 * time.Millisecond, Seed: seed,
	}
}

// TestKill9 runs the workload against a child moraine serve and kill -9s
// it at a random moment, again and again, each round on a fresh database
// of the same store. After every restart each earlier round's database must
// still be exactly its acknowledged prefix (nothing unacknowledged partly
// present, snapshot ids dense) and the current one too.
func TestKill9(t *testing.T) {
	rounds := 8
	if long() {
		rounds = 40
	}
	store := "file://" + t.TempDir()
	addr := testenv.FreeAddr(t)
	c := startChild(t, store, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(9, 9))
	var done []round
	var present, acked int
	for i := 0; i < rounds; i++ {
		db := fmt.Sprintf("lake%d", i)
		cfg := childConfig(addr, db, t.TempDir(), 8, 400, uint64(100+i))
		if err := prepare(ctx, cfg); err != nil {
			t.Fatalf("round %d: prepare: %v\n%s", i, err, c.stderr)
		}
		var wg sync.WaitGroup
		r := round{db: db}
		wg.Add(1)
		go func() { defer wg.Done(); r.res, r.err = workload.Run(ctx, cfg) }()
		time.Sleep(time.Duration(20+rng.IntN(400)) * time.Millisecond)
		if code := c.signal(t, syscall.SIGKILL, 10*time.Second); code != -1 {
			t.Fatalf("round %d: exit code %d after SIGKILL, want death by signal", i, code)
		}
		wg.Wait()
		if r.err == nil {
			t.Fatalf("round %d: the workload finished before the kill; make it longer", i)
		}
		// A kill before the writers connected leaves no result: nothing
		// was acknowledged, and the check then allows no commit beyond
		// one in flight per connection.
		if r.res != nil {
			acked += len(r.res.Landed())
		}
		done = append(done, r)
		c = startChild(t, store, addr)
		for _, d := range done {
			n, err := checkAt(ctx, addr, d.db, d.res, childColumns)
			if err != nil {
				t.Fatalf("after kill %d, database %s: %v", i, d.db, err)
			}
			if d.db == db {
				present += n
			}
		}
	}
	if code := c.signal(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, c.stderr)
	}
	t.Logf("%d kill -9 rounds: %d acknowledged commits all present after restarts, %d in-flight commits found present", rounds, acked, present)
}

// TestGracefulShutdown sends SIGTERM or SIGINT to a child moraine serve in
// the middle of the workload: it must exit 0 promptly with in-flight commits
// finished or failed cleanly, and a restart must see every acknowledged
// commit and nothing partial.
func TestGracefulShutdown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			store := "file://" + t.TempDir()
			addr := testenv.FreeAddr(t)
			c := startChild(t, store, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := childConfig(addr, "lake", t.TempDir(), 8, 400, 77)
			if err := prepare(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			var res *workload.Result
			var runErr error
			ran := make(chan struct{})
			go func() { defer close(ran); res, runErr = workload.Run(ctx, cfg) }()
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			if code := c.signal(t, sig, 15*time.Second); code != 0 {
				t.Fatalf("exit code %d after %v, want 0\n%s", code, sig, c.stderr)
			}
			stopped := time.Since(start)
			<-ran
			if runErr == nil {
				t.Fatal("the workload finished before the signal; make it longer")
			}
			t.Logf("the workload ended with: %v", runErr)
			c2 := startChild(t, store, addr)
			n, err := checkAt(ctx, addr, "lake", res, childColumns)
			if err != nil {
				t.Fatal(err)
			}
			if code := c2.signal(t, syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("restarted server: exit code %d\n%s", code, c2.stderr)
			}
			t.Logf("%v: exited 0 in %v; %d acknowledged commits present after restart, %d unacknowledged in-flight commits present", sig, stopped.Round(time.Millisecond), len(res.Landed()), n)
		})
	}
}
