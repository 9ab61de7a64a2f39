package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime/metrics"
	"strconv"
	"strings"
)

// RunQueue reads how long the server's goroutines have waited for a
// processor once runnable, as the runtime's histogram of scheduling
// latencies, from a child process's /metrics (go_sched_latencies_seconds).
// It returns nil for an in-process server: its goroutines are the
// benchmark's own, which the benchmark reads itself.
func (m *Moraine) RunQueue(ctx context.Context) (*metrics.Float64Histogram, error) {
	if m.metricsAddr == "" {
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("moraine /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("moraine /metrics: %s", resp.Status)
	}
	return parseSchedLatencies(resp.Body)
}

// schedLatencies is the Prometheus histogram the Go collector makes of the
// runtime's /sched/latencies:seconds.
const schedLatencies = "go_sched_latencies_seconds_bucket{le=\""

// parseSchedLatencies reads go_sched_latencies_seconds from Prometheus's
// text format and returns it in the runtime's own form (per-bucket counts
// between consecutive bounds, the first bound 0), so that two readings
// subtract like two readings of runtime/metrics.
func parseSchedLatencies(r io.Reader) (*metrics.Float64Histogram, error) {
	h := &metrics.Float64Histogram{Buckets: []float64{0}}
	var cum uint64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), schedLatencies)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(line, "\"} ")
		if !ok {
			return nil, fmt.Errorf("go_sched_latencies_seconds: malformed bucket %q", sc.Text())
		}
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return nil, fmt.Errorf("go_sched_latencies_seconds: bucket bound %q: %w", le, err)
		}
		n, err := strconv.ParseFloat(count, 64)
		if err != nil || n < 0 || n != math.Trunc(n) {
			return nil, fmt.Errorf("go_sched_latencies_seconds: bucket count %q", count)
		}
		c := uint64(n)
		// Buckets come in ascending order with cumulative counts.
		if bound <= h.Buckets[len(h.Buckets)-1] || c < cum {
			return nil, fmt.Errorf("go_sched_latencies_seconds: bucket le=%s out of order", le)
		}
		h.Buckets = append(h.Buckets, bound)
		h.Counts = append(h.Counts, c-cum)
		cum = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("moraine /metrics: %w", err)
	}
	if len(h.Counts) == 0 || !math.IsInf(h.Buckets[len(h.Buckets)-1], 1) {
		return nil, errors.New("moraine /metrics: no complete go_sched_latencies_seconds histogram")
	}
	return h, nil
}
