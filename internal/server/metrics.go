package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/objstore"
)

// Metrics are the server's Prometheus collectors, on their own registry so
// that tests can run several servers in one process.
type Metrics struct {
	Registry      *prometheus.Registry
	Commits       *prometheus.CounterVec
	CommitLatency prometheus.Histogram
	Reopens       prometheus.Counter
	StoreOps      *prometheus.HistogramVec
	StoreBytes    *prometheus.CounterVec
	StoreErrors   *prometheus.CounterVec
	// Connections is the number of open client sessions; ConnectionsTotal
	// counts every session opened.
	Connections      prometheus.Gauge
	ConnectionsTotal prometheus.Counter
	// Statements counts statements by shape (their first keyword).
	Statements *prometheus.CounterVec
	// Conflicts counts conflicts reported to clients, by class.
	Conflicts *prometheus.CounterVec
	// StatementDuration times statements by shape; StatementErrors counts
	// the errors clients were answered with, by SQLSTATE.
	StatementDuration *prometheus.HistogramVec
	StatementErrors   *prometheus.CounterVec
	// ReplicaReloads counts catalog reloads of a replica following the
	// writer; ReplicaSeq is the store sequence its catalog reflects.
	ReplicaReloads prometheus.Counter
	ReplicaSeq     prometheus.Gauge
	// ReplicaApplied counts the writer's commits a replica applied one by
	// one; ReplicaLag is how long after the writer committed it (its
	// snapshot_time) the newest applied DuckLake snapshot became visible
	// on the replica, and ReplicaLagHist the distribution of that delay.
	ReplicaApplied prometheus.Counter
	ReplicaLag     prometheus.Gauge
	ReplicaLagHist prometheus.Histogram
	// Promotions counts promotions of this replica to the writer (0 or 1).
	Promotions prometheus.Counter
	stack      atomic.Pointer[Stack]
	ready      atomic.Bool
	refusing   atomic.Bool // the store refuses writes: reads only (serveDegraded)
	copies     atomic.Pointer[CopyCacheExecutor]
}

// CopyCacheExecutor is an executor with a binary COPY cache (the SQL
// layer's; docs/sql.md): the server sizes it (copy-cache-mib) before
// serving, and reports the leaves answered from it and encoded anew and
// the bytes it holds.
type CopyCacheExecutor interface {
	SetCopyCacheBytes(n int)
	CopyCacheStats() (hits, misses, bytes int64)
}

// NewMetrics registers every collector.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.Commits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_commits_total", Help: "Commits by outcome: ok, conflict, shape, head, hold, store, invalid."}, []string{"outcome"})
	m.CommitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "moraine_commit_duration_seconds", Help: "Time from COMMIT to durable acknowledgement.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.Reopens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moraine_store_reopens_total", Help: "Times the server reopened the store after a failed write."})
	m.StoreOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "moraine_store_op_duration_seconds", Help: "Object store operation latency by operation.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"op"})
	m.StoreBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_store_bytes_total", Help: "Object bytes written and read."}, []string{"direction"})
	m.StoreErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_store_errors_total", Help: "Object store operations that failed (not found and exists are answers, not failures)."}, []string{"op"})
	m.Connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "moraine_connections", Help: "Open client sessions."})
	m.ConnectionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moraine_connections_total", Help: "Client sessions opened."})
	m.Statements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_statements_total", Help: "Statements received, by shape (first keyword; unknown keywords are \"other\")."}, []string{"shape"})
	m.Conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_conflicts_total", Help: "Conflicts reported to clients, by class: \"unique\" (another writer took the snapshot id; DuckLake retries) or the pair of actions of a true conflict."}, []string{"class"})
	m.Conflicts.WithLabelValues("unique")
	m.ReplicaReloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moraine_replica_reloads_total", Help: "Full catalog reloads of a replica that could not follow the writer commit by commit."})
	m.ReplicaSeq = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "moraine_replica_catalog_seq", Help: "Store sequence number the replica's served catalog reflects."})
	m.ReplicaApplied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moraine_replica_applied_commits_total", Help: "Commits of the writer a replica applied to its resident catalog one by one."})
	m.ReplicaLag = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "moraine_replica_lag_seconds", Help: "How long after the writer committed it (its snapshot_time, by the writer's clock) the newest DuckLake snapshot the replica applied became visible on the replica."})
	m.ReplicaLagHist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "moraine_replica_lag_distribution_seconds", Help: "Distribution of moraine_replica_lag_seconds over applied snapshots.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.Promotions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moraine_promotions_total", Help: "Promotions of this replica to the writer of its store (pg_promote())."})
	m.StatementDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "moraine_statement_duration_seconds", Help: "Time from a statement's arrival to its last answer, by shape (first keyword).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 20)}, []string{"shape"})
	m.StatementErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moraine_statement_errors_total", Help: "Errors sent to clients in answer to a statement, by SQLSTATE."}, []string{"sqlstate"})
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "moraine_build_info", Help: "Always 1; the labels name the build.",
		ConstLabels: prometheus.Labels{"version": Version(), "goversion": runtime.Version()}})
	buildInfo.Set(1)
	m.Registry.MustRegister(m.Commits, m.CommitLatency, m.Reopens, m.StoreOps, m.StoreBytes, m.StoreErrors,
		m.Connections, m.ConnectionsTotal, m.Statements, m.Conflicts, m.ReplicaReloads, m.ReplicaSeq, m.ReplicaApplied, m.ReplicaLag, m.ReplicaLagHist, m.Promotions,
		m.StatementDuration, m.StatementErrors, buildInfo)
	for _, o := range []string{"ok", "conflict", "shape", "head", "hold", "store", "invalid"} {
		m.Commits.WithLabelValues(o)
	}
	gauge := func(name, help string, f func(st *Stack) float64) {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if st := m.stack.Load(); st != nil {
				return f(st)
			}
			return 0
		}))
	}
	// Counts since the store was opened: a reopen starts them again, which
	// Prometheus reads as a counter reset.
	counter := func(name, help string, f func(st *Stack) float64) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			if st := m.stack.Load(); st != nil {
				return f(st)
			}
			return 0
		}))
	}
	counter("moraine_wal_objects_total", "WAL objects written since the store was opened.", func(st *Stack) float64 { return float64(st.KV.Stats().WALObjects) })
	counter("moraine_wal_bytes_total", "WAL bytes written since the store was opened.", func(st *Stack) float64 { return float64(st.KV.Stats().WALBytes) })
	counter("moraine_store_batches_total", "Batches made durable since the store was opened.", func(st *Stack) float64 { return float64(st.KV.Stats().Batches) })
	counter("moraine_store_flushes_total", "Memtables flushed to sorted tables since the store was opened.", func(st *Stack) float64 { return float64(st.KV.Stats().Flushes) })
	counter("moraine_store_compactions_total", "Store compactions published since the store was opened.", func(st *Stack) float64 { return float64(st.KV.Stats().Compactions) })
	gauge("moraine_store_seq", "Highest durable store sequence number.", func(st *Stack) float64 { return float64(st.KV.Stats().LastSeq) })
	gauge("moraine_block_cache_bytes", "Memory the store's block cache holds (decoded blocks of its sorted tables).", func(st *Stack) float64 { return float64(st.KV.Stats().BlockCacheBytes) })
	copies := func(pick func(hits, misses, bytes int64) int64) func() float64 {
		return func() float64 {
			if r := m.copies.Load(); r != nil {
				return float64(pick((*r).CopyCacheStats()))
			}
			return 0
		}
	}
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "moraine_copy_cache_hits_total",
			Help: "B-tree leaves a binary COPY sent from the COPY cache."}, copies(func(h, _, _ int64) int64 { return h })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "moraine_copy_cache_misses_total",
			Help: "B-tree leaves a binary COPY of a cached table encoded anew."}, copies(func(_, m, _ int64) int64 { return m })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "moraine_copy_cache_bytes",
			Help: "Message bytes held by the COPY cache."}, copies(func(_, _, b int64) int64 { return b })),
	)
	m.Registry.MustRegister(&residentCollector{m: m})
	// The process's own series, as every Go server exports them: CPU,
	// memory, threads and file descriptors, the collector, and the
	// scheduler (go_sched_latencies_seconds: how long goroutines wait for
	// a processor once runnable, which on a small machine is much of a
	// commit's round trips; docs/benchmarks.md).
	m.Registry.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC, collectors.MetricsScheduler)),
	)
	return m
}

// setCopyCache makes c the COPY cache the metrics report.
func (m *Metrics) setCopyCache(c CopyCacheExecutor) { m.copies.Store(&c) }

func (m *Metrics) setStack(st *Stack) {
	m.stack.Store(st)
	m.ready.Store(true)
}

func (m *Metrics) observeCommit(o commit.Outcome) {
	m.Commits.WithLabelValues(o.Result).Inc()
	if o.Result == "ok" {
		m.CommitLatency.Observe(o.Duration.Seconds())
	}
}

// residentCollector reports resident rows and bytes per DuckLake table kind,
// computed at scrape time from the current catalog versions.
type residentCollector struct{ m *Metrics }

var (
	residentRows  = prometheus.NewDesc("moraine_resident_rows", "Rows resident in the catalog, by database and table kind.", []string{"database", "table"}, nil)
	residentBytes = prometheus.NewDesc("moraine_resident_bytes", "Encoded row bytes resident in the catalog, by database and table kind.", []string{"database", "table"}, nil)
)

func (c *residentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- residentRows
	ch <- residentBytes
}

func (c *residentCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.stack.Load()
	if st == nil {
		return
	}
	for _, name := range st.Cat.Databases() {
		db, ok := st.Cat.Lookup(name)
		if !ok {
			continue
		}
		// A branch holds apart from its parent only the tables the parent
		// changed since the fork: the others are counted once, there.
		var parent *catalog.Version
		if b := db.Branch(); b != nil {
			if p, ok := st.Cat.Lookup(b.Parent); ok {
				parent = p.Current()
			}
		}
		rows, bytes := map[string]float64{}, map[string]float64{}
		for _, sc := range db.Current().Schemas() {
			for _, t := range sc.Tables() {
				if parent != nil {
					if pt, err := parent.Table(sc.Name, t.Name()); err == nil && pt == t {
						continue
					}
				}
				kind := tableKind(t.Name())
				rows[kind] += float64(t.Len())
				t.Scan(func(_ catalog.CTID, r datum.Row) bool { bytes[kind] += float64(len(r)); return true })
			}
		}
		for k, v := range rows {
			ch <- prometheus.MustNewConstMetric(residentRows, prometheus.GaugeValue, v, name, k)
			ch <- prometheus.MustNewConstMetric(residentBytes, prometheus.GaugeValue, bytes[k], name, k)
		}
	}
}

// tableKind folds the dynamic per-table tables into one label each.
func tableKind(name string) string {
	switch {
	case strings.HasPrefix(name, "ducklake_inlined_data_") && name != "ducklake_inlined_data_tables":
		return "ducklake_inlined_data"
	case strings.HasPrefix(name, "ducklake_inlined_delete_"):
		return "ducklake_inlined_delete"
	}
	return name
}

// serveMetrics starts the HTTP listener for /metrics, /healthz and /readyz.
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		st := s.metrics.stack.Load()
		if st == nil || !s.metrics.ready.Load() {
			http.Error(w, "not ready: the catalog is loading", http.StatusServiceUnavailable)
			return
		}
		if st.Pipe != nil && st.Pipe.Failed() != nil {
			http.Error(w, "not ready: reopening the store after a failed write", http.StatusServiceUnavailable)
			return
		}
		if s.metrics.refusing.Load() {
			http.Error(w, "not ready: the store refuses writes; serving reads only", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener", "err", err)
		}
	}()
	s.log.Info("metrics listening", "addr", l.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}, nil
}

// instrumentedStore records latency, bytes and errors of every object-store
// call in the server's metrics.
type instrumentedStore struct {
	objstore.Store
	m *Metrics
}

func (s *instrumentedStore) obs(op string, start time.Time, err error) {
	s.m.StoreOps.WithLabelValues(op).Observe(time.Since(start).Seconds())
	// Not found (a probe for the next manifest, an absent heartbeat) and
	// exists (a lost create-if-absent race, a fence) are answers, not
	// failures.
	if err != nil && !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, objstore.ErrExists) {
		s.m.StoreErrors.WithLabelValues(op).Inc()
	}
}

func (s *instrumentedStore) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := s.Store.Put(ctx, key, data)
	s.obs("put", start, err)
	if err == nil {
		s.m.StoreBytes.WithLabelValues("write").Add(float64(len(data)))
	}
	return err
}

func (s *instrumentedStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := s.Store.PutIfAbsent(ctx, key, data)
	s.obs("put_if_absent", start, err)
	if err == nil {
		s.m.StoreBytes.WithLabelValues("write").Add(float64(len(data)))
	}
	return err
}

func (s *instrumentedStore) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	b, err := s.Store.Get(ctx, key)
	s.obs("get", start, err)
	s.m.StoreBytes.WithLabelValues("read").Add(float64(len(b)))
	return b, err
}

func (s *instrumentedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	b, err := s.Store.GetRange(ctx, key, off, n)
	s.obs("get_range", start, err)
	s.m.StoreBytes.WithLabelValues("read").Add(float64(len(b)))
	return b, err
}

func (s *instrumentedStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	start := time.Now()
	out, err := s.Store.List(ctx, prefix)
	s.obs("list", start, err)
	return out, err
}

func (s *instrumentedStore) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.Store.Delete(ctx, key)
	s.obs("delete", start, err)
	return err
}

func (s *instrumentedStore) DeleteMany(ctx context.Context, keys []string) error {
	start := time.Now()
	err := s.Store.DeleteMany(ctx, keys)
	s.obs("delete_many", start, err)
	return err
}
