package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestSoak runs the hostile-input probes against a live `moraine serve`
// (a child process) for MORAINE_SOAK (a duration, e.g. 10m) while a DuckLake
// workload commits through it, then requires that the server is still up,
// that its resident memory stayed under MORAINE_SOAK_RSS_MIB (default 3072)
// and that every acknowledged commit is present. It is not part of the
// default test run: scripts/soak runs it.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("MORAINE_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("MORAINE_SOAK is not set to a duration (scripts/soak sets it)")
	}
	maxRSS := int64(3072)
	if v := os.Getenv("MORAINE_SOAK_RSS_MIB"); v != "" {
		if maxRSS, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	users := dir + "/users"
	add := exec.Command(moraineBin, "user", "add", "--users-file", users, "soak")
	add.Stdin = strings.NewReader("soak-password\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("user add: %v: %s", err, out)
	}
	addr := testenv.FreeAddr(t)
	srv := exec.Command(moraineBin, "serve", "--store", "file://"+dir+"/store", "--create-store", "--listen", addr,
		"--users-file", users, "--statement-mem-mib", "256", "--statement-timeout", "5s",
		"--auth-failures-per-minute", "30", "--auth-timeout", "2s", "--max-connections", "64", "--log-level", "error")
	var stderr testenv.SyncBuffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	host, port, _ := net.SplitHostPort(addr)
	conninfo := func(db string) string {
		return fmt.Sprintf("host=%s port=%s user=soak password=soak-password dbname=%s sslmode=disable", host, port, db)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	for {
		c, err := pgconn.Connect(ctx, conninfo("postgres"))
		if err == nil {
			c.Close(ctx)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("server never came up: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	var peakRSS atomic.Int64
	var probes, workloadRuns atomic.Int64
	var results []*workload.Result
	var resMu sync.Mutex
	// The RSS sampler.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(stop) {
			if r := rssMiB(srv.Process.Pid); r > peakRSS.Load() {
				peakRSS.Store(r)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	// The workload: round after round of DuckLake commits, each round in
	// its own database, verified at the end.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 0; time.Now().Before(stop); round++ {
			cfg := workload.Config{ConnString: conninfo(fmt.Sprintf("soak%d", round)), Writers: 4, CommitsPerWriter: 25, Tables: 3,
				Compactor: true, RetryWait: 2 * time.Millisecond, Seed: uint64(round + 1), DataDir: t.TempDir()}
			if err := prepare(ctx, cfg); err != nil {
				t.Errorf("workload prepare: %v", err)
				return
			}
			res, err := workload.Run(ctx, cfg)
			if err != nil {
				t.Errorf("workload: %v", err)
				return
			}
			resMu.Lock()
			results = append(results, res)
			resMu.Unlock()
			workloadRuns.Add(1)
		}
	}()
	// The probes, each in a loop of its own.
	probe := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := fn(); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				probes.Add(1)
			}
		}()
	}
	expect := func(sql, code string) func() error {
		return func() error {
			c, err := pgconn.Connect(ctx, conninfo("abuse"))
			if err != nil {
				return err
			}
			defer c.Close(ctx)
			_, err = c.Exec(ctx, sql).ReadAll()
			if err == nil || !strings.Contains(err.Error(), code) {
				return fmt.Errorf("%.60s: %v, want %s", sql, err, code)
			}
			return nil
		}
	}
	if err := testenv.CreateDatabase(ctx, conninfo("abuse")); err != nil {
		t.Fatal(err)
	}
	setup, err := pgconn.Connect(ctx, conninfo("abuse"))
	if err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	rows.WriteString(`CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint); INSERT INTO ducklake_metadata VALUES `)
	for i := 0; i < 20000; i++ {
		if i > 0 {
			rows.WriteString(",")
		}
		fmt.Fprintf(&rows, "('k%d', 'v', NULL, %d)", i, i)
	}
	if _, err := setup.Exec(ctx, rows.String()).ReadAll(); err != nil {
		t.Fatal(err)
	}
	setup.Close(ctx)
	probe("deep expression", expect(sum(30000), "54001"))
	probe("cross join", expect("SELECT count(*) FROM ducklake_metadata a, ducklake_metadata b", "53200"))
	probe("slow join", expect("SELECT count(*) FROM ducklake_metadata a JOIN ducklake_metadata b ON a.scope_id + b.scope_id < 0", "57014"))
	probe("LIKE", func() error {
		c, err := pgconn.Connect(ctx, conninfo("abuse"))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, fmt.Sprintf("SELECT '%s' LIKE '%s'", strings.Repeat("a", 5000), strings.Repeat("%a", 2000)+"b")).ReadAll()
		return err
	})
	probe("invalid UTF-8", expect("SELECT 'k\xff'", "22021"))
	probe("unloadable table", expect("CREATE TABLE ducklake_evil (a int)", "0A000"))
	probe("silent sockets", func() error {
		var socks []net.Conn
		for i := 0; i < 40; i++ {
			s, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			socks = append(socks, s)
		}
		time.Sleep(3 * time.Second) // past auth-timeout: the server closes them
		for _, s := range socks {
			s.Close()
		}
		return nil
	})
	// The guesser comes from another loopback address: the limiter blocks
	// the address that guesses, not the clients beside it.
	guess, err := pgconn.ParseConfig(strings.Replace(conninfo("abuse"), "soak-password", "wrong", 1))
	if err != nil {
		t.Fatal(err)
	}
	guess.DialFunc = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext
	probe("password guessing", func() error {
		_, err := pgconn.ConnectConfig(ctx, guess)
		if err == nil {
			return fmt.Errorf("a wrong password was accepted")
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	probe("large request", func() error {
		c, err := pgconn.Connect(ctx, conninfo("abuse"))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "SELECT length('"+strings.Repeat("x", 32<<20)+"')").ReadAll()
		time.Sleep(2 * time.Second)
		return err
	})
	wg.Wait()
	if t.Failed() {
		t.Fatalf("server log:\n%s", stderr.String())
	}

	// Still up, within its memory, and nothing acknowledged is lost.
	for i, res := range results {
		c, err := pgconn.Connect(ctx, conninfo(fmt.Sprintf("soak%d", i)))
		if err != nil {
			t.Fatalf("the server is gone after the soak: %v\n%s", err, stderr.String())
		}
		if err := res.Verify(ctx, c); err != nil {
			t.Errorf("round %d: %v", i, err)
		}
		c.Close(ctx)
	}
	// Memory comes back once the large requests are over: the server
	// releases it within ten seconds of the last one.
	busy := rssMiB(srv.Process.Pid)
	time.Sleep(15 * time.Second)
	idle := rssMiB(srv.Process.Pid)
	t.Logf("soak of %v: %d probes, %d workload rounds (%d commits verified), RSS peak %d MiB, at the end %d MiB, idle 15 s later %d MiB",
		d, probes.Load(), workloadRuns.Load(), committed(results), peakRSS.Load(), busy, idle)
	if peakRSS.Load() > maxRSS {
		t.Errorf("peak RSS %d MiB is past the bound of %d MiB", peakRSS.Load(), maxRSS)
	}
}

func committed(rs []*workload.Result) int {
	n := 0
	for _, r := range rs {
		n += len(r.Landed())
	}
	return n
}

// rssMiB reads a process's resident set size from /proc.
func rssMiB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb >> 10
		}
	}
	return -1
}
