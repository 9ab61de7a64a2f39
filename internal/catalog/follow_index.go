package catalog

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// The follower's row indexes. A table with a primary key or a lookup index
// is searched through it; any other table — most rows of a big catalog are
// in one, ducklake_file_column_stats — gets a hash index of its own on the
// follower: row key (for an embedded child table, its parent link) hash →
// ctids. It is built on first use from the table version it describes and
// kept up to date by every insert and delete the follower makes; a table
// replaced by anything else (a reload, DDL) is noticed as another version
// and indexed afresh. Candidates are always confirmed against the row.

type followState struct {
	seed maphash.Seed
	// idx is by table definition and catalog id: a branch shares its
	// parent's tables, but its keys carry its own catalog id.
	idx map[idxKey]*rowIndex
}

func newFollowState() *followState {
	return &followState{seed: maphash.MakeSeed(), idx: map[idxKey]*rowIndex{}}
}

// forget drops the row indexes of the catalogs dropped reports (those of a
// dropped database): they would hold its tables for as long as the
// follower runs.
func (st *followState) forget(dropped func(cid uint32) bool) {
	for k := range st.idx {
		if dropped(k.cid) {
			delete(st.idx, k)
		}
	}
}

type idxKey struct {
	info *TableInfo
	cid  uint32
}

// rowIndex is one table's: base holds (hash, ctid) of the rows it was built
// from, sorted; delta what the follower inserted since. Entries of rows
// deleted since stay in base (a lookup confirms every candidate against
// the row, and a ctid reused for another row fails that).
type rowIndex struct {
	t     *Table // the table version the index describes
	base  []hashedCTID
	delta map[uint64][]CTID
}

type hashedCTID struct {
	h uint64
	c CTID
}

func newRowIndex(t *Table, base []hashedCTID) *rowIndex {
	return &rowIndex{t: t, base: sortHashed(base), delta: map[uint64][]CTID{}}
}

// sortHashed sorts entries by hash. A big index (millions of statistics
// rows at a replica's start) is scattered into 65536 buckets by the hash's
// top 16 bits, which are then sorted on every processor: a bucket holds a
// few hundred entries, so the sorting is a few comparisons per entry.
func sortHashed(e []hashedCTID) []hashedCTID {
	byHash := func(a, b hashedCTID) int { return cmp.Compare(a.h, b.h) }
	if len(e) < 1<<16 {
		slices.SortFunc(e, byHash)
		return e
	}
	const shift, buckets = 48, 1 << 16
	start := make([]int, buckets+1)
	for _, x := range e {
		start[x.h>>shift+1]++
	}
	for i := 1; i <= buckets; i++ {
		start[i] += start[i-1]
	}
	out := make([]hashedCTID, len(e))
	next := slices.Clone(start)
	for _, x := range e {
		b := x.h >> shift
		out[next[b]] = x
		next[b]++
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < buckets; b += workers {
				slices.SortFunc(out[start[b]:start[b+1]], byHash)
			}
		}()
	}
	wg.Wait()
	return out
}

// candidates calls fn with every ctid that may hold a row hashing to h,
// until fn returns false.
func (idx *rowIndex) candidates(h uint64, fn func(CTID) bool) {
	for _, c := range idx.delta[h] {
		if !fn(c) {
			return
		}
	}
	i, _ := slices.BinarySearchFunc(idx.base, h, func(e hashedCTID, h uint64) int { return cmp.Compare(e.h, h) })
	for ; i < len(idx.base) && idx.base[i].h == h; i++ {
		if !fn(idx.base[i].c) {
			return
		}
	}
}

func (st *followState) hash(b []byte) uint64 { return maphash.Bytes(st.seed, b) }

// indexed reports whether t is searched through an index of its own.
func indexed(t *Table) bool { return t.pk != nil || t.look != nil }

// index returns the follower's index of table t (kt its codec; nil for an
// embedded child table, indexed by parent link), building it if missing or
// stale.
func (f *follower) index(c *followCat, t *Table, kt *keyspace.Table) (*rowIndex, error) {
	cid := keyFor(f.cats, c)
	idx := f.st.idx[idxKey{t.info, cid}]
	if idx != nil && idx.t == t {
		return idx, nil
	}
	keyOf, err := f.indexKey(t, kt, cid)
	if err != nil {
		return nil, err
	}
	base := make([]hashedCTID, 0, t.Len())
	var kerr error
	t.Scan(func(cc CTID, r datum.Row) bool {
		var k []byte
		if k, kerr = keyOf(r); kerr != nil {
			return false
		}
		base = append(base, hashedCTID{f.st.hash(k), cc})
		return true
	})
	if kerr != nil {
		return nil, kerr
	}
	idx = newRowIndex(t, base)
	f.st.idx[idxKey{t.info, cid}] = idx
	return idx, nil
}

// indexKey is how the index of t keys a row.
func (f *follower) indexKey(t *Table, kt *keyspace.Table, cid uint32) (func(datum.Row) ([]byte, error), error) {
	if kt != nil {
		return func(r datum.Row) ([]byte, error) { return kt.AppendKey(nil, cid, r) }, nil
	}
	spec, ok := keyspace.Known(t.Name())
	if !ok || !spec.Embedded() {
		return nil, fmt.Errorf("%w: no key for rows of %s", ErrCannotFollow, t.Name())
	}
	link := spec.ParentLink
	return func(r datum.Row) ([]byte, error) {
		k, err := linkKey(r, t.Types(), link, 0)
		return []byte(k), err
	}, nil
}

// insert inserts a row whose index key (row key or parent link) is key.
func (f *follower) insert(c *followCat, table string, vals []datum.Value, key []byte) error {
	before, err := c.b.peek(c.schema, table)
	if err != nil {
		return err
	}
	cc, _, err := c.b.insert(c.schema, table, vals)
	if err != nil {
		return err
	}
	f.track(c, before, table, func(idx *rowIndex) {
		h := f.st.hash(key)
		idx.delta[h] = append(idx.delta[h], cc)
	})
	return nil
}

// delete deletes the row at cc, whose index key is key, and returns it.
func (f *follower) delete(c *followCat, table string, cc CTID, key []byte) (datum.Row, error) {
	before, err := c.b.peek(c.schema, table)
	if err != nil {
		return nil, err
	}
	old, err := c.b.delete(c.schema, table, cc)
	if err != nil {
		return nil, err
	}
	f.track(c, before, table, func(idx *rowIndex) {
		h := f.st.hash(key)
		list := idx.delta[h]
		for i, x := range list {
			if x == cc {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(idx.delta, h)
		} else {
			idx.delta[h] = list
		}
	})
	return old, nil
}

// track applies change to the index of a table that was before (and is
// now the builder's own version) if the index describes before, and moves
// the index to the new version; an index of another version is left to be
// rebuilt.
func (f *follower) track(c *followCat, before *Table, table string, change func(*rowIndex)) {
	if indexed(before) {
		return
	}
	key := idxKey{before.info, keyFor(f.cats, c)}
	idx := f.st.idx[key]
	if idx == nil || idx.t != before {
		return
	}
	after, err := c.b.peek(c.schema, table)
	if err != nil {
		delete(f.st.idx, key)
		return
	}
	change(idx)
	idx.t = after
}

// AdoptFollow takes over the row indexes a follower's load built (Options
// Follow) after the caller published that load's versions into s (a
// replica's reload); the indexes s had describe nothing any more.
func (s *Server) AdoptFollow(loaded *Server) { s.follow = loaded.follow }
