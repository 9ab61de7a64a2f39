package sql

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// AppendMessages makes copyRecorder a messageAppender: the messages are
// framed exactly as AppendRow frames a row, so both streams compare.
func (c *copyRecorder) AppendMessages(msgs []byte, rows int) error {
	c.buf = append(c.buf, msgs...)
	c.rows += rows
	return nil
}

// encodedPlanOf returns the binary COPY plan of a whole-table read sql in
// session s, its streamRead and what it reads.
func encodedPlanOf(t tb, ctx context.Context, ex *Executor, s *Session, sql string) (*copyPlan, *streamRead, encodedSource) {
	t.Helper()
	stmts, err := ex.cache.parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	x := &exec{ctx: ctx, s: s, lits: stmts[0].lits}
	sr, ok := x.streamable(stmts[0].node.GetSelectStmt())
	if !ok {
		t.Fatalf("%s: not a stream read", sql)
	}
	p, src, ok := sr.encodedPlan()
	if !ok {
		t.Fatalf("%s: no plan", sql)
	}
	return p, sr, src
}

// insertStats fills ducklake_table_column_stats with eight rows for each
// of tables tables; note marks their min_value.
func insertStats(t tb, ctx context.Context, s *Session, tables int, note string) {
	t.Helper()
	var rows []string
	for tid := 1; tid <= tables; tid++ {
		for c := 1; c <= 8; c++ {
			rows = append(rows, fmt.Sprintf("(%d, %d, false, NULL, '%s%d', 'w%d', NULL)", tid, c, note, tid, c))
		}
	}
	mustSQL(t, ctx, s, "INSERT INTO ducklake_table_column_stats VALUES "+strings.Join(rows, ","))
}

// statsSession opens a session on a fresh executor whose
// ducklake_table_column_stats holds eight rows for each of tables tables.
func statsSession(t *testing.T, ctx context.Context, tables int) (*Executor, *Session) {
	t.Helper()
	ex, s := emptyStatsSession(t, ctx)
	t.Cleanup(func() { s.Close() })
	insertStats(t, ctx, s, tables, "v")
	return ex, s
}

// emptyStatsSession opens a session on a fresh executor whose
// ducklake_table_column_stats is empty; the caller closes it.
func emptyStatsSession(t tb, ctx context.Context) (*Executor, *Session) {
	t.Helper()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	mustSQL(t, ctx, s, statsTable)
	return ex, s
}

// tb is what these helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// copyBoth copies sql's table by the cached chunk path (through cache)
// and by the row path, and fails unless both send the same stream.
func copyBoth(t tb, ctx context.Context, ex *Executor, s *Session, sql string, cache *copyCache) []byte {
	t.Helper()
	p, _, src := encodedPlanOf(t, ctx, ex, s, sql)
	var want, got copyRecorder
	if err := p.copyRows(&want, src.scan); err != nil {
		t.Fatal(err)
	}
	if src.chunks == nil {
		return want.buf // a table this transaction writes: rows only
	}
	src.cache = cache
	if err := p.copyChunks(&got, src); err != nil {
		t.Fatal(err)
	}
	if got.rows != want.rows || !bytes.Equal(got.buf, want.buf) {
		t.Fatalf("%s: the cached path sent %d rows, %d bytes; the row path %d rows, %d bytes", sql, got.rows, len(got.buf), want.rows, len(want.buf))
	}
	return got.buf
}

const statsTable = `CREATE TABLE ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR)`

const statsCopy = `SELECT "table_id", "column_id", "contains_null", "contains_nan", "min_value", "max_value", "extra_stats" FROM "ducklake_table_column_stats"`

func mustSQL(t tb, ctx context.Context, s *Session, sql string) {
	t.Helper()
	if out := runSQL(ctx, s, sql, ""); strings.Contains(out, "ERROR") {
		t.Fatalf("%s: %s", sql, out)
	}
}

// TestCopyCacheMatchesRowPath: over random commits that insert, update
// and delete statistics rows, every COPY through the cache sends exactly
// what the row path sends, whichever chunks it found cached.
func TestCopyCacheMatchesRowPath(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		ex, s := emptyStatsSession(rt, ctx)
		defer s.Close()
		cache := newCopyCache(rapid.SampledFrom([]int{1 << 10, 64 << 10, 8 << 20}).Draw(rt, "budget"))
		tables := rapid.IntRange(1, 60).Draw(rt, "tables")
		insertStats(rt, ctx, s, tables, "a")
		copyBoth(rt, ctx, ex, s, statsCopy, cache)
		for step := rapid.IntRange(1, 12).Draw(rt, "steps"); step > 0; step-- {
			tid := rapid.IntRange(1, tables+2).Draw(rt, "table")
			var sql string
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				sql = fmt.Sprintf("UPDATE ducklake_table_column_stats SET min_value='m%d', max_value=NULL WHERE table_id=%d", step, tid)
			case 2:
				sql = fmt.Sprintf("DELETE FROM ducklake_table_column_stats WHERE table_id=%d", tid)
			case 3:
				sql = fmt.Sprintf("INSERT INTO ducklake_table_column_stats VALUES (%d, 9, true, false, NULL, 'z%d', 'x')", tid, step)
			}
			inTxn := rapid.Bool().Draw(rt, "inTxn")
			if inTxn {
				// A transaction reads its own writes: its table is not
				// published, so the COPY must not use (or fill) the cache.
				mustSQL(rt, ctx, s, "BEGIN")
				mustSQL(rt, ctx, s, sql)
				copyBoth(rt, ctx, ex, s, statsCopy, cache)
				mustSQL(rt, ctx, s, "COMMIT")
			} else {
				mustSQL(rt, ctx, s, sql)
			}
			copyBoth(rt, ctx, ex, s, statsCopy, cache)
		}
	})
}

// TestCopyCacheSendsUnchangedChunks: a second COPY of an unchanged table
// takes every chunk from the cache; after a commit that updates one
// table's eight statistics rows most chunks still come from it; another
// column list is another plan, with entries of its own; and a table too
// large for the cache leaves it alone.
func TestCopyCacheSendsUnchangedChunks(t *testing.T) {
	ctx := context.Background()
	ex, s := statsSession(t, ctx, 500)
	cache := newCopyCache(8 << 20)
	counts := func() (hits, misses int64) {
		h, m := cache.hits.Load(), cache.misses.Load()
		cache.hits.Store(0)
		cache.misses.Store(0)
		return h, m
	}
	first := copyBoth(t, ctx, ex, s, statsCopy, cache)
	if h, m := counts(); h != 0 || m < 100 {
		t.Fatalf("first COPY of 4 000 rows: %d hits, %d misses", h, m)
	}
	if again := copyBoth(t, ctx, ex, s, statsCopy, cache); !bytes.Equal(again, first) {
		t.Fatal("an unchanged table copied differently")
	}
	chunks, _ := counts()
	if chunks < 100 {
		t.Fatalf("second COPY: %d hits", chunks)
	}
	mustSQL(t, ctx, s, "BEGIN")
	for c := 1; c <= 8; c++ {
		mustSQL(t, ctx, s, fmt.Sprintf("UPDATE ducklake_table_column_stats SET min_value='x' WHERE table_id=250 AND column_id=%d", c))
	}
	mustSQL(t, ctx, s, "COMMIT")
	if after := copyBoth(t, ctx, ex, s, statsCopy, cache); bytes.Equal(after, first) {
		t.Fatal("the update is not in the COPY")
	}
	h, m := counts()
	t.Logf("4 000 rows: %d chunks cached; after updating 8 rows, %d hits and %d misses", chunks, h, m)
	if m == 0 || m > 24 || h < chunks-24 {
		t.Fatalf("after updating 8 rows: %d hits, %d misses (of about %d chunks)", h, m, chunks)
	}
	copyBoth(t, ctx, ex, s, `SELECT "table_id", "max_value" FROM "ducklake_table_column_stats"`, cache)
	if h, m := counts(); h != 0 || m < 100 {
		t.Fatalf("another column list: %d hits, %d misses", h, m)
	}
	small := newCopyCache(64 << 10) // 4 000 rows of ~40 bytes do not fit in a quarter
	copyBoth(t, ctx, ex, s, statsCopy, small)
	copyBoth(t, ctx, ex, s, statsCopy, small)
	if h, m := small.hits.Load(), small.misses.Load(); h != 0 || m != 0 {
		t.Fatalf("a table too large for the cache: %d hits, %d misses", h, m)
	}
}

// TestCopyCacheConcurrent: sessions copying through one cache while
// another commits updates each see a stream equal to their row path's
// (run with -race: entries are shared between sessions, read-only).
func TestCopyCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	ex, w := statsSession(t, ctx, 200)
	cache := newCopyCache(8 << 20)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		go func(pid uint32) {
			s := ex.Open("lake", "postgres", "", pid)
			defer s.Close()
			ft := &fatalTB{}
			defer func() {
				if p := recover(); p != nil && p != ft {
					panic(p)
				}
				errs <- ft.err
			}()
			for {
				select {
				case <-done:
					return
				default:
				}
				copyBoth(ft, ctx, ex, s, statsCopy, cache)
			}
		}(uint32(r + 2))
	}
	for i := 0; i < 200; i++ {
		mustSQL(t, ctx, w, fmt.Sprintf("UPDATE ducklake_table_column_stats SET min_value='u%d' WHERE table_id=%d", i, i%200+1))
	}
	close(done)
	for r := 0; r < 4; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if cache.hits.Load() == 0 {
		t.Fatal("no COPY found a chunk in the cache")
	}
}

// fatalTB is a tb for a goroutine other than the test's: Fatal records
// the error and unwinds the goroutine.
type fatalTB struct{ err error }

func (f *fatalTB) Helper()                   {}
func (f *fatalTB) Fatal(args ...any)         { f.err = fmt.Errorf("%s", fmt.Sprint(args...)); panic(f) }
func (f *fatalTB) Fatalf(s string, a ...any) { f.err = fmt.Errorf(s, a...); panic(f) }

// TestCopyCacheGenerations: the cache holds at most its budget; an entry
// found in the older generation moves up; the bytes it reports are the
// bytes it holds.
func TestCopyCacheGenerations(t *testing.T) {
	c := newCopyCache(1000) // 500 bytes a generation
	plans := make([]copyPlan, 12)
	key := func(i int) copyCacheKey { return copyCacheKey{plan: &plans[i]} }
	held := func() int {
		n := 0
		for _, b := range c.cur {
			n += len(b)
		}
		for _, b := range c.prev {
			n += len(b)
		}
		return n
	}
	for i := range plans {
		c.put(key(i), make([]byte, 100))
		if n := held(); n > 1000 || n != c.curBytes+c.prevBytes {
			t.Fatalf("after %d puts: %d bytes held, counted %d+%d", i+1, n, c.curBytes, c.prevBytes)
		}
	}
	// 12 puts of 100 bytes: the current generation took 5, rotated, took 5,
	// rotated, took 2; entries 5..9 are the older generation.
	if _, ok := c.get(key(0)); ok {
		t.Fatal("an entry two generations old is still there")
	}
	if _, ok := c.get(key(7)); !ok {
		t.Fatal("an entry of the older generation is gone")
	}
	if _, ok := c.cur[key(7)]; !ok {
		t.Fatal("a hit in the older generation did not move up")
	}
	if n := held(); n != c.curBytes+c.prevBytes {
		t.Fatalf("%d bytes held, counted %d+%d", n, c.curBytes, c.prevBytes)
	}
	// Two sessions that missed one chunk both put it.
	c.put(key(11), make([]byte, 50))
	c.put(key(8), make([]byte, 60)) // in the older generation
	if n := held(); n != c.curBytes+c.prevBytes || len(c.cur[key(11)]) != 50 {
		t.Fatalf("after putting twice: %d bytes held, counted %d+%d", n, c.curBytes, c.prevBytes)
	}
	if _, ok := c.prev[key(8)]; ok {
		t.Fatal("a key put again is still in the older generation")
	}
}
