package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/workload"
)

// ReplicaOptions are `moraine bench replica`'s: for every store kind and
// catalog size, a writer serving a catalog of that many data files takes a
// stream of DuckLake commits from many writers while read replicas of it
// run as their own `moraine serve --replica` processes; the benchmark
// measures how long after the writer acknowledged each commit it became
// visible on each replica, what applying it cost the replica's process,
// and how long a replica takes to start (load the catalog) at that size.
type ReplicaOptions struct {
	Exe        string        // the moraine executable the writer and replicas run as
	Stores     []string      // "local", "s3"
	PutLatency fault.Latency // added to every S3 PUT
	Files      []int         // catalog sizes in data files
	Tables     int           // user tables of the built catalog
	Stats      int           // column-stats rows per data file
	Replicas   []int         // replica counts
	Writers    int           // concurrent DuckLake writers
	Commits    int           // commits per writer
	Poll       time.Duration // the replicas' --replica-poll
	JSONOut    string
}

// ReplicaRow is one measured (store, catalog size, replica count).
type ReplicaRow struct {
	Store        string  `json:"store"`
	Files        int     `json:"files"`
	Replicas     int     `json:"replicas"`
	Commits      int     `json:"commits"`
	WriterReadyS float64 `json:"writer_ready_s"`  // a clean restart of the writer: process start → ready
	ReplicaReady float64 `json:"replica_ready_s"` // slowest replica start → ready
	LagP50MS     float64 `json:"lag_p50_ms"`
	LagP99MS     float64 `json:"lag_p99_ms"`
	LagMaxMS     float64 `json:"lag_max_ms"`
	// CPUPerCommitMS is a replica's process CPU over the run divided by
	// the commits it applied (the mean over replicas).
	CPUPerCommitMS float64 `json:"replica_cpu_per_commit_ms"`
	RSSMiB         float64 `json:"replica_rss_mib"` // largest replica's resident set after the run
	Applied        float64 `json:"applied_commits"` // per replica, mean
	Reloads        float64 `json:"reloads"`         // per replica, total
}

// FailoverRow is one measured failover: the writer killed (SIGKILL) while a
// caught-up replica follows it, then pg_promote() on the replica.
type FailoverRow struct {
	Store string `json:"store"`
	Files int    `json:"files"`
	// PromoteS is the time from the kill to pg_promote() returning;
	// CommitS to the first DuckLake commit the promoted replica
	// acknowledged. Detecting the death is the operator's (or its
	// orchestrator's) and not counted.
	PromoteS float64 `json:"promote_s"`
	CommitS  float64 `json:"first_commit_s"`
}

// RunReplica runs the benchmark and prints one table row per measurement.
func RunReplica(ctx context.Context, o ReplicaOptions, stdout, stderr io.Writer) error {
	if o.Exe == "" {
		return errors.New("bench replica: replicas run as processes of the moraine executable")
	}
	var rows []ReplicaRow
	var failovers []FailoverRow
	for _, store := range o.Stores {
		for _, files := range o.Files {
			got, fo, err := replicaRound(ctx, o, store, files, stderr)
			rows = append(rows, got...)
			if err != nil {
				return fmt.Errorf("%s, %d files: %w", store, files, err)
			}
			failovers = append(failovers, fo)
		}
	}
	tw := newTab(stdout)
	fmt.Fprintln(tw, "store\tdata files\treplicas\tcommits\twriter ready s\treplica ready s\tlag p50 ms\tlag p99 ms\tlag max ms\treplica CPU/commit ms\treplica RSS MiB\treloads\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.3f\t%.0f\t%.0f\t\n", r.Store, r.Files, r.Replicas, r.Commits,
			r.WriterReadyS, r.ReplicaReady, r.LagP50MS, r.LagP99MS, r.LagMaxMS, r.CPUPerCommitMS, r.RSSMiB, r.Reloads)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "lag: from the writer's answer to a commit to the replica serving its snapshot; replica poll %s\n\n", o.Poll)
	tw = newTab(stdout)
	fmt.Fprintln(tw, "store\tdata files\tkill → promoted s\tkill → first commit s\t")
	for _, f := range failovers {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t\n", f.Store, f.Files, f.PromoteS, f.CommitS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "failover: the writer killed (SIGKILL) under a caught-up replica, then pg_promote() on the replica")
	if o.JSONOut != "" {
		return WriteJSON(o.JSONOut, map[string]any{"benchmark": "replica", "machine": Machine(), "runs": rows, "failovers": failovers})
	}
	return nil
}

// replicaRound builds one catalog on one store, measures every replica
// count on it and ends with a failover.
func replicaRound(ctx context.Context, o ReplicaOptions, store string, files int, progress io.Writer) ([]ReplicaRow, FailoverRow, error) {
	fo := FailoverRow{Store: store, Files: files}
	m, err := StartMoraine(ctx, StoreSpec{Kind: store, PutLatency: o.PutLatency})
	if err != nil {
		return nil, fo, err
	}
	defer m.Stop()
	shape := LakeShape{Tables: o.Tables, Files: files, Stats: o.Stats, FilesPerCommit: max(1, files/1000)}
	t0 := time.Now()
	if err := BuildLake(ctx, m.Server.Stack().Cat.Database("lake"), shape, progress); err != nil {
		return nil, fo, err
	}
	fmt.Fprintf(progress, "%s: built %d data files in %.1fs\n", store, files, time.Since(t0).Seconds())
	if err := m.ServeFromProcess(ctx, o.Exe); err != nil {
		return nil, fo, err
	}
	writerReady, err := m.Restart(ctx, o.Exe)
	if err != nil {
		return nil, fo, err
	}
	cfg := workload.Config{ConnString: m.ConnInfo("lake"), Writers: o.Writers, CommitsPerWriter: o.Commits, Tables: 4,
		RetryWait: 5 * time.Millisecond, MaxRetries: 1000, Seed: uint64(files)}
	if err := workload.PrepareTables(ctx, cfg); err != nil {
		return nil, fo, err
	}
	var rows []ReplicaRow
	for _, n := range o.Replicas {
		row, err := replicaRun(ctx, o, m, cfg, n)
		if err != nil {
			return rows, fo, err
		}
		row.Store, row.Files, row.WriterReadyS = store, files, writerReady.Seconds()
		rows = append(rows, row)
		fmt.Fprintf(progress, "%s, %d files, %d replicas: lag p50 %.1f ms, p99 %.1f ms\n", store, files, n, row.LagP50MS, row.LagP99MS)
	}
	promote, commit, err := failover(ctx, o, m, cfg, progress)
	if err != nil {
		return rows, fo, fmt.Errorf("failover: %w", err)
	}
	fo.PromoteS, fo.CommitS = promote.Seconds(), commit.Seconds()
	fmt.Fprintf(progress, "%s, %d files: failover promoted in %.3f s, first commit after %.3f s\n", store, files, fo.PromoteS, fo.CommitS)
	return rows, fo, nil
}

// replicaRun starts n replicas of m's store, drives the workload on m and
// measures the replicas.
func replicaRun(ctx context.Context, o ReplicaOptions, m *Moraine, cfg workload.Config, n int) (ReplicaRow, error) {
	var row ReplicaRow
	var reps []*Moraine
	defer func() {
		for _, r := range reps {
			r.Stop()
		}
	}()
	for range n {
		r := &Moraine{done: make(chan error, 1)}
		t := time.Now()
		if err := r.startProcess(ctx, o.Exe, serveArgv(replicaArgs(o, m))); err != nil {
			return row, err
		}
		row.ReplicaReady = max(row.ReplicaReady, time.Since(t).Seconds())
		reps = append(reps, r)
	}
	// Watch every replica's newest snapshot: when each id first shows.
	type seen struct {
		head int64
		at   time.Time
	}
	watches := make([][]seen, n)
	latest := make([]atomic.Int64, n) // the newest head each watcher saw
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, r := range reps {
		c, err := pgconn.Connect(ctx, r.ConnInfo("lake"))
		if err != nil {
			return row, err
		}
		defer c.Close(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64 = -1
			for {
				h, err := headOf(ctx, c)
				if err != nil {
					errs <- err
					return
				}
				if h > last {
					watches[i] = append(watches[i], seen{h, time.Now()})
					last = h
					latest[i].Store(h)
				}
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Microsecond):
				}
			}
		}()
	}
	before := make([]replicaSample, n)
	for i, r := range reps {
		before[i] = sampleReplica(ctx, r)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		close(stop)
		wg.Wait()
		return row, err
	}
	landed := res.Landed()
	final := int64(0)
	for _, l := range landed {
		final = max(final, l.Snapshot)
	}
	// Let every watcher see every replica reach the last snapshot.
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < n; {
		if latest[i].Load() >= final {
			i++
			continue
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		return row, err
	default:
	}
	var lags []time.Duration
	for i, w := range watches {
		for _, l := range landed {
			if l.Writer < 0 {
				continue
			}
			k := sort.Search(len(w), func(j int) bool { return w[j].head >= l.Snapshot })
			if k == len(w) {
				return row, fmt.Errorf("a replica never showed snapshot %d; its log ends:\n%s", l.Snapshot, reps[i].log)
			}
			lags = append(lags, max(w[k].at.Sub(l.Answered), 0))
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) == 0 {
		return row, errors.New("no commit landed")
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	row.Replicas, row.Commits = n, len(landed)
	row.LagP50MS, row.LagP99MS, row.LagMaxMS = ms(lags[len(lags)/2]), ms(lags[(len(lags)-1)*99/100]), ms(lags[len(lags)-1])
	var cpu time.Duration
	for i, r := range reps {
		after := sampleReplica(ctx, r)
		cpu += after.cpu - before[i].cpu
		row.Applied += after.applied - before[i].applied
		row.Reloads += after.reloads - before[i].reloads
		row.RSSMiB = max(row.RSSMiB, after.rssMiB)
	}
	if row.Applied > 0 {
		row.CPUPerCommitMS = ms(cpu) / row.Applied
	}
	row.Applied /= float64(n)
	return row, nil
}

// replicaArgs are the command line of a replica of m's store.
func replicaArgs(o ReplicaOptions, m *Moraine) []string {
	return []string{"--store", m.StoreURL(), "--replica", "--replica-poll", o.Poll.String(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
}

// failover starts a replica of m, waits until it serves m's newest
// snapshot, kills m's process and promotes the replica: it returns the
// time from the kill to pg_promote() returning and to the first DuckLake
// commit (cfg's, one writer) the promoted replica acknowledged.
func failover(ctx context.Context, o ReplicaOptions, m *Moraine, cfg workload.Config, progress io.Writer) (promote, commit time.Duration, err error) {
	r := &Moraine{done: make(chan error, 1)}
	if err := r.startProcess(ctx, o.Exe, serveArgv(replicaArgs(o, m))); err != nil {
		return 0, 0, err
	}
	defer r.Stop()
	wc, err := pgconn.Connect(ctx, m.ConnInfo("lake"))
	if err != nil {
		return 0, 0, err
	}
	want, err := headOf(ctx, wc)
	wc.Close(context.Background())
	if err != nil {
		return 0, 0, err
	}
	rc, err := pgconn.Connect(ctx, r.ConnInfo("postgres"))
	if err != nil {
		return 0, 0, err
	}
	defer rc.Close(context.Background())
	lc, err := pgconn.Connect(ctx, r.ConnInfo("lake"))
	if err != nil {
		return 0, 0, err
	}
	for {
		h, err := headOf(ctx, lc)
		if err != nil {
			lc.Close(context.Background())
			return 0, 0, err
		}
		if h >= want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lc.Close(context.Background())

	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill the writer: %w", err)
	}
	killed := time.Now()
	rs, err := rc.Exec(ctx, "SELECT pg_promote()").ReadAll()
	if err != nil {
		return 0, 0, fmt.Errorf("pg_promote(): %w", err)
	}
	promote = time.Since(killed)
	if len(rs) != 1 || len(rs[0].Rows) != 1 || string(rs[0].Rows[0][0]) != "t" {
		return 0, 0, fmt.Errorf("pg_promote() did not return true; the replica's log ends:\n%s", r.log)
	}
	fmt.Fprintf(progress, "failover: the replica logged %s\n", r.log.find("promote: the catalog"))
	one := cfg
	one.ConnString, one.Writers, one.CommitsPerWriter = r.ConnInfo("lake"), 1, 1
	if _, err := workload.Run(ctx, one); err != nil {
		return 0, 0, fmt.Errorf("a commit on the promoted replica: %w", err)
	}
	return promote, time.Since(killed), nil
}

// replicaSample is what a replica process has done so far.
type replicaSample struct {
	cpu              time.Duration
	applied, reloads float64
	rssMiB           float64
}

func sampleReplica(ctx context.Context, r *Moraine) replicaSample {
	var s replicaSample
	s.cpu, _ = ProcessCPU(r.PID)
	vals, _ := scrapeMetrics(ctx, r.metricsAddr)
	s.applied, s.reloads = vals["moraine_replica_applied_commits_total"], vals["moraine_replica_reloads_total"]
	s.rssMiB = rssMiB(r.PID)
	return s
}

// scrapeMetrics reads the unlabelled samples of a /metrics page.
func scrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// rssMiB is a process's resident set (VmRSS), 0 when unreadable.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// headOf is the newest snapshot id of the lake conn is attached to.
func headOf(ctx context.Context, c *pgconn.PgConn) (int64, error) {
	rs, err := c.Exec(ctx, "SELECT max(snapshot_id) FROM ducklake_snapshot").ReadAll()
	if err != nil {
		return 0, err
	}
	if len(rs) == 0 || len(rs[0].Rows) == 0 || rs[0].Rows[0][0] == nil {
		return -1, nil
	}
	return strconv.ParseInt(string(rs[0].Rows[0][0]), 10, 64)
}
