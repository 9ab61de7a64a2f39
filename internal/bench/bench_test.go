package bench

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/objstore/fault"
)

func timings(ms ...float64) []ReadTiming {
	out := make([]ReadTiming, len(Reads))
	for i := range out {
		d := time.Duration(ms[i%len(ms)] * float64(time.Millisecond))
		out[i] = ReadTiming{Rows: int64(i), Bytes: 21 + int64(i), Time: d, MS: ms[i%len(ms)]}
	}
	return out
}

func TestCatalogReportRatio(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pg, mo float64
		want   string
	}{
		{"moraine faster", 3, 1, "ratio_vs_postgres=3.000\n"},
		{"moraine slower", 1, 4, "ratio_vs_postgres=0.250\n"},
		{"equal", 2, 2, "ratio_vs_postgres=1.000\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := NewCatalogReport("m", LakeShape{}, 1, timings(tc.pg), timings(tc.mo))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := rep.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(b.String(), "\n"+tc.want) {
				t.Fatalf("want last line %q:\n%s", tc.want, b.String())
			}
			if n := strings.Count(b.String(), "\n"); n < len(Reads)+3 {
				t.Fatalf("%d lines, want a row per read:\n%s", n, b.String())
			}
		})
	}
}

func TestCatalogReportRefusesDifferentCatalogs(t *testing.T) {
	pg, mo := timings(1), timings(1)
	mo[len(mo)-1].Rows++
	if _, err := NewCatalogReport("m", LakeShape{}, 1, pg, mo); err == nil {
		t.Fatal("row counts differ but the report was built")
	}
}

func TestBarsPNG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteBarsPNG(&b, []Bar{{1, 2}, {3, 0}}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	// The longest bar (3) spans the plot; moraine's bar of the first pair
	// (2) is two thirds of it.
	if img.At(770, 20+2*10+8+5) != pgColor {
		t.Fatal("longest bar does not reach the right edge")
	}
	if img.At(20+500, 20+15) != moraineColor || img.At(20+510, 20+15) == moraineColor {
		t.Fatal("bar lengths are not proportional")
	}
}

// TestMoraineOnSlowS3 starts a moraine on the in-process S3 with a PUT
// latency and checks that a commit cannot be acknowledged faster than it.
func TestMoraineOnSlowS3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := StartMoraine(ctx, StoreSpec{Kind: "s3", PutLatency: fault.Fixed(30 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}()
	if !regexp.MustCompile(`PUT latency 30ms`).MatchString(m.StoreDesc) {
		t.Fatalf("store description %q", m.StoreDesc)
	}
	// BuildLake makes three durable commits (init, tables, files).
	t0 := time.Now()
	if err := BuildLake(ctx, m.Server.Stack().Cat.Database("lake"), LakeShape{Tables: 1, Files: 2, Stats: 2, FilesPerCommit: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 90*time.Millisecond {
		t.Fatalf("three durable commits acknowledged in %v, before three 30ms PUTs could finish", d)
	}
	conn, err := pgconn.Connect(ctx, m.ConnInfo("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	last, err := timeRead(ctx, conn, Reads[len(Reads)-1], 1)
	if err != nil {
		t.Fatal(err)
	}
	if last.Rows != 4 {
		t.Fatalf("file_column_stats: %d rows over the wire, want 2 files x 2 stats", last.Rows)
	}
	if _, err := StartMoraine(ctx, StoreSpec{Kind: "gcs"}); err == nil {
		t.Fatal("unknown store kind accepted")
	}
}

// TestMedianRound: several rounds report the median of their ratios and
// the reads of the round nearest it; one round reports itself.
func TestMedianRound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratios []float64 // each round's pg/moraine, PostgreSQL's reads taking that many ms against moraine's 1
		want   float64
		shown  float64 // PostgreSQL's ms in the round whose reads are shown
	}{
		{"one round", []float64{2.5}, 2.5, 2.5},
		{"odd", []float64{3, 1, 2}, 2, 2},
		{"even: the lower middle round is shown", []float64{4, 1, 3, 2}, 2.5, 2},
		{"an outlier does not decide", []float64{2.9, 9, 3.1}, 3.1, 3.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rounds []*CatalogReport
			for _, r := range tc.ratios {
				rep, err := NewCatalogReport("m", LakeShape{}, 1, timings(r), timings(1))
				if err != nil {
					t.Fatal(err)
				}
				rounds = append(rounds, rep)
			}
			got := MedianRound(rounds)
			if got.RatioVsPG != tc.want || got.Rows[0].Postgres.MS != tc.shown {
				t.Fatalf("ratio %v showing a round with PostgreSQL at %v ms; want %v and %v", got.RatioVsPG, got.Rows[0].Postgres.MS, tc.want, tc.shown)
			}
			if !slices.Equal(got.RoundRatios, tc.ratios) {
				t.Fatalf("round ratios %v, want %v in the order run", got.RoundRatios, tc.ratios)
			}
			var b bytes.Buffer
			if err := got.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			if byRound := strings.Contains(b.String(), "ratio round by round: "); byRound != (len(tc.ratios) > 1) {
				t.Fatalf("%d rounds, round-by-round line %v:\n%s", len(tc.ratios), byRound, b.String())
			}
			if want := fmt.Sprintf("ratio_vs_postgres=%.3f\n", tc.want); !strings.HasSuffix(b.String(), "\n"+want) {
				t.Fatalf("want last line %q:\n%s", want, b.String())
			}
		})
	}
}

// TestTimeReadsPaired: whichever system goes first, each system's
// timings are of its own reads. The two "systems" are two catalogs of
// different sizes on one moraine.
func TestTimeReadsPaired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := StartMoraine(ctx, StoreSpec{Kind: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}()
	files := map[string]int{"small": 2, "large": 5}
	conns := map[string]*pgconn.PgConn{}
	for name, n := range files {
		if err := BuildLake(ctx, m.Server.Stack().Cat.Database(name), LakeShape{Tables: 1, Files: n, Stats: 3, FilesPerCommit: n}, nil); err != nil {
			t.Fatal(err)
		}
		c, err := pgconn.Connect(ctx, m.ConnInfo(name))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		conns[name] = c
	}
	last := len(Reads) - 1 // file_column_stats: files x 3 rows
	for _, moraineFirst := range []bool{false, true} {
		pgT, moT, err := TimeReadsPaired(ctx, conns["small"], conns["large"], Reads, 2, moraineFirst)
		if err != nil {
			t.Fatal(err)
		}
		if pgT[last].Rows != 6 || moT[last].Rows != 15 {
			t.Fatalf("moraine first %v: file_column_stats rows %d and %d, want 6 (the first connection's) and 15", moraineFirst, pgT[last].Rows, moT[last].Rows)
		}
		for i := range Reads {
			if pgT[i].Time <= 0 || moT[i].Time <= 0 || pgT[i].Bytes <= 0 || moT[i].Bytes <= 0 {
				t.Fatalf("%s: timings %+v and %+v", Reads[i].Name, pgT[i], moT[i])
			}
		}
	}
	if _, _, err := TimeReadsPaired(ctx, conns["small"], conns["large"], []Read{{Name: "bad", SQL: "COPY (SELECT nope FROM nowhere) TO STDOUT"}}, 1, true); err == nil || !strings.Contains(err.Error(), "moraine: bad") {
		t.Fatalf("a failing read: %v, want it named with its system", err)
	}
}
