package catalog

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

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
func (s *Server) Pairs(fn func(key, value []byte) error) error {
	type cat struct {
		id     uint32
		db     string
		schema *Schema
		v      *Version
	}
	var cats []cat
	for _, name := range s.Databases() {
		db, _ := s.Lookup(name)
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
type loader struct {
	srv     *Server
	dbs     map[string]*builder
	cats    map[uint32]*loadCat
	arena   arena
	scratch []datum.Value
}

type loadCat struct {
	b      *builder
	schema string
	codecs map[string]*keyspace.Table
	tables map[string]*Table
}

// Load builds a Server from the keyspace pairs it yields (a full scan of a
// store): the registry creates each (database, schema) catalog, table
// definitions create its tables, and rows are inserted in key order, so a
// table's heap is laid out afresh (as after VACUUM FULL). Rows are copied
// into slab storage. Any pair that does not decode is an error wrapping
// ErrCorrupt or keyspace's ErrUnknownShape; nothing is returned then.
func Load(ctx context.Context, it Iterator, opts Options) (*Server, error) {
	l := &loader{srv: NewServer(opts), dbs: map[string]*builder{}, cats: map[uint32]*loadCat{}}
	var maxID uint32
	nextID := uint32(1)
	n := 0
	for it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		key, val := it.Key(), it.Value()
		if len(key) < 5 {
			return nil, fmt.Errorf("%w: key %x too short", ErrCorrupt, key)
		}
		id := binary.BigEndian.Uint32(key)
		switch keyspace.Kind(key[4]) {
		case keyspace.KindRegistry:
			db, schema, cid, err := keyspace.DecodeRegistry(key, val)
			if err != nil {
				return nil, fmt.Errorf("load registry: %w", err)
			}
			b, ok := l.dbs[db]
			if !ok {
				b = newBuilder(newVersion())
				l.dbs[db] = b
			}
			if _, err := b.createSchema(schema, cid); err != nil {
				return nil, fmt.Errorf("load registry (%s, %s): %w", db, schema, err)
			}
			l.cats[cid] = &loadCat{b: b, schema: schema, codecs: map[string]*keyspace.Table{}, tables: map[string]*Table{}}
			maxID = max(maxID, cid)
		case keyspace.KindMeta:
			if id == keyspace.StoreCatalogID {
				v, err := keyspace.DecodeNextCatalogID(val)
				if err != nil {
					return nil, fmt.Errorf("load: %w", err)
				}
				nextID = v
			}
			// Catalog heads belong to the commit layer.
		case keyspace.KindTableDef:
			cid, def, err := keyspace.DecodeTableDef(key, val)
			if err != nil {
				return nil, fmt.Errorf("load table definition: %w", err)
			}
			c, ok := l.cats[cid]
			if !ok {
				return nil, fmt.Errorf("%w: table %s of unregistered catalog %d", ErrCorrupt, def.Name, cid)
			}
			if def.Schema != c.schema {
				return nil, fmt.Errorf("%w: table %s.%s stored in catalog %d of schema %s", ErrCorrupt, def.Schema, def.Name, cid, c.schema)
			}
			kt, err := keyspace.NewTable(def)
			if err != nil {
				return nil, fmt.Errorf("load table definition %s: %w", def.Name, err)
			}
			t, err := c.b.createTable(def)
			if err != nil {
				return nil, fmt.Errorf("load table definition %s: %w", def.Name, err)
			}
			c.codecs[def.Name] = kt
			c.tables[def.Name] = t
		default:
			if err := l.row(id, key, val); err != nil {
				return nil, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	l.srv.nextCatalogID.Store(max(nextID, maxID+1))
	for name, b := range l.dbs {
		if _, ok := b.v.schemas["public"]; !ok {
			b.createSchema("public", l.srv.allocCatalogID())
		}
		v := b.finish()
		v.seq = 0
		db := &Database{name: name, srv: l.srv}
		db.cur.Store(v)
		l.srv.mu.dbs[name] = db
	}
	return l.srv, nil
}

func (l *loader) row(id uint32, key, val []byte) error {
	c, ok := l.cats[id]
	if !ok {
		return fmt.Errorf("%w: row of unregistered catalog %d", ErrCorrupt, id)
	}
	e, err := keyspace.DecodeKV(key, val, func(_ uint32, name string) (*keyspace.Table, bool) {
		kt, ok := c.codecs[name]
		return kt, ok
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := l.insert(c, e.Table, e.Row); err != nil {
		return err
	}
	for _, r := range e.Children {
		if err := l.insert(c, e.ChildTable, r); err != nil {
			return err
		}
	}
	return nil
}

// insert appends a stored row to a table being loaded.
func (l *loader) insert(c *loadCat, table string, r datum.Row) error {
	t, ok := c.tables[table]
	if !ok {
		return fmt.Errorf("%w: row of %s, which catalog has no definition of", ErrCorrupt, table)
	}
	ti := t.info
	vals, err := r.Decode(ti.types, l.scratch[:0])
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, table, err)
	}
	l.scratch = vals
	row := l.arena.copy(r)
	var key string
	if t.pk != nil {
		key = ti.pkKeyOf(vals)
		if _, dup := t.pk.Get(pkItem{key: key}); dup {
			cols, vs := ti.keyText(vals)
			return fmt.Errorf("%w: %v", ErrCorrupt, errDuplicate(c.schema, table, cols, vs))
		}
	}
	ct := t.heap.insert(TupleLen(ti.types, vals))
	t.rows.Load(rowItem{ct, row})
	if t.pk != nil {
		t.pk.Set(pkItem{key, ct})
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
