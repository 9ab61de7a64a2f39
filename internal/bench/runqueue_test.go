package bench

import (
	"math"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
)

func TestParseSchedLatencies(t *testing.T) {
	const hist = `# HELP go_sched_latencies_seconds Distribution of the time goroutines have spent in the scheduler in a runnable state before actually running.
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="6.399999999999999e-08"} 10
go_sched_latencies_seconds_bucket{le="6.399999999999999e-07"} 15
go_sched_latencies_seconds_bucket{le="1.0239999999999999e-05"} 15
go_sched_latencies_seconds_bucket{le="+Inf"} 22
go_sched_latencies_seconds_sum 0.001
go_sched_latencies_seconds_count 22
`
	for _, tc := range []struct {
		name, text string
		want       *metrics.Float64Histogram // nil: an error
	}{
		{"histogram among other series", "go_goroutines 7\n" + hist + "process_open_fds 9\n", &metrics.Float64Histogram{
			Buckets: []float64{0, 6.399999999999999e-08, 6.399999999999999e-07, 1.0239999999999999e-05, math.Inf(1)},
			Counts:  []uint64{10, 5, 0, 7},
		}},
		{"no histogram", "go_goroutines 7\n", nil},
		{"no +Inf bucket", strings.Replace(hist, `go_sched_latencies_seconds_bucket{le="+Inf"} 22`, "", 1), nil},
		{"counts going down", strings.Replace(hist, `"} 15`, `"} 5`, 1), nil},
		{"bad count", strings.Replace(hist, `"} 22`, `"} x`, 1), nil},
		{"bad bound", strings.Replace(hist, `le="+Inf"`, `le="inf!"`, 1), nil},
		{"malformed line", strings.Replace(hist, `"} 10`, `" 10`, 1), nil},
	} {
		got, err := parseSchedLatencies(strings.NewReader(tc.text))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: %+v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}
