package sql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// TestCopyParallelMatchesSerial: over random tables, worker counts and
// batch sizes, the workers' stream is the serial one, byte for byte.
func TestCopyParallelMatchesSerial(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		ex, s := emptyStatsSession(rt, ctx)
		defer s.Close()
		insertStats(rt, ctx, s, rapid.IntRange(1, 400).Draw(rt, "tables"), "a")
		if rapid.Bool().Draw(rt, "delete") {
			// Deleted rows leave chunks of uneven sizes.
			mustSQL(rt, ctx, s, fmt.Sprintf("DELETE FROM ducklake_table_column_stats WHERE column_id > %d", rapid.IntRange(1, 7).Draw(rt, "columns")))
		}
		p, _, src := encodedPlanOf(rt, ctx, ex, s, statsCopy)
		var want, got copyRecorder
		if err := p.copyRows(&want, src.scan); err != nil {
			rt.Fatal(err)
		}
		workers := rapid.IntRange(1, 5).Draw(rt, "workers")
		batch := rapid.IntRange(1, 700).Draw(rt, "batchRows")
		if err := p.copyParallel(&got, src.chunks, workers, batch); err != nil {
			rt.Fatal(err)
		}
		if got.rows != want.rows || !bytes.Equal(got.buf, want.buf) {
			rt.Fatalf("workers sent %d rows, %d bytes; the serial path %d rows, %d bytes", got.rows, len(got.buf), want.rows, len(want.buf))
		}
	})
}

// TestCopyParallelStopsAtBadRow: a row that does not encode ends the
// parallel COPY exactly where it ends the serial one — the rows before
// it sent, the same error — wherever the row lies among the batches.
func TestCopyParallelStopsAtBadRow(t *testing.T) {
	ctx := context.Background()
	const n = 3000
	for _, bad := range []int{1, 700, 1024, 1025, 2999, n} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			ex, s := emptyStatsSession(t, ctx)
			defer s.Close()
			var rows []string
			for i := 1; i <= n; i++ {
				min := "NULL"
				if i == bad {
					min = "'x'"
				}
				rows = append(rows, fmt.Sprintf("(%d, 1, false, NULL, %s, NULL, NULL)", i, min))
			}
			mustSQL(t, ctx, s, "INSERT INTO ducklake_table_column_stats VALUES "+strings.Join(rows, ","))
			_, _, src := encodedPlanOf(t, ctx, ex, s, statsCopy)
			// A plan that reads min_value as a uuid: the one row where it
			// is not NULL is too short for one, and fails to walk.
			stored := []datum.Type{datum.Int8, datum.Int8, datum.Bool, datum.Bool, datum.UUID, datum.Varchar, datum.Varchar}
			cols := make([]colInfo, len(stored))
			idx := make([]int, len(stored))
			for i, typ := range stored {
				cols[i], idx[i] = colInfo{name: fmt.Sprint("c", i), typ: typ}, i
			}
			p, ok := newCopyPlan("ducklake_table_column_stats", stored, stored, cols, idx)
			if !ok {
				t.Fatal("no plan")
			}
			var want, got copyRecorder
			wantErr := p.copyRows(&want, src.scan)
			if !errors.Is(wantErr, datum.ErrBadRow) || want.rows != bad-1 {
				t.Fatalf("serial path: %d rows, error %v; want %d rows and a bad row", want.rows, wantErr, bad-1)
			}
			gotErr := p.copyParallel(&got, src.chunks, 3, 512)
			if gotErr == nil || gotErr.Error() != wantErr.Error() {
				t.Fatalf("workers: error %v, want %v", gotErr, wantErr)
			}
			if got.rows != want.rows || !bytes.Equal(got.buf, want.buf) {
				t.Fatalf("workers sent %d rows, %d bytes; the serial path %d rows, %d bytes", got.rows, len(got.buf), want.rows, len(want.buf))
			}
		})
	}
}

// failingAppender fails its messages after the first few batches, as a
// connection whose client went away does.
type failingAppender struct {
	copyRecorder
	left int
}

var errGone = errors.New("client gone")

func (f *failingAppender) AppendMessages(msgs []byte, rows int) error {
	if f.left == 0 {
		return errGone
	}
	f.left--
	return f.copyRecorder.AppendMessages(msgs, rows)
}

// TestCopyParallelSendError: an error sending a batch ends the COPY with
// that error, and the workers stop (the race detector and the test's end
// would catch one still reading the chunks).
func TestCopyParallelSendError(t *testing.T) {
	ctx := context.Background()
	ex, s := statsSession(t, ctx, 500)
	p, _, src := encodedPlanOf(t, ctx, ex, s, statsCopy)
	for _, left := range []int{0, 1, 5} {
		f := &failingAppender{left: left}
		if err := p.copyParallel(f, src.chunks, 2, 64); !errors.Is(err, errGone) {
			t.Fatalf("after %d batches: %v, want %v", left, err, errGone)
		}
		if f.rows < 64*left {
			t.Fatalf("after %d batches: %d rows sent", left, f.rows)
		}
	}
}

// TestCopyChunksLargeTable: a table too large for the COPY cache and
// above parallelMinRows goes to the workers when there are two CPUs or
// more, and copyChunks still sends the serial stream.
func TestCopyChunksLargeTable(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	if copyWorkers(parallelMinRows-1) != 1 || copyWorkers(parallelMinRows) != 2 {
		t.Fatalf("workers for %d and %d rows: %d and %d, want 1 and 2", parallelMinRows-1, parallelMinRows, copyWorkers(parallelMinRows-1), copyWorkers(parallelMinRows))
	}
	ctx := context.Background()
	ex, s := statsSession(t, ctx, parallelMinRows/8+1)
	p, _, src := encodedPlanOf(t, ctx, ex, s, statsCopy)
	src.cache = newCopyCache(1 << 10) // far too small: not cacheable
	var want, got copyRecorder
	if err := p.copyRows(&want, src.scan); err != nil {
		t.Fatal(err)
	}
	if err := p.copyChunks(&got, src); err != nil {
		t.Fatal(err)
	}
	if got.rows != want.rows || !bytes.Equal(got.buf, want.buf) {
		t.Fatalf("copyChunks sent %d rows, %d bytes; the serial path %d rows, %d bytes", got.rows, len(got.buf), want.rows, len(want.buf))
	}
}
