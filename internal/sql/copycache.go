package sql

import (
	"sync"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// The binary COPY cache. Every DuckLake commit reads the whole of
// ducklake_table_stats and ducklake_table_column_stats (one row per table
// and one per column): with a thousand tables, 9 000 rows encoded for the
// wire at every commit, most of the server's work on the commit chain,
// though a commit changes the statistics of one table. The catalog's
// tables are persistent B-trees, so the rows a commit did not touch lie in
// the very same tree nodes in the next version (catalog.Chunk). The cache
// keeps the CopyData messages a plan encoded from a chunk under the
// chunk's key and the plan: a later COPY by the same plan sends a chunk it
// finds as it was, and encodes only the chunks commits changed since.
//
// INVARIANT: a cached entry holds exactly the messages copyRows would send
// for the chunk's rows (copycache_test.go checks this by property). Rows
// that fail to encode are never cached: their COPY takes the row path's
// error at the row where it fails.

// copyCacheBytes is the cache's default size (server setting
// copy-cache-mib): it bounds the entries' message bytes. A thousand
// tables' statistics take about 0.6 MiB per plan.
const copyCacheBytes = 64 << 20

// minCachedChunk is the fewest rows a cached chunk holds. The B-tree
// keeps most rows in its leaves; a branch's rows come one chunk each, are
// rewritten (copied to a new node) by every commit that writes below them,
// and cost more to look up than to encode.
const minCachedChunk = 4

// copyCache maps (plan, chunk) to the chunk's CopyData messages. It keeps
// two generations: entries go into the current one, hits in the previous
// one move up, and when the current one holds half the budget it becomes
// the previous one (whose entries are dropped). What a COPY used recently
// stays; memory stays under the budget. Safe for concurrent use.
type copyCache struct {
	mu        sync.Mutex
	half      int // bytes per generation
	cur, prev map[copyCacheKey][]byte
	curBytes  int
	prevBytes int
	// hits and misses count chunks (tests and docs/benchmarks.md).
	hits, misses atomic.Int64
}

type copyCacheKey struct {
	plan  *copyPlan // the memoized plan: the table definition and columns read
	chunk memcat.ChunkKey
}

// SetCopyCacheBytes replaces the executor's binary COPY cache by an empty
// one holding at most n bytes of messages; 0 turns it off. It must be
// called before the executor serves (server.CopyCacheExecutor).
func (ex *Executor) SetCopyCacheBytes(n int) {
	ex.copies = nil
	if n > 0 {
		ex.copies = newCopyCache(n)
	}
}

// CopyCacheStats reports the executor's binary COPY cache: chunks sent
// from it and encoded anew since the start, and the message bytes it
// holds (server.CopyCacheExecutor, for the metrics).
func (ex *Executor) CopyCacheStats() (hits, misses, bytes int64) {
	c := ex.copies
	if c == nil {
		return 0, 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits.Load(), c.misses.Load(), int64(c.curBytes + c.prevBytes)
}

func newCopyCache(budget int) *copyCache {
	return &copyCache{half: budget / 2, cur: map[copyCacheKey][]byte{}}
}

func (c *copyCache) get(k copyCacheKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.cur[k]; ok {
		c.hits.Add(1)
		return b, true
	}
	if b, ok := c.prev[k]; ok {
		c.putLocked(k, b) // moves it up
		c.hits.Add(1)
		return b, true
	}
	c.misses.Add(1)
	return nil, false
}

func (c *copyCache) put(k copyCacheKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, b)
}

func (c *copyCache) putLocked(k copyCacheKey, b []byte) {
	// Two sessions that missed the same chunk both put it: the second
	// replaces the first.
	if old, ok := c.cur[k]; ok {
		c.curBytes -= len(old)
	}
	if old, ok := c.prev[k]; ok {
		delete(c.prev, k)
		c.prevBytes -= len(old)
	}
	if c.curBytes+len(b) > c.half {
		c.prev, c.cur = c.cur, make(map[copyCacheKey][]byte, len(c.cur))
		c.prevBytes, c.curBytes = c.curBytes, 0
	}
	c.cur[k] = b
	c.curBytes += len(b)
}

// cacheable reports whether a COPY of a table of rows rows, whose rows
// would take about bytes of messages each, should go through the cache: a
// table that would fill more than a quarter of it (a million data files)
// is sent without it, lest every scan of it evict everything else and
// copy its own bytes into the cache for nothing.
func (c *copyCache) cacheable(rows int, bytes float64) bool {
	return bytes*float64(rows) <= float64(c.half)/2
}

// messageAppender is where a COPY's rows go when they may come from the
// cache: pgwire's CopyOut.
type messageAppender interface {
	rowAppender
	AppendMessages(msgs []byte, rows int) error
}

// copyChunks is copyRows over src's chunks: through the cache when the
// table is small enough for it (see above), sending each chunk from the
// cache when the same plan sent it before and putting the chunks it
// encodes there; else encoded by workers when the table is large
// (copyparallel.go). A row that fails to encode ends the COPY as copyRows
// does: the rows before it are sent, the error names it. Without chunks it
// is copyRows.
func (p *copyPlan) copyChunks(co messageAppender, src encodedSource) error {
	if src.chunks == nil {
		return p.copyRows(co, src.scan)
	}
	cache := src.cache
	if p.tmpl == nil || cache == nil || !cache.cacheable(src.rows, p.messageBytes(src.chunks)) {
		if workers := copyWorkers(src.rows); workers > 1 {
			return p.copyParallel(co, src.chunks, workers, parallelBatchRows)
		}
		return p.copyRows(co, src.scan)
	}
	w := &tupleWriter{p: p}
	appendFn := w.append
	var msgs []byte
	var err error
	src.chunks(func(ch memcat.Chunk) bool {
		if ch.Len() < minCachedChunk {
			err = p.sendChunk(co, w, appendFn, ch)
			return err == nil
		}
		k := copyCacheKey{plan: p.tmpl, chunk: ch.Key()}
		if b, ok := cache.get(k); ok {
			err = co.AppendMessages(b, ch.Len())
			return err == nil
		}
		var ok bool
		if msgs, ok = p.encodeChunk(msgs[:0], w, ch); !ok {
			// A row that does not encode: the chunk goes row by row, as
			// copyRows sends it, up to that row's error; nothing is cached.
			err = p.sendChunk(co, w, appendFn, ch)
			return err == nil
		}
		cache.put(k, append([]byte(nil), msgs...))
		err = co.AppendMessages(msgs, ch.Len())
		return err == nil
	})
	return err
}

// messageBytes estimates the bytes of a row's CopyData message from the
// first chunk's stored rows: about the row's bytes plus the frame, the
// tuple header and a length per column.
func (p *copyPlan) messageBytes(chunks func(fn func(memcat.Chunk) bool)) float64 {
	per := 0.0
	chunks(func(ch memcat.Chunk) bool {
		stored := 0
		for i := 0; i < ch.Len(); i++ {
			_, r := ch.Row(i)
			stored += len(r)
		}
		per = float64(stored) / float64(ch.Len())
		return false
	})
	return per + float64(7+4*len(p.out))
}

// sendChunk sends the rows of ch as copyRows does (sendRow).
func (p *copyPlan) sendChunk(co rowAppender, w *tupleWriter, appendFn func([]byte) []byte, ch memcat.Chunk) error {
	ch.Touch()
	for i := 0; i < ch.Len(); i++ {
		ctid, r := ch.Row(i)
		if err := p.sendRow(co, w, appendFn, int64(ctid), r); err != nil {
			return err
		}
	}
	return nil
}

// encodeChunk appends the CopyData messages of ch's rows to msgs
// (pgwire.AppendCopyData); ok is false if a row does not decode or does
// not encode.
func (p *copyPlan) encodeChunk(msgs []byte, w *tupleWriter, ch memcat.Chunk) (_ []byte, ok bool) {
	ch.Touch()
	for i := 0; i < ch.Len(); i++ {
		ctid, r := ch.Row(i)
		if p.Walk(r) != nil {
			return msgs, false
		}
		w.r, w.ctid, w.err = r, int64(ctid), nil
		if msgs = pgwire.AppendCopyData(msgs, w.append); w.err != nil {
			return msgs, false
		}
	}
	return msgs, true
}
