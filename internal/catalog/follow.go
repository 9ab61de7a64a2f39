package catalog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// A replica follows the writer commit by commit: each batch the writer
// committed (its keyspace pairs, read back from the WAL) is applied to the
// databases' current versions and published as their next versions, as a
// load of the store after that batch would build them — the same rows in
// every table, so the same answers to every query. It never reads the
// whole store. Databases and metadata schemas are created and dropped as
// the registry records them. What the follower cannot apply this way (a
// metadata schema dropped from a database that keeps others, a table
// definition altered in place) is refused with ErrCannotFollow before
// anything is published, and the replica rebuilds from a snapshot instead.
//
// The keyspace key of a row is a pure function of its values, so a put or
// a delete names its row: a put of a key the table holds replaces that row
// (and its embedded children), a put of a new key inserts, a delete removes
// the row with that key. Rows are found through the table's primary key or
// lookup index, narrowed by the values the key holds, and confirmed by
// recomputing their key. ctids are the replica's own: the heap is laid out
// by the replica's history (its load, then each batch in order), and a
// replica refuses the writes that would use them.

// ErrCannotFollow is returned by ApplyCommitted for a batch the follower
// does not apply commit by commit; nothing of it was applied.
var ErrCannotFollow = errors.New("catalog: batch cannot be followed commit by commit")

// PairOp is one operation of a committed batch: a keyspace pair put, or
// its key deleted (Value nil).
type PairOp struct {
	Key, Value []byte
	Delete     bool
}

// followCat is one catalog (database, metadata schema) a batch touches.
type followCat struct {
	db     *Database // nil for a database the batch creates
	dbName string
	schema string
	b      *builder
}

// ApplyCommitted applies one committed batch to the databases it touches
// and publishes each one's next version. The server must be a follower's:
// nothing else may commit or publish on it meanwhile.
func (s *Server) ApplyCommitted(ops []PairOp) error {
	cats := map[uint32]*followCat{}
	for _, name := range s.Databases() {
		db, ok := s.Lookup(name)
		if !ok {
			continue
		}
		for _, sc := range db.Current().Schemas() {
			cats[sc.CatalogID] = &followCat{db: db, dbName: name, schema: sc.Name}
		}
	}
	if s.follow == nil {
		s.follow = newFollowState()
	}
	f := &follower{srv: s, st: s.follow, cats: cats, codecs: map[*TableInfo]*keyspace.Table{}, dropping: map[string]bool{}}
	// Definitions first (a new table's rows follow in the same batch),
	// then deletes, then puts (an UPDATE that moves a row between keys is
	// a delete and a put; applying every delete first keeps a primary key
	// from being held twice in between), then dropped definitions.
	var regs, defs, dels, puts, drops []PairOp
	for _, o := range ops {
		if len(o.Key) < 5 {
			return fmt.Errorf("%w: key %x too short", ErrCorrupt, o.Key)
		}
		kind := keyspace.Kind(o.Key[4])
		switch {
		case kind.IsRowKind() && o.Delete:
			dels = append(dels, o)
		case kind.IsRowKind():
			puts = append(puts, o)
		case kind == keyspace.KindTableDef && o.Delete:
			drops = append(drops, o)
		case kind == keyspace.KindTableDef:
			defs = append(defs, o)
		case kind == keyspace.KindRegistry && o.Delete:
			if err := f.dropDatabase(o); err != nil {
				return err
			}
		case kind == keyspace.KindRegistry:
			regs = append(regs, o)
		case kind == keyspace.KindMeta:
			if err := f.meta(o); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %v record %s", ErrCannotFollow, kind, keyspace.FormatKey(o.Key))
		}
	}
	steps := []struct {
		ops   []PairOp
		apply func(PairOp) error
	}{{regs, f.register}, {defs, f.define}, {dels, f.deleteRow}, {puts, f.putRow}, {drops, f.drop}}
	for _, st := range steps {
		for _, o := range st.ops {
			if f.droppedKey(o.Key) {
				continue // its database goes as a whole
			}
			if err := st.apply(o); err != nil {
				return err
			}
		}
	}
	// Publish in catalog id order, every database once; then forget the
	// dropped ones.
	ids := make([]uint32, 0, len(cats))
	for id, c := range cats {
		if c.b != nil && !f.dropping[c.dbName] {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	done := map[string]bool{}
	for _, id := range ids {
		c := cats[id]
		if done[c.dbName] {
			continue
		}
		done[c.dbName] = true
		if c.db == nil {
			v := c.b.finish()
			v.seq = 0
			s.mu.Lock()
			s.mu.dbs[c.dbName] = newDatabase(c.dbName, s, v)
			s.mu.Unlock()
			continue
		}
		if err := c.db.Publish(c.b.base, c.b.finish()); err != nil {
			return fmt.Errorf("publish %s: %w", c.db.name, err)
		}
	}
	for name := range f.dropping {
		s.Forget(name)
	}
	if f.nextID > 0 {
		for {
			cur := s.nextCatalogID.Load()
			if cur >= f.nextID || s.nextCatalogID.CompareAndSwap(cur, f.nextID) {
				break
			}
		}
	}
	return nil
}

type follower struct {
	srv      *Server
	st       *followState
	cats     map[uint32]*followCat
	codecs   map[*TableInfo]*keyspace.Table
	nextID   uint32
	dropping map[string]bool // databases the batch drops
}

// registryKey decodes a registry key: (database, metadata schema).
func registryKey(key []byte) (db, schema string, err error) {
	r := keyspace.NewKeyReader(key)
	r.Uint32()
	r.Byte()
	db, _ = r.String()
	schema, _ = r.String()
	if err := r.Done(); err != nil {
		return "", "", fmt.Errorf("%w: registry key: %v", ErrCorrupt, err)
	}
	return db, schema, nil
}

// dropDatabase notes a registry key deleted: its database is dropped (a
// database loses all its catalogs at once; losing one of several is not
// followed).
func (f *follower) dropDatabase(o PairOp) error {
	db, schema, err := registryKey(o.Key)
	if err != nil {
		return err
	}
	d, ok := f.srv.Lookup(db)
	if !ok {
		return fmt.Errorf("%w: registry of unknown database %q dropped", ErrCannotFollow, db)
	}
	if _, ok := d.Current().Schema(schema); !ok {
		return fmt.Errorf("%w: registry of unknown catalog %s.%s dropped", ErrCannotFollow, db, schema)
	}
	f.dropping[db] = true
	return nil
}

// droppedKey reports a key of a catalog whose database the batch drops.
func (f *follower) droppedKey(key []byte) bool {
	if len(f.dropping) == 0 || len(key) < 4 {
		return false
	}
	c, ok := f.cats[keyspaceCatalogID(key)]
	return ok && f.dropping[c.dbName]
}

// register follows a registry key put: a database created (with its
// catalog ids as the writer allocated them) or a metadata schema added.
func (f *follower) register(o PairOp) error {
	db, schema, cid, err := keyspace.DecodeRegistry(o.Key, o.Value)
	if err != nil {
		return err
	}
	if f.dropping[db] {
		return fmt.Errorf("%w: database %q dropped and created in one batch", ErrCannotFollow, db)
	}
	if c, ok := f.cats[cid]; ok {
		if c.dbName == db && c.schema == schema {
			return nil
		}
		return fmt.Errorf("%w: catalog %d moved to %s.%s", ErrCannotFollow, cid, db, schema)
	}
	var b *builder
	var d *Database
	for _, c := range f.cats {
		if c.dbName == db {
			if _, err := f.cat(keyFor(f.cats, c)); err != nil {
				return err
			}
			b, d = c.b, c.db
			break
		}
	}
	if b == nil {
		if _, ok := f.srv.Lookup(db); ok {
			return fmt.Errorf("%w: database %q has no loaded catalog", ErrCannotFollow, db)
		}
		b = newBuilder(newVersion())
	}
	if _, err := b.createSchema(schema, cid); err != nil {
		return err
	}
	f.cats[cid] = &followCat{db: d, dbName: db, schema: schema, b: b}
	f.nextID = max(f.nextID, cid+1) // as a load derives it
	return nil
}

// keyFor is the catalog id of c in cats.
func keyFor(cats map[uint32]*followCat, c *followCat) uint32 {
	for id, o := range cats {
		if o == c {
			return id
		}
	}
	return 0
}

// cat returns catalog id's state with its builder; the builder is shared by
// every catalog of one database.
func (f *follower) cat(id uint32) (*followCat, error) {
	c, ok := f.cats[id]
	if !ok {
		return nil, fmt.Errorf("%w: catalog %d is not loaded", ErrCannotFollow, id)
	}
	if c.b == nil {
		for _, o := range f.cats {
			if o.dbName == c.dbName && o.b != nil {
				c.b = o.b
				return c, nil
			}
		}
		c.b = newBuilder(c.db.Current())
	}
	return c, nil
}

func (f *follower) meta(o PairOp) error {
	if bytes.Equal(o.Key, keyspace.NextCatalogIDKey()) && !o.Delete {
		n, err := keyspace.DecodeNextCatalogID(o.Value)
		if err != nil {
			return err
		}
		f.nextID = max(f.nextID, n)
	}
	return nil // a catalog's head belongs to the commit layer
}

// codec is the keyspace codec of t's current definition.
func (f *follower) codec(t *Table) (*keyspace.Table, error) {
	if kt, ok := f.codecs[t.info]; ok {
		return kt, nil
	}
	kt, err := keyspace.NewTable(t.info.Def)
	if err != nil {
		return nil, err
	}
	f.codecs[t.info] = kt
	return kt, nil
}

func (f *follower) define(o PairOp) error {
	cid, def, err := keyspace.DecodeTableDef(o.Key, o.Value)
	if err != nil {
		return err
	}
	c, err := f.cat(cid)
	if err != nil {
		return err
	}
	if def.Schema != c.schema {
		return fmt.Errorf("%w: table %s.%s stored in catalog %d of schema %s", ErrCorrupt, def.Schema, def.Name, cid, c.schema)
	}
	if t, err := c.b.peek(c.schema, def.Name); err == nil {
		if sameDef(&t.info.Def, &def) {
			return nil
		}
		return fmt.Errorf("%w: table %s.%s altered", ErrCannotFollow, def.Schema, def.Name)
	}
	if _, err := keyspace.NewTable(def); err != nil {
		return err
	}
	_, err = c.b.createTable(def)
	return err
}

func sameDef(a, b *keyspace.TableDef) bool {
	return bytes.Equal(keyspace.EncodeTableDef(a), keyspace.EncodeTableDef(b))
}

func (f *follower) drop(o PairOp) error {
	r := keyspace.NewKeyReader(o.Key)
	cid := r.Uint32()
	r.Byte()
	name, _ := r.String()
	if err := r.Done(); err != nil {
		return fmt.Errorf("%w: table definition key: %v", ErrCorrupt, err)
	}
	c, err := f.cat(cid)
	if err != nil {
		return err
	}
	t, err := c.b.dropTable(c.schema, name)
	if err == nil {
		delete(f.st.idx, t.info)
	}
	return err
}

// rowTable resolves a row key to its catalog, table and codec.
func (f *follower) rowTable(key []byte) (*followCat, *Table, *keyspace.Table, error) {
	cid, name, err := keyspace.RowKeyTable(key)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := f.cat(cid)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := c.b.peek(c.schema, name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: row of %s: %v", ErrCorrupt, name, err)
	}
	kt, err := f.codec(t)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, t, kt, nil
}

// find returns the ctid of t's row whose key is key.
func (f *follower) find(c *followCat, cid uint32, t *Table, kt *keyspace.Table, key []byte) (CTID, bool, error) {
	vals, err := kt.KeyValues(cid, key)
	if err != nil {
		return 0, false, err
	}
	var found CTID
	ok := false
	var kerr error
	var kb []byte
	check := func(c CTID, r datum.Row) bool {
		kb, kerr = kt.AppendKey(kb[:0], cid, r)
		if kerr == nil && bytes.Equal(kb, key) {
			found, ok = c, true
			return false
		}
		return kerr == nil
	}
	ti := t.info
	switch {
	case t.pk != nil && keyHolds(vals, ti.Def.PrimaryKey):
		pk := make([]datum.Value, len(ti.Def.PrimaryKey))
		for i, c := range ti.Def.PrimaryKey {
			pk[i] = vals[c]
		}
		if c, r, hit := t.LookupKey(pk); hit {
			check(c, r)
		}
	case t.look != nil && len(ti.lookCols) > 0 && !vals[ti.lookCols[0]].IsNull():
		var prefix []datum.Value
		for _, c := range ti.lookCols {
			if vals[c].IsNull() {
				break
			}
			prefix = append(prefix, vals[c])
		}
		if !t.LookupPrefix(prefix, check) {
			t.Scan(check)
		}
	default:
		idx, err := f.index(c, t, kt)
		if err != nil {
			return 0, false, err
		}
		idx.candidates(f.st.hash(key), func(cand CTID) bool {
			r, live := t.Lookup(cand)
			return !live || check(cand, r)
		})
	}
	return found, ok, kerr
}

// keyHolds reports whether every column of cols has a value in vals.
func keyHolds(vals []datum.Value, cols []int) bool {
	for _, c := range cols {
		if vals[c].IsNull() {
			return false
		}
	}
	return len(cols) > 0
}

func (f *follower) deleteRow(o PairOp) error {
	c, t, kt, err := f.rowTable(o.Key)
	if err != nil {
		return err
	}
	cid := keyspaceCatalogID(o.Key)
	ctid, ok, err := f.find(c, cid, t, kt, o.Key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s: no row with key %s", ErrCannotFollow, t.Name(), keyspace.FormatKey(o.Key))
	}
	old, err := f.delete(c, t.Name(), ctid, o.Key)
	if err != nil {
		return err
	}
	return f.dropChildren(c, kt, old)
}

func (f *follower) putRow(o PairOp) error {
	c, t, kt, err := f.rowTable(o.Key)
	if err != nil {
		return err
	}
	cid := keyspaceCatalogID(o.Key)
	e, err := keyspace.DecodeKV(o.Key, o.Value, func(id uint32, name string) (*keyspace.Table, bool) {
		if id == cid && name == t.Name() {
			return kt, true
		}
		return nil, false
	})
	if err != nil {
		return err
	}
	vals, err := e.Row.Decode(t.Types(), nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, t.Name(), err)
	}
	ctid, exists, err := f.find(c, cid, t, kt, o.Key)
	if err != nil {
		return err
	}
	if exists {
		old, err := f.delete(c, t.Name(), ctid, o.Key)
		if err != nil {
			return err
		}
		if err := f.dropChildren(c, kt, old); err != nil {
			return err
		}
	}
	if err := f.insert(c, t.Name(), vals, o.Key); err != nil {
		return err
	}
	if len(e.Children) == 0 {
		return nil
	}
	ct, err := c.b.peek(c.schema, e.ChildTable)
	if err != nil {
		return fmt.Errorf("%w: children of %s: %v", ErrCorrupt, t.Name(), err)
	}
	for _, r := range e.Children {
		cv, err := r.Decode(ct.Types(), nil)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, ct.Name(), err)
		}
		link, err := linkKey(r, ct.Types(), kt.ChildTable().Spec.ParentLink, 0)
		if err != nil {
			return err
		}
		if err := f.insert(c, ct.Name(), cv, []byte(link)); err != nil {
			return err
		}
	}
	return nil
}

// dropChildren deletes the embedded child rows of parent row (a data
// file's partition values, a partition spec's columns, a sort spec's
// expressions): they live and die with it.
func (f *follower) dropChildren(c *followCat, kt *keyspace.Table, parent datum.Row) error {
	ck := kt.ChildTable()
	if ck == nil {
		return nil
	}
	ct, err := c.b.peek(c.schema, ck.Def.Name)
	if err != nil {
		return nil // no child table in this catalog: no children
	}
	pt, err := c.b.peek(c.schema, kt.Def.Name)
	if err != nil {
		return err
	}
	want, err := linkKey(parent, pt.Types(), ck.Spec.ParentLink, 1)
	if err != nil {
		return err
	}
	idx, err := f.index(c, ct, nil)
	if err != nil {
		return err
	}
	var kids []CTID
	var lerr error
	seen := map[CTID]bool{}
	idx.candidates(f.st.hash([]byte(want)), func(cc CTID) bool {
		r, live := ct.Lookup(cc)
		if !live || seen[cc] {
			return true
		}
		seen[cc] = true
		var k string
		if k, lerr = linkKey(r, ct.Types(), ck.Spec.ParentLink, 0); lerr != nil {
			return false
		}
		if k == want {
			kids = append(kids, cc)
		}
		return true
	})
	if lerr != nil {
		return lerr
	}
	for _, cc := range kids {
		if _, err := f.delete(c, ct.Name(), cc, []byte(want)); err != nil {
			return err
		}
	}
	return nil
}

func keyspaceCatalogID(key []byte) uint32 {
	return uint32(key[0])<<24 | uint32(key[1])<<16 | uint32(key[2])<<8 | uint32(key[3])
}

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
	idx  map[*TableInfo]*rowIndex
}

func newFollowState() *followState {
	return &followState{seed: maphash.MakeSeed(), idx: map[*TableInfo]*rowIndex{}}
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
// rows at a replica's start) is scattered into 256 buckets by the hash's
// top byte, which are then sorted on every processor.
func sortHashed(e []hashedCTID) []hashedCTID {
	byHash := func(a, b hashedCTID) int { return cmp.Compare(a.h, b.h) }
	if len(e) < 1<<16 {
		slices.SortFunc(e, byHash)
		return e
	}
	var start [257]int
	for _, x := range e {
		start[x.h>>56+1]++
	}
	for i := 1; i <= 256; i++ {
		start[i] += start[i-1]
	}
	out := make([]hashedCTID, len(e))
	next := start
	for _, x := range e {
		b := x.h >> 56
		out[next[b]] = x
		next[b]++
	}
	buckets := make(chan int, 256)
	for b := range 256 {
		buckets <- b
	}
	close(buckets)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range buckets {
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
	idx := f.st.idx[t.info]
	if idx != nil && idx.t == t {
		return idx, nil
	}
	cid := uint32(0)
	for id, o := range f.cats {
		if o == c {
			cid = id
		}
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
	f.st.idx[t.info] = idx
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
	idx := f.st.idx[before.info]
	if idx == nil || idx.t != before {
		return
	}
	after, err := c.b.peek(c.schema, table)
	if err != nil {
		delete(f.st.idx, before.info)
		return
	}
	change(idx)
	idx.t = after
}

// AdoptFollow takes over the row indexes a follower's load built (Options
// Follow) after the caller published that load's versions into s (a
// replica's reload); the indexes s had describe nothing any more.
func (s *Server) AdoptFollow(loaded *Server) { s.follow = loaded.follow }
