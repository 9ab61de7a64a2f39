package bench

import (
	"bytes"
	"context"
	"image/png"
	"regexp"
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
	got, err := TimeReads(ctx, conn, Reads, 1)
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last.Rows != 4 {
		t.Fatalf("file_column_stats: %d rows over the wire, want 2 files x 2 stats", last.Rows)
	}
	if _, err := StartMoraine(ctx, StoreSpec{Kind: "gcs"}); err == nil {
		t.Fatal("unknown store kind accepted")
	}
}
