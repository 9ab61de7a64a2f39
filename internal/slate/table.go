package slate

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/moraine-db/moraine/internal/objstore"
)

// table is an opened sorted table: its verified index and filter, loaded on
// first use and kept while the table is referenced.
type table struct {
	info   *sstInfo
	name   string
	mu     sync.Mutex
	loaded bool
	index  []indexEntry
	filter []byte
}

// tableCache holds opened tables and an LRU cache of decoded data blocks.
type tableCache struct {
	store objstore.Store

	mu     sync.Mutex
	tables map[string]*table

	blocks *blockCache
}

func newTableCache(store objstore.Store, blockCacheBytes int64) *tableCache {
	return &tableCache{store: store, tables: make(map[string]*table), blocks: newBlockCache(blockCacheBytes)}
}

// get returns the opened table for info, loading its index and filter.
func (c *tableCache) get(ctx context.Context, info *sstInfo) (*table, error) {
	c.mu.Lock()
	t, ok := c.tables[info.id]
	if !ok {
		t = &table{info: info, name: sstName(info.id)}
		c.tables[info.id] = t
	}
	c.mu.Unlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loaded {
		return t, nil
	}
	var raw []byte
	err := retryRead(ctx, func() (err error) {
		raw, err = c.store.GetRange(ctx, t.name, int64(info.indexOff), int64(info.indexLen))
		return err
	})
	if err != nil {
		return nil, readErr(t.name, err)
	}
	if len(raw) != int(info.indexLen) {
		return nil, corruptf(t.name, "index block truncated")
	}
	idx, err := decodeIndex(t.name, raw, info.indexOff)
	if err != nil {
		return nil, err
	}
	if last := idx[len(idx)-1]; last.off+uint64(last.length) != info.filterOff || !bytes.Equal(last.lastKey, info.lastKey) {
		return nil, corruptf(t.name, "index does not match table info")
	}
	err = retryRead(ctx, func() (err error) {
		raw, err = c.store.GetRange(ctx, t.name, int64(info.filterOff), int64(info.filterLen))
		return err
	})
	if err != nil {
		return nil, readErr(t.name, err)
	}
	if len(raw) != int(info.filterLen) {
		return nil, corruptf(t.name, "filter block truncated")
	}
	filter, err := decodeFilter(t.name, raw)
	if err != nil {
		return nil, err
	}
	t.index, t.filter, t.loaded = idx, filter, true
	return t, nil
}

// forget drops tables no longer referenced by the current manifest.
func (c *tableCache) retain(live map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.tables {
		if !live[id] {
			delete(c.tables, id)
		}
	}
}

// readErr turns a missing table into ErrCorrupt: the manifest says it exists.
func readErr(name string, err error) error {
	if isNotFound(err) {
		return corruptf(name, "referenced object is missing")
	}
	return fmt.Errorf("read %s: %w", name, err)
}

// readBlocks returns blocks [i, j) of t, verified. With cache set, blocks
// come from and go to the block cache (point reads); scans bypass it so a
// large scan does not evict the working set.
func (c *tableCache) readBlocks(ctx context.Context, t *table, i, j int, cache bool, reuse []*block) ([]*block, error) {
	out := make([]*block, 0, j-i)
	if cache {
		for ; i < j; i++ {
			b, ok := c.blocks.get(t.info.id, i)
			if !ok {
				break
			}
			out = append(out, b)
		}
		if i == j {
			return out, nil
		}
	}
	start := t.index[i].off
	end := t.index[j-1].off + uint64(t.index[j-1].length)
	var raw []byte
	err := retryRead(ctx, func() (err error) {
		raw, err = c.store.GetRange(ctx, t.name, int64(start), int64(end-start))
		return err
	})
	if err != nil {
		return nil, readErr(t.name, err)
	}
	if uint64(len(raw)) != end-start {
		return nil, corruptf(t.name, "data blocks truncated")
	}
	for k := i; k < j; k++ {
		ie := t.index[k]
		var old *block
		if !cache && len(reuse) > 0 {
			old, reuse = reuse[0], reuse[1:]
		}
		b, err := decodeBlockInto(t.name, raw[ie.off-start:ie.off-start+uint64(ie.length)], old)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(b.entries[len(b.entries)-1].key, ie.lastKey) {
			return nil, corruptf(t.name, "block %d does not match the index", k)
		}
		if cache {
			c.blocks.put(t.info.id, k, b, b.mem)
		}
		out = append(out, b)
	}
	return out, nil
}

// blockCache is a byte-bounded LRU of decoded blocks.
type blockCache struct {
	mu    sync.Mutex
	cap   int64
	used  int64
	lru   *list.List
	items map[blockKey]*list.Element
}

type blockKey struct {
	table string
	idx   int
}

type blockItem struct {
	key  blockKey
	b    *block
	size int64
}

func newBlockCache(capacity int64) *blockCache {
	return &blockCache{cap: capacity, lru: list.New(), items: make(map[blockKey]*list.Element)}
}

// size is the memory the cached blocks hold.
func (c *blockCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (c *blockCache) get(table string, idx int) (*block, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[blockKey{table, idx}]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*blockItem).b, true
}

func (c *blockCache) put(table string, idx int, b *block, size int64) {
	if c.cap <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := blockKey{table, idx}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.lru.PushFront(&blockItem{key: k, b: b, size: size})
	c.used += size
	for c.used > c.cap && c.lru.Len() > 1 {
		el := c.lru.Back()
		it := el.Value.(*blockItem)
		c.lru.Remove(el)
		delete(c.items, it.key)
		c.used -= it.size
	}
}

// scanReadahead is how many bytes of consecutive blocks a scan fetches with
// one ranged GET.
const scanReadahead = 256 << 10

// sstIter iterates one table in entry order.
type sstIter struct {
	ctx   context.Context
	c     *tableCache
	info  *sstInfo
	t     *table
	scan  bool
	bi    int      // index of the block at blocks[0]
	queue []*block // fetched blocks, queue[0] is current
	spent []*block // consumed scan blocks whose memory the next fetch reuses
	pos   int
	valid bool
}

func newSSTIter(ctx context.Context, c *tableCache, info *sstInfo, scan bool) *sstIter {
	return &sstIter{ctx: ctx, c: c, info: info, scan: scan}
}

// load positions at block bi, fetching it (and read-ahead when scanning).
func (it *sstIter) load(bi int) error {
	it.valid = false
	if bi >= len(it.t.index) {
		it.queue = nil
		return nil
	}
	j := bi + 1
	if it.scan {
		size := uint64(0)
		for j = bi; j < len(it.t.index) && (j == bi || size+uint64(it.t.index[j].length) <= scanReadahead); j++ {
			size += uint64(it.t.index[j].length)
		}
	}
	blocks, err := it.c.readBlocks(it.ctx, it.t, bi, j, !it.scan, it.spent)
	if err != nil {
		return err
	}
	it.spent = it.spent[:0]
	it.bi, it.queue, it.pos, it.valid = bi, blocks, 0, true
	return nil
}

func (it *sstIter) seek(key []byte) error {
	if it.t == nil {
		t, err := it.c.get(it.ctx, it.info)
		if err != nil {
			return err
		}
		it.t = t
	}
	bi := 0
	if key != nil {
		bi = sort.Search(len(it.t.index), func(i int) bool { return bytes.Compare(it.t.index[i].lastKey, key) >= 0 })
	}
	if err := it.load(bi); err != nil || !it.valid {
		return err
	}
	if key != nil {
		it.pos = it.queue[0].seek(key)
		if it.pos == len(it.queue[0].entries) {
			// Cannot happen for a verified block whose last key >= key.
			return corruptf(it.t.name, "block %d does not contain its index key", bi)
		}
	}
	return nil
}

func (it *sstIter) next() error {
	it.pos++
	if it.pos < len(it.queue[0].entries) {
		return nil
	}
	it.pos = 0
	if it.scan {
		// Scan blocks are private to this iterator; once consumed their
		// memory is recycled. The entry last returned stays valid until
		// the caller advances past the next fetch (Iterator.Key's
		// contract), and Iterator copies the key it compares against.
		it.spent = append(it.spent, it.queue[0])
	}
	it.queue = it.queue[1:]
	it.bi++
	if len(it.queue) > 0 {
		return nil
	}
	return it.load(it.bi)
}

func (it *sstIter) ok() bool     { return it.valid }
func (it *sstIter) cur() entry   { return it.queue[0].entries[it.pos] }
func (it *sstIter) close() error { return nil }

// runIter concatenates the tables of one sorted run.
type runIter struct {
	ctx    context.Context
	c      *tableCache
	tables []*sstInfo
	scan   bool
	ti     int
	sub    *sstIter
}

func (r *runIter) seek(key []byte) error {
	r.ti = 0
	if key != nil {
		r.ti = sort.Search(len(r.tables), func(i int) bool { return bytes.Compare(r.tables[i].lastKey, key) >= 0 })
	}
	return r.open(key)
}

func (r *runIter) open(key []byte) error {
	r.sub = nil
	if r.ti >= len(r.tables) {
		return nil
	}
	r.sub = newSSTIter(r.ctx, r.c, r.tables[r.ti], r.scan)
	return r.sub.seek(key)
}

func (r *runIter) next() error {
	if err := r.sub.next(); err != nil || r.sub.ok() {
		return err
	}
	r.ti++
	return r.open(nil)
}

func (r *runIter) ok() bool     { return r.sub != nil && r.sub.ok() }
func (r *runIter) cur() entry   { return r.sub.cur() }
func (r *runIter) close() error { return nil }
