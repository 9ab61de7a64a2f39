package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

func sampleReport() *bench.CommitsReport {
	return &bench.CommitsReport{
		Benchmark: "commits", BaselineLabel: "postgres", RatioWriters: 16, RatioVsPG: 2.5,
		Runs: []bench.CommitsRun{
			{System: "postgres", Writers: 1, Commits: 100, CommitsPerSec: 200, P50MS: 4, P99MS: 9},
			{System: "postgres", Writers: 16, Commits: 1600, CommitsPerSec: 100, P50MS: 40, P99MS: 900, WritersCommitted: 2, Unanswered: 14, UnansweredOldestMS: 5123.4},
			{System: "moraine", Writers: 1, Commits: 100, CommitsPerSec: 400, P50MS: 2, P99MS: 5},
			{System: "moraine", Writers: 16, Commits: 1600, Failed: 3, CommitsPerSec: 250, P50MS: 10, P99MS: 100, WritersCommitted: 16, Unanswered: 15, UnansweredOldestMS: 9.5},
		},
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"commits/s", "link p50 ms", "moraine/postgres writers=1: commits/s x2.00, p50 latency x0.50",
		"moraine/postgres writers=16: commits/s x2.50, p50 latency x0.25 (writers committed: 16 against 2 of 16)",
		"2/16", "14 (oldest 5123.4 ms)", "16/16", "15 (oldest 9.5 ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "ratio_vs_postgres=2.500" {
		t.Errorf("last line %q", last)
	}

	r := sampleReport()
	r.RatioVsPG = math.NaN()
	r.Runs = r.Runs[:2]
	buf.Reset()
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "ratio_vs_postgres=n/a\n") {
		t.Errorf("single-system table should end with n/a:\n%s", buf.String())
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if v, ok := back["ratio_vs_postgres"]; !ok || v != nil {
		t.Errorf("ratio_vs_postgres = %v, want null", v)
	}
}

func TestWritePNG(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != 440 {
		t.Fatalf("image is %v", b)
	}
	// Count bar pixels per system colour: moraine's commits/s bars are
	// taller than postgres's, so it must cover more pixels in the left panel.
	count := map[color.RGBA]int{}
	for y := 0; y < 440; y++ {
		for x := 0; x < 495; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			count[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0xff}]++
		}
	}
	blue, red := count[color.RGBA{0x33, 0x66, 0xcc, 0xff}], count[color.RGBA{0xdc, 0x39, 0x12, 0xff}]
	if blue == 0 || red <= blue {
		t.Fatalf("bar pixels: postgres %d, moraine %d; want moraine > postgres > 0", blue, red)
	}
}

// TestRunCommits runs the benchmark end to end against the test PostgreSQL,
// twice over (two targets naming the same server), so that the ratio path
// is exercised; it is not a meaningful comparison.
func TestRunCommits(t *testing.T) {
	pg := testenv.Postgres(t)
	var progress bytes.Buffer
	rep, err := bench.RunCommits(context.Background(), bench.CommitsConfig{
		Targets: []bench.Target{{Name: "postgres", ConnInfo: pg}, {Name: "again", ConnInfo: pg}},
		Writers: []int{1, 4}, Commits: 5, Warmup: 6, Verify: true, Progress: &progress,
		Base: workload.Config{Tables: 2, MaxRetries: 100, RetryWait: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if r.Commits != 5*r.Writers || r.Warmup != 6 || !r.Verified || r.CommitsPerSec <= 0 || r.P50MS <= 0 || r.P99MS < r.P50MS {
			t.Errorf("run %+v", r)
		}
		// Five or more consecutive snapshots land in every timed window: the
		// chain's links are measured, and each is shorter than the phase.
		if r.LinkP50MS <= 0 || r.LinkMeanMS <= 0 || r.LinkP50MS > r.ElapsedMS {
			t.Errorf("chain links of run %+v", r)
		}
	}
	if rep.Warmup != 6 {
		t.Errorf("report warm-up %d, want 6", rep.Warmup)
	}
	if rep.RatioWriters != 4 || math.IsNaN(rep.RatioVsPG) || rep.RatioVsPG <= 0 {
		t.Errorf("ratio %v at %d writers", rep.RatioVsPG, rep.RatioWriters)
	}
	t.Log(progress.String())
}

// TestRunCommitsRemovesStoresAtTheEnd: a server a target starts for a run is
// stopped after that run, and what it stored is removed only when the
// benchmark ends, so that no run's deletions are timed in the next.
func TestRunCommitsRemovesStoresAtTheEnd(t *testing.T) {
	pg := testenv.Postgres(t)
	var events []string
	started := 0
	target := bench.Target{Name: "started", Start: func(context.Context) (bench.Server, error) {
		started++
		n := started
		return bench.Server{
			ConnInfo: pg,
			Stop:     func() error { events = append(events, fmt.Sprintf("stop %d", n)); return nil },
			Remove:   func() { events = append(events, fmt.Sprintf("remove %d", n)) },
		}, nil
	}}
	_, err := bench.RunCommits(context.Background(), bench.CommitsConfig{
		Targets: []bench.Target{{Name: "postgres", ConnInfo: pg}, target},
		Writers: []int{1, 2}, Commits: 2, Rounds: 2,
		Base: workload.Config{Tables: 1, MaxRetries: 100, RetryWait: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stop 1", "stop 2", "stop 3", "stop 4", "remove 4", "remove 3", "remove 2", "remove 1"}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

// TestRoundRatios: with several rounds the ratio is the median of the
// round-by-round ratios at the highest writer count, and the table's
// per-writer lines compare the median runs.
func TestRoundRatios(t *testing.T) {
	rep := &bench.CommitsReport{Rounds: 3, BaselineLabel: "postgres", RatioWriters: 16}
	add := func(sys string, w, round int, cps, p50 float64) {
		rep.Runs = append(rep.Runs, bench.CommitsRun{System: sys, Writers: w, Round: round, CommitsPerSec: cps, P50MS: p50, P99MS: 2 * p50})
	}
	// Round 2 is a slow moment for both: pairing keeps it from skewing
	// the ratio, which is 4, 5 and 6 by round.
	add("postgres", 16, 1, 300, 2)
	add("moraine", 16, 1, 1200, 10)
	add("postgres", 16, 2, 150, 4)
	add("moraine", 16, 2, 750, 20)
	add("postgres", 16, 3, 280, 2)
	add("moraine", 16, 3, 1680, 8)
	rep.RatioVsPG = 0
	ratios := bench.RoundRatiosForTest(rep, 16)
	if len(ratios) != 3 || ratios[0] != 4 || ratios[1] != 5 || ratios[2] != 6 {
		t.Fatalf("round ratios %v, want [4 5 6]", ratios)
	}
	rep.RoundRatios, rep.RatioVsPG = ratios, 5
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	// Median runs: postgres 280 (of 150, 280, 300), moraine 1200 (of 750,
	// 1200, 1680): x4.29.
	for _, want := range []string{"writers=16: commits/s x4.29", "round by round: 4.00 5.00 6.00; median 5.000", "ratio_vs_postgres=5.000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSummarizePhases: medians and means of each phase over the chain's
// links and the writers' cycles, and the share of time in late links.
func TestSummarizePhases(t *testing.T) {
	links := []workload.LinkPhases{
		{Snapshot: 11, Wait: -10 * time.Microsecond, Stats: 110 * time.Microsecond, Paths: 60 * time.Microsecond, Batch: 240 * time.Microsecond, Link: 400 * time.Microsecond},
		{Snapshot: 13, Wait: 300 * time.Microsecond, Stats: 200 * time.Microsecond, Paths: 100 * time.Microsecond, Batch: 2400 * time.Microsecond, Link: 3000 * time.Microsecond, Late: true},
	}
	s := bench.SummarizePhases(links, nil)
	if s.Links != 2 || s.Late != 1 || s.LateShare != 3000.0/3400 {
		t.Fatalf("summary %+v", s)
	}
	if s.Wait != [2]float64{300, 145} || s.Batch != [2]float64{2400, 1320} || s.Link != [2]float64{3000, 1700} {
		t.Fatalf("summary medians/means %+v", s)
	}
	if s.Tail != [2]float64{} || s.ToSnapshot != [2]float64{} {
		t.Fatalf("cycles summarized from none: %+v", s)
	}
	if bench.SummarizePhases(nil, nil) != nil {
		t.Fatal("a summary of no links")
	}
	cycles := []workload.WriterCycle{
		{Writer: 0, Nth: 1, Tail: 300 * time.Microsecond, ToSnapshot: 100 * time.Microsecond},
		{Writer: 1, Nth: 4, Tail: 200 * time.Microsecond, ToSnapshot: 100 * time.Microsecond},
		{Writer: 2, Nth: 1, Tail: 400 * time.Microsecond, ToSnapshot: 160 * time.Microsecond},
	}
	s = bench.SummarizePhases([]workload.LinkPhases{{Link: time.Millisecond}}, cycles)
	if s.Tail != [2]float64{300, 300} || s.ToSnapshot != [2]float64{100, 120} {
		t.Fatalf("summary tail %v, to snapshot %v", s.Tail, s.ToSnapshot)
	}
}
