package catalog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Iterator yields keyspace pairs in key order, as a store scan does. Key and
// Value are valid until the next call to Next; Load copies what it keeps.
type Iterator interface {
	Next() bool
	Key() []byte
	Value() []byte
	Err() error
}

// Pairs calls fn with every keyspace pair that represents the server's
// current state: the registry of catalogs and the next catalog id, then per
// catalog (by id) its head, its table definitions (by name) and its rows,
// table by table in ctid order, with embedded child rows inside their
// parents' values (keyspace.Table.Encode). Pairs of one table are in ctid
// order, not key order; a store sorts them. Every table must be a DuckLake
// shape (keyspace.ValidateDef) and every embedded row must have its parent.
// Branches are not in it: a branch is a record read at its own seq.
func (s *Server) Pairs(fn func(key, value []byte) error) error {
	type cat struct {
		id     uint32
		db     string
		schema *Schema
		v      *Version
	}
	var cats []cat
	for _, db := range s.primaries() {
		name := db.name
		v := db.Current()
		for _, sc := range v.Schemas() {
			cats = append(cats, cat{sc.CatalogID, name, sc, v})
		}
	}
	sort.Slice(cats, func(i, j int) bool { return cats[i].id < cats[j].id })
	for _, c := range cats {
		if err := fn(keyspace.RegistryKey(c.db, c.schema.Name), keyspace.EncodeRegistryValue(c.id)); err != nil {
			return err
		}
	}
	if err := fn(keyspace.NextCatalogIDKey(), keyspace.EncodeNextCatalogID(s.nextCatalogID.Load())); err != nil {
		return err
	}
	for _, c := range cats {
		if err := catalogPairs(c.id, c.db, c.schema, c.v, fn); err != nil {
			return fmt.Errorf("catalog %d (%s, %s): %w", c.id, c.db, c.schema.Name, err)
		}
	}
	return nil
}

// CatalogPairs calls fn with every keyspace pair of schema sc's catalog in
// v, as Pairs does for the whole server: the keys the store holds for that
// catalog (its registry key aside).
func (v *Version) CatalogPairs(dbName string, sc *Schema, fn func(key, value []byte) error) error {
	return catalogPairs(sc.CatalogID, dbName, sc, v, fn)
}

func catalogPairs(id uint32, dbName string, sc *Schema, v *Version, fn func(key, value []byte) error) error {
	tables := sc.Tables()
	// Commits is the commit layer's counter; the catalog does not know it.
	head := keyspace.Head{FormatVersion: keyspace.FormatVersion, Database: dbName, Schema: sc.Name}
	if st, ok := sc.Table("ducklake_snapshot"); ok {
		if _, r, ok := lastRow(st); ok {
			if val, err := r.Column(st.Types(), 0); err == nil && !val.IsNull() {
				head.Snapshot, head.HasSnapshot = val.Int(), true
			}
		}
	}
	if err := fn(keyspace.HeadKey(id), keyspace.EncodeHead(head)); err != nil {
		return err
	}
	codecs := map[string]*keyspace.Table{}
	for _, t := range tables {
		kt, err := keyspace.NewTable(t.info.Def)
		if err != nil {
			return fmt.Errorf("table %s: %w", t.Name(), err)
		}
		codecs[t.Name()] = kt
		if err := fn(keyspace.TableDefKey(id, t.Name()), keyspace.EncodeTableDef(&t.info.Def)); err != nil {
			return err
		}
	}
	for _, t := range tables {
		kt := codecs[t.Name()]
		if kt.Spec.Embedded() {
			continue
		}
		var children map[string][]datum.Row
		var childDone map[string]bool
		ct := kt.ChildTable()
		if ct != nil {
			tb, ok := sc.Table(ct.Def.Name)
			if ok {
				children = map[string][]datum.Row{}
				childDone = map[string]bool{}
				var err error
				tb.Scan(func(_ CTID, r datum.Row) bool {
					var k string
					if k, err = linkKey(r, tb.Types(), ct.Spec.ParentLink, 0); err != nil {
						return false
					}
					children[k] = append(children[k], r)
					return true
				})
				if err != nil {
					return fmt.Errorf("table %s: %w", ct.Def.Name, err)
				}
			}
		}
		var err error
		var key, val []byte
		t.Scan(func(_ CTID, r datum.Row) bool {
			var kids []datum.Row
			if children != nil {
				var k string
				if k, err = linkKey(r, t.Types(), ct.Spec.ParentLink, 1); err != nil {
					return false
				}
				kids = children[k]
				childDone[k] = true
			}
			if key, err = kt.AppendKey(key[:0], id, r); err != nil {
				return false
			}
			if val, err = kt.EncodeValue(val[:0], r, kids); err != nil {
				return false
			}
			err = fn(key, val)
			return err == nil
		})
		if err != nil {
			return fmt.Errorf("table %s: %w", t.Name(), err)
		}
		for k, rows := range children {
			if !childDone[k] {
				return fmt.Errorf("%w: %d rows of %s have no %s row", ErrCorrupt, len(rows), ct.Def.Name, t.Name())
			}
		}
	}
	return nil
}

func lastRow(t *Table) (CTID, datum.Row, bool) {
	var c CTID
	var r datum.Row
	ok := false
	t.rows.Reverse(func(it rowItem) bool { c, r, ok = it.ctid, it.row, true; return false })
	return c, r, ok
}

// linkKey encodes the parent-link columns of a row (side 0: the child's
// columns, 1: the parent's).
func linkKey(r datum.Row, types []datum.Type, link [][2]int, side int) (string, error) {
	var b []byte
	for _, l := range link {
		v, err := r.Column(types, l[side])
		if err != nil {
			return "", err
		}
		b = binary.AppendVarint(b, v.I)
		b = append(b, byte(v.K))
		b = append(b, v.S...)
		b = append(b, 0)
	}
	return string(b), nil
}

// arena hands out row storage from large slabs: one allocation per slab
// instead of one per row, which is most of the per-row overhead of a
// catalog of millions of small rows.
type arena struct{ slab []byte }

const slabSize = 1 << 20

func (a *arena) copy(b []byte) datum.Row {
	if len(b) > slabSize/8 {
		return append(datum.Row(nil), b...)
	}
	if len(a.slab)+len(b) > cap(a.slab) {
		a.slab = make([]byte, 0, slabSize)
	}
	n := len(a.slab)
	a.slab = append(a.slab, b...)
	return datum.Row(a.slab[n:len(a.slab):len(a.slab)])
}

// loader builds databases from keyspace pairs.
//
// Rows are decoded in parallel: the reading goroutine copies pairs into
// batches and hands each batch to a worker (DecodeKV, row decode, tuple
// size, primary key, copy into the worker's slab) and, in read order, to
// the applying goroutine, which waits for the batch and places its rows
// (ctids, B-trees) one by one. So the result is exactly what a sequential
// load in key order gives. Registry, meta and definition pairs are handled
// by the reader after every batch in flight has been applied.
type loader struct {
	srv  *Server
	dbs  map[string]*builder
	cats map[uint32]*loadCat
	// hashed collects, with Options.Follow, each unindexed table's
	// follower index entries (applier only).
	hashed map[*Table][]hashedCTID
	// branches are the branch records met, loaded once the rest is;
	// owned are the catalog ids writable ones store their writes under.
	branches []pendingBranch
	owned    map[uint32]bool
}

type loadCat struct {
	b      *builder
	schema string
	codecs map[string]*keyspace.Table
	tables map[string]*Table
}

// loadBatchPairs bounds a batch; loadBatchBytes bounds its copied bytes.
const (
	loadBatchPairs = 2048
	loadBatchBytes = 1 << 20
)

type loadBatch struct {
	buf  []byte
	offs [][4]int // key offset, key length, value offset, value length
	out  []loadedRow
	err  error
	done chan struct{}
}

func (b *loadBatch) key(i int) []byte { o := b.offs[i]; return b.buf[o[0] : o[0]+o[1]] }
func (b *loadBatch) val(i int) []byte { o := b.offs[i]; return b.buf[o[2] : o[2]+o[3]] }

type loadedRow struct {
	cat *loadCat
	t   *Table
	// h is the row's follower index hash (Options.Follow), for a table
	// without a primary key or lookup index.
	h    uint64
	hash bool
	row  datum.Row
	tlen int
	key  string
	look string // lookup index key, when the table has one
}

// Load builds a Server from the keyspace pairs it yields (a full scan of a
// store): the registry creates each (database, schema) catalog, table
// definitions create its tables, and rows are inserted in key order, so a
// table's heap is laid out afresh (as after VACUUM FULL). Rows are copied
// into slab storage. Any pair that does not decode is an error wrapping
// ErrCorrupt or keyspace's ErrUnknownShape; nothing is returned then.
func Load(ctx context.Context, it Iterator, opts Options) (*Server, error) {
	l := &loader{srv: NewServer(opts), dbs: map[string]*builder{}, cats: map[uint32]*loadCat{}, hashed: map[*Table][]hashedCTID{}, owned: map[uint32]bool{}}
	if opts.Follow {
		l.srv.follow = newFollowState()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	workers := max(1, runtime.GOMAXPROCS(0))
	jobs := make(chan *loadBatch, workers*2)
	ordered := make(chan *loadBatch, workers*4)
	free := make(chan *loadBatch, workers*6+2) // applied batches, for reuse
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a arena
			var scratch []datum.Value
			for b := range jobs {
				if ctx.Err() == nil {
					scratch, b.err = l.decodeBatch(b, &a, scratch)
				}
				close(b.done)
			}
		}()
	}
	// The applier; applied counts batches placed, for the reader's barriers.
	var applyErr error
	var applied sync.WaitGroup
	applierDone := make(chan struct{})
	go func() {
		defer close(applierDone)
		for b := range ordered {
			<-b.done
			if applyErr == nil {
				if b.err != nil {
					applyErr = b.err
				} else {
					applyErr = l.applyBatch(b)
				}
				if applyErr != nil {
					cancel()
				}
			}
			b.buf, b.offs, b.out = b.buf[:0], b.offs[:0], b.out[:0]
			select {
			case free <- b:
			default:
			}
			applied.Done()
		}
	}()
	finish := func() error {
		close(jobs)
		close(ordered)
		wg.Wait()
		<-applierDone
		return applyErr
	}

	var maxID uint32
	nextID := uint32(1)
	// A batch's buffers are made at full size once (grown by appends, the
	// reader — the one goroutine every pair passes through — spent a fifth
	// of a large load copying them) and recycled once the batch is
	// applied: a fresh megabyte per batch, page-faulted and zeroed, was a
	// third of a large load's CPU.
	newBatch := func() *loadBatch {
		var b *loadBatch
		select {
		case b = <-free:
		default:
			b = &loadBatch{buf: make([]byte, 0, loadBatchBytes+loadBatchBytes/8), offs: make([][4]int, 0, loadBatchPairs)}
		}
		b.done, b.err = make(chan struct{}), nil
		return b
	}
	cur := newBatch()
	flush := func() {
		if len(cur.offs) == 0 {
			return
		}
		applied.Add(1)
		jobs <- cur
		ordered <- cur
		cur = newBatch()
	}
	// barrier waits until every dispatched batch has been applied.
	barrier := func() error {
		flush()
		applied.Wait()
		return applyErr
	}
	fail := func(err error) (*Server, error) {
		cancel()
		if ferr := finish(); ferr != nil && !errors.Is(ferr, context.Canceled) {
			return nil, ferr
		}
		return nil, err
	}
	for it.Next() {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		key, val := it.Key(), it.Value()
		if len(key) < 5 {
			return fail(fmt.Errorf("%w: key %x too short", ErrCorrupt, key))
		}
		if l.owned[binary.BigEndian.Uint32(key)] {
			continue // a writable branch's own keys: loadBranch reads them
		}
		kind := keyspace.Kind(key[4])
		if kind.IsRowKind() {
			o := [4]int{len(cur.buf), len(key), 0, len(val)}
			cur.buf = append(cur.buf, key...)
			o[2] = len(cur.buf)
			cur.buf = append(cur.buf, val...)
			cur.offs = append(cur.offs, o)
			if len(cur.offs) >= loadBatchPairs || len(cur.buf) >= loadBatchBytes {
				flush()
			}
			continue
		}
		if err := barrier(); err != nil {
			return fail(err)
		}
		id := binary.BigEndian.Uint32(key)
		switch kind {
		case keyspace.KindRegistry:
			db, schema, cid, err := keyspace.DecodeRegistry(key, val)
			if err != nil {
				return fail(fmt.Errorf("load registry: %w", err))
			}
			b, ok := l.dbs[db]
			if !ok {
				b = newBuilder(newVersion())
				l.dbs[db] = b
			}
			if _, err := b.createSchema(schema, cid); err != nil {
				return fail(fmt.Errorf("load registry (%s, %s): %w", db, schema, err))
			}
			l.cats[cid] = &loadCat{b: b, schema: schema, codecs: map[string]*keyspace.Table{}, tables: map[string]*Table{}}
			maxID = max(maxID, cid)
		case keyspace.KindMeta:
			if id == keyspace.StoreCatalogID {
				v, err := keyspace.DecodeNextCatalogID(val)
				if err != nil {
					return fail(fmt.Errorf("load: %w", err))
				}
				nextID = v
			}
			// Catalog heads belong to the commit layer.
		case keyspace.KindBranch:
			name, rec, err := keyspace.DecodeBranch(key, val)
			if err != nil {
				return fail(fmt.Errorf("load branch: %w", err))
			}
			sq, ok := it.(interface{ Seq() uint64 })
			if !ok {
				return fail(fmt.Errorf("load branch %q: the store scan does not report seqs", name))
			}
			pb := pendingBranch{name: name, rec: rec, seq: sq.Seq()}
			if rec.Base != 0 {
				pb.seq = rec.Base
			}
			if rec.Writable() {
				rs, ok := it.(interface{ ReadSeq() uint64 })
				if !ok {
					return fail(fmt.Errorf("load branch %q: the store scan does not report its seq", name))
				}
				pb.at = rs.ReadSeq()
				for _, c := range rec.Catalogs {
					l.owned[c.OwnID] = true
					maxID = max(maxID, c.OwnID)
				}
			}
			l.branches = append(l.branches, pb)
		case keyspace.KindTableDef:
			cid, def, err := keyspace.DecodeTableDef(key, val)
			if err != nil {
				if c, ok := l.cats[cid]; ok && def.Name != "" && errors.Is(err, keyspace.ErrUnknownShape) {
					return fail(&keyspace.UnloadableTableError{Database: l.dbName(c.b), Schema: c.schema, Table: def.Name, Err: err})
				}
				return fail(fmt.Errorf("load table definition: %w", err))
			}
			c, ok := l.cats[cid]
			if !ok {
				return fail(fmt.Errorf("%w: table %s of unregistered catalog %d", ErrCorrupt, def.Name, cid))
			}
			if def.Schema != c.schema {
				return fail(fmt.Errorf("%w: table %s.%s stored in catalog %d of schema %s", ErrCorrupt, def.Schema, def.Name, cid, c.schema))
			}
			kt, err := keyspace.NewTable(def)
			if err != nil {
				return fail(fmt.Errorf("load table definition %s: %w", def.Name, err))
			}
			t, err := c.b.createTable(def)
			if err != nil {
				return fail(fmt.Errorf("load table definition %s: %w", def.Name, err))
			}
			c.codecs[def.Name] = kt
			c.tables[def.Name] = t
		default:
			return fail(fmt.Errorf("%w: key %x of unknown kind %v", keyspace.ErrUnknownShape, key, kind))
		}
	}
	if err := it.Err(); err != nil {
		return fail(fmt.Errorf("load: %w", err))
	}
	flush()
	if err := finish(); err != nil {
		return nil, err
	}
	l.srv.nextCatalogID.Store(max(nextID, maxID+1))
	for name, b := range l.dbs {
		if _, ok := b.v.schemas["public"]; !ok {
			b.createSchema("public", l.srv.allocCatalogID())
		}
		v := b.finish()
		v.seq = 0
		l.srv.mu.dbs[name] = newDatabase(name, l.srv, v)
	}
	if len(l.hashed) > 0 {
		cidOf := map[*Table]uint32{}
		for cid, c := range l.cats {
			for _, t := range c.tables {
				cidOf[t] = cid
			}
		}
		for t, base := range l.hashed {
			l.srv.follow.idx[idxKey{t.info, cidOf[t]}] = newRowIndex(t, base)
		}
	}
	for _, b := range l.branches {
		if err := l.srv.loadBranch(ctx, b, opts); err != nil {
			return nil, err
		}
	}
	return l.srv, nil
}

// decodeBatch decodes the rows of b (on a worker). It reads the catalogs'
// definition maps, which the reader only changes behind a barrier.
func (l *loader) decodeBatch(b *loadBatch, a *arena, scratch []datum.Value) ([]datum.Value, error) {
	if cap(b.out) < len(b.offs) {
		b.out = make([]loadedRow, 0, len(b.offs))
	}
	b.out = b.out[:0]
	// Keys come in order, so consecutive rows are nearly always of one
	// table: its codec and table are remembered instead of looked up by
	// name for every row.
	var c *loadCat
	var memo struct {
		c    *loadCat
		name string
		kt   *keyspace.Table
		t    *Table
	}
	defs := func(_ uint32, name string) (*keyspace.Table, bool) {
		if memo.c == c && memo.name == name {
			return memo.kt, true
		}
		kt, ok := c.codecs[name]
		if ok {
			memo.c, memo.name, memo.kt, memo.t = c, name, kt, nil
		}
		return kt, ok
	}
	for i := range b.offs {
		key, val := b.key(i), b.val(i)
		id := binary.BigEndian.Uint32(key)
		var ok bool
		if c, ok = l.cats[id]; !ok {
			return scratch, fmt.Errorf("%w: row of unregistered catalog %d", ErrCorrupt, id)
		}
		e, vals, err := keyspace.DecodeKVValues(key, val, defs, scratch)
		scratch = vals
		if err != nil {
			return scratch, fmt.Errorf("load: %w", err)
		}
		t := memo.t
		if memo.c != c || memo.name != e.Table || t == nil {
			if t, ok = c.tables[e.Table]; !ok {
				return scratch, fmt.Errorf("%w: row of %s, which the catalog has no definition of", ErrCorrupt, e.Table)
			}
			if memo.c == c && memo.name == e.Table {
				memo.t = t
			}
		}
		if err = placeLoaded(b, a, c, t, e.Row, vals); err != nil {
			return scratch, err
		}
		if f := l.srv.follow; f != nil && !indexed(b.out[len(b.out)-1].t) {
			b.out[len(b.out)-1].h, b.out[len(b.out)-1].hash = f.hash(key), true
		}
		for _, r := range e.Children {
			if scratch, err = decodeLoaded(b, a, c, e.ChildTable, r, scratch); err != nil {
				return scratch, err
			}
			if f := l.srv.follow; f != nil && !indexed(b.out[len(b.out)-1].t) {
				lr := &b.out[len(b.out)-1]
				link, err := linkKey(lr.row, lr.t.Types(), c.codecs[e.Table].ChildTable().Spec.ParentLink, 0)
				if err != nil {
					return scratch, fmt.Errorf("load: %w", err)
				}
				lr.h, lr.hash = f.hash([]byte(link)), true
			}
		}
	}
	return scratch, nil
}

// decodeLoaded decodes a stored row of table and adds it to the batch.
func decodeLoaded(b *loadBatch, a *arena, c *loadCat, table string, r datum.Row, scratch []datum.Value) ([]datum.Value, error) {
	t, ok := c.tables[table]
	if !ok {
		return scratch, fmt.Errorf("%w: row of %s, which the catalog has no definition of", ErrCorrupt, table)
	}
	vals, err := r.Decode(t.info.types, scratch[:0])
	if err != nil {
		return vals, fmt.Errorf("%w: %s: %v", ErrCorrupt, table, err)
	}
	return vals, placeLoaded(b, a, c, t, r, vals)
}

// placeLoaded adds a stored row of t, whose stored columns decode to vals
// (the table's later columns are NULL), to the batch. vals may be extended
// in place.
func placeLoaded(b *loadBatch, a *arena, c *loadCat, t *Table, r datum.Row, vals []datum.Value) error {
	ti := t.info
	if len(vals) > len(ti.types) {
		return fmt.Errorf("%w: %s: %d columns stored, table has %d", ErrCorrupt, ti.Def.Name, len(vals), len(ti.types))
	}
	for len(vals) < len(ti.types) {
		vals = append(vals, datum.Null)
	}
	lr := loadedRow{cat: c, t: t, row: a.copy(r), tlen: ti.tupleLen(vals)}
	if t.pk != nil {
		lr.key = ti.pkKeyOf(vals)
	}
	if t.look != nil {
		lr.look = ti.lookKeyOf(vals)
	}
	b.out = append(b.out, lr)
	return nil
}

// applyBatch places decoded rows in order (on the applier).
func (l *loader) applyBatch(b *loadBatch) error {
	for i := range b.out {
		r := &b.out[i]
		t := r.t
		ct := t.heap.insert(r.tlen)
		t.rows.Load(rowItem{ct, r.row})
		if t.pk != nil {
			// One descent: a replaced entry is a duplicate key, and the
			// load is abandoned, so the damage done by Set does not matter.
			if _, dup := t.pk.Set(pkItem{r.key, ct}); dup {
				vals, _ := r.row.Decode(t.info.types, nil)
				cols, vs := t.info.keyText(vals)
				return fmt.Errorf("%w: %v", ErrCorrupt, DuplicateKey(r.cat.schema, t.info.Def.Name, cols, vs))
			}
		}
		if t.look != nil {
			t.look.Set(lookItem{r.look, ct})
		}
		if r.hash {
			l.hashed[t] = append(l.hashed[t], hashedCTID{r.h, ct})
		}
	}
	return nil
}

// SliceIterator iterates over pairs held in memory (tests and tools).
type SliceIterator struct {
	Pairs [][2][]byte
	i     int
}

func (s *SliceIterator) Next() bool    { s.i++; return s.i <= len(s.Pairs) }
func (s *SliceIterator) Key() []byte   { return s.Pairs[s.i-1][0] }
func (s *SliceIterator) Value() []byte { return s.Pairs[s.i-1][1] }
func (s *SliceIterator) Err() error    { return nil }

// dbName is the database a builder loads.
func (l *loader) dbName(b *builder) string {
	for name, db := range l.dbs {
		if db == b {
			return name
		}
	}
	return ""
}
