package commit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/slate"
)

// Scanner is the read side of the store: slate.DB, slate.Snapshot.
type Scanner interface {
	ScanPrefix(ctx context.Context, prefix []byte) *slate.Iterator
	Get(ctx context.Context, key []byte) ([]byte, error)
}

// StoredBranch is a branch record and the catalogs the branch reads, as
// the store held them at the record's seq (keyspace.Branch).
type StoredBranch struct {
	Name     string
	Branch   keyspace.Branch
	Seq      uint64
	Catalogs []*StoredCatalog // named after the branch, in id order
}

// ReadBranches reads every branch record of s and the catalogs each branch
// reads. s must read at earlier seqs (slate.Snapshot) if it holds any.
func ReadBranches(ctx context.Context, s Scanner) ([]*StoredBranch, error) {
	var out []*StoredBranch
	it := s.ScanPrefix(ctx, keyspace.BranchPrefix())
	for it.Next() {
		name, b, err := keyspace.DecodeBranch(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("read store: %w", err)
		}
		seq := it.Seq()
		if b.Base != 0 {
			seq = b.Base
		}
		out = append(out, &StoredBranch{Name: name, Branch: b, Seq: seq})
	}
	if err := closeIter(it); err != nil {
		return nil, fmt.Errorf("read store: branches: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	pinned, ok := s.(interface {
		At(seq uint64) (*slate.Snapshot, error)
	})
	if !ok {
		return nil, fmt.Errorf("read store: %d branches, and the store view cannot read at their seqs", len(out))
	}
	var loaded *catalog.Server
	for _, b := range out {
		if b.Branch.Writable() {
			// Its own writes overlay what it reads of its parent: read it
			// as the server loads it.
			if loaded == nil {
				var err error
				if loaded, err = loadAll(ctx, s, pinned.At); err != nil {
					return nil, fmt.Errorf("read store: branch %q: %w", b.Name, err)
				}
			}
			db, ok := loaded.Lookup(b.Name)
			if !ok {
				return nil, fmt.Errorf("read store: branch %q did not load", b.Name)
			}
			for _, sc := range db.Current().Schemas() {
				b.Catalogs = append(b.Catalogs, StoredOf(db.Current(), b.Name, sc.Name))
			}
			continue
		}
		snap, err := pinned.At(b.Seq)
		if err != nil {
			return nil, fmt.Errorf("read store: branch %q: %w", b.Name, err)
		}
		cats := append([]keyspace.BranchCatalog(nil), b.Branch.Catalogs...)
		sort.Slice(cats, func(i, j int) bool { return cats[i].ID < cats[j].ID })
		for _, bc := range cats {
			c := &StoredCatalog{ID: bc.ID, Database: b.Name, Schema: bc.Schema, Defs: map[string]*keyspace.TableDef{}, Rows: map[string][]datum.Row{}}
			if err := readCatalog(ctx, snap, c); err != nil {
				snap.Close()
				return nil, fmt.Errorf("read store: branch %q: %w", b.Name, err)
			}
			b.Catalogs = append(b.Catalogs, c)
		}
		snap.Close()
	}
	return out, nil
}

// loadAll loads every database s holds, branches as they read, at at.
func loadAll(ctx context.Context, s Scanner, at func(seq uint64) (*slate.Snapshot, error)) (*catalog.Server, error) {
	it := s.ScanPrefix(ctx, nil)
	defer it.Close()
	return catalog.Load(ctx, it, catalog.Options{ReadAt: PinnedReader(at)})
}

// StoredCatalog is one DuckLake catalog as the store holds it: its registry
// name, head, table definitions and rows (children flattened into their own
// tables), decoded and checked.
type StoredCatalog struct {
	ID       uint32
	Database string
	Schema   string
	Head     keyspace.Head
	HasHead  bool
	Defs     map[string]*keyspace.TableDef
	Rows     map[string][]datum.Row
	// Order lists the table names in definition key order.
	Order []string
}

// StoredOf is the catalog of schema in v as the store would hold it (the
// registry names, table definitions and rows; no head): for checks that
// read stored catalogs, run on a version before it is stored.
func StoredOf(v *catalog.Version, database, schema string) *StoredCatalog {
	sc := &StoredCatalog{Database: database, Schema: schema, Defs: map[string]*keyspace.TableDef{}, Rows: map[string][]datum.Row{}}
	s, ok := v.Schema(schema)
	if !ok {
		return sc
	}
	sc.ID = s.CatalogID
	for _, t := range s.Tables() {
		sc.Defs[t.Name()] = t.Def()
		sc.Order = append(sc.Order, t.Name())
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			sc.Rows[t.Name()] = append(sc.Rows[t.Name()], r)
			return true
		})
	}
	sort.Strings(sc.Order)
	return sc
}

// ReadStore reads every catalog the store holds. Any record that does not
// decode is an error naming it: a corrupt store is never half-loaded.
func ReadStore(ctx context.Context, s Scanner) (map[uint32]*StoredCatalog, error) {
	cats := map[uint32]*StoredCatalog{}
	get := func(id uint32) *StoredCatalog {
		c := cats[id]
		if c == nil {
			c = &StoredCatalog{ID: id, Defs: map[string]*keyspace.TableDef{}, Rows: map[string][]datum.Row{}}
			cats[id] = c
		}
		return c
	}
	// Registry first: names of every catalog.
	it := s.ScanPrefix(ctx, keyspace.RegistryPrefix())
	for it.Next() {
		db, schema, id, err := keyspace.DecodeRegistry(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("read store: registry: %w", err)
		}
		c := get(id)
		c.Database, c.Schema = db, schema
	}
	if err := closeIter(it); err != nil {
		return nil, fmt.Errorf("read store: registry: %w", err)
	}
	ids := make([]uint32, 0, len(cats))
	for id := range cats {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if err := readCatalog(ctx, s, cats[id]); err != nil {
			return nil, err
		}
	}
	return cats, nil
}

func closeIter(it *slate.Iterator) error {
	err := it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

func readCatalog(ctx context.Context, s Scanner, c *StoredCatalog) error {
	if v, err := getOne(ctx, s, keyspace.HeadKey(c.ID)); err != nil {
		return err
	} else if v != nil {
		h, err := keyspace.DecodeHead(v)
		if err != nil {
			return fmt.Errorf("read store: catalog %d head: %w", c.ID, err)
		}
		c.Head, c.HasHead = h, true
	}
	codecs := map[string]*keyspace.Table{}
	it := s.ScanPrefix(ctx, keyspace.KindPrefix(c.ID, keyspace.KindTableDef))
	for it.Next() {
		_, def, err := keyspace.DecodeTableDef(it.Key(), it.Value())
		if err != nil {
			it.Close()
			if def.Name != "" && errors.Is(err, keyspace.ErrUnknownShape) {
				return &keyspace.UnloadableTableError{Database: c.Database, Schema: c.Schema, Table: def.Name, Err: err}
			}
			return fmt.Errorf("read store: catalog %d: %w", c.ID, err)
		}
		codec, err := keyspace.NewTable(def)
		if err != nil {
			it.Close()
			return fmt.Errorf("read store: catalog %d: %w", c.ID, err)
		}
		d := def
		c.Defs[def.Name] = &d
		c.Order = append(c.Order, def.Name)
		codecs[def.Name] = codec
	}
	if err := closeIter(it); err != nil {
		return fmt.Errorf("read store: catalog %d definitions: %w", c.ID, err)
	}
	lookup := func(_ uint32, name string) (*keyspace.Table, bool) {
		t, ok := codecs[name]
		return t, ok
	}
	it = s.ScanPrefix(ctx, keyspace.CatalogPrefix(c.ID))
	for it.Next() {
		k := it.Key()
		if len(k) > 4 && !keyspace.Kind(k[4]).IsRowKind() {
			continue // registry, head, definitions
		}
		e, err := keyspace.DecodeKV(k, it.Value(), lookup)
		if err != nil {
			it.Close()
			return fmt.Errorf("read store: catalog %d key %x: %w", c.ID, k, err)
		}
		if _, ok := c.Defs[e.Table]; !ok {
			it.Close()
			return fmt.Errorf("read store: catalog %d: rows of %s, which has no definition: %w", c.ID, e.Table, keyspace.ErrCorrupt)
		}
		// Values alias the iterator's buffers: copy what is kept.
		c.Rows[e.Table] = append(c.Rows[e.Table], append(datum.Row(nil), e.Row...))
		if e.ChildTable != "" {
			if _, ok := c.Defs[e.ChildTable]; !ok {
				it.Close()
				return fmt.Errorf("read store: catalog %d: %s rows embedded in %s, which has no definition: %w", c.ID, e.ChildTable, e.Table, keyspace.ErrCorrupt)
			}
			for _, ch := range e.Children {
				c.Rows[e.ChildTable] = append(c.Rows[e.ChildTable], append(datum.Row(nil), ch...))
			}
		}
	}
	if err := closeIter(it); err != nil {
		return fmt.Errorf("read store: catalog %d rows: %w", c.ID, err)
	}
	return nil
}

// getOne reads one key, nil when it is absent. A point read consults each
// sorted table's filter; a prefix scan would read ahead in every table
// that may hold the prefix.
func getOne(ctx context.Context, s Scanner, key []byte) ([]byte, error) {
	v, err := s.Get(ctx, key)
	if errors.Is(err, slate.ErrNotFound) {
		return nil, nil
	}
	return bytes.Clone(v), err
}

// PrimeLoaded loads the pipeline's indexes from the catalog the server
// loaded at open (catalog.Load) and the store s it was loaded from: each
// catalog's head is one point read, the embedded children come from the
// resident tables, so that opening reads the store once, not twice.
func (p *Pipeline) PrimeLoaded(ctx context.Context, srv *catalog.Server, s Scanner) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.primeBranches(ctx, srv, s); err != nil {
		return err
	}
	for id, ref := range srv.Catalogs() {
		v, err := getOne(ctx, s, keyspace.HeadKey(id))
		if err != nil {
			return fmt.Errorf("prime: catalog %d head: %w", id, err)
		}
		if v != nil {
			h, err := keyspace.DecodeHead(v)
			if err != nil {
				return fmt.Errorf("prime: catalog %d head: %w", id, err)
			}
			p.heads[id] = headState{head: h}
		}
		db, ok := srv.Lookup(ref.Database)
		if !ok {
			continue
		}
		sc, ok := db.Current().Schema(ref.Schema)
		if !ok {
			continue
		}
		if err := p.indexChildren(id, sc, p.children.add); err != nil {
			return err
		}
	}
	return nil
}

// indexChildren calls add with each embedded child row of catalog id
// (schema sc) and its parent's identity.
func (p *Pipeline) indexChildren(id uint32, sc *catalog.Schema, add func(ident string, r datum.Row)) error {
	for _, t := range sc.Tables() {
		// Only embedded tables have rows to index; the codecs of the
		// others are made when a commit first writes them.
		if spec, ok := keyspace.Known(t.Name()); !ok || !spec.Embedded() {
			continue
		}
		codec, err := codecOf(t)
		if err != nil {
			return err
		}
		spec := codec.Spec
		var ferr error
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			link, err := linkValues(r, codec.Types(), spec.ParentLink, 0)
			if err != nil {
				ferr = fmt.Errorf("prime: %s: %w", t.Name(), err)
				return false
			}
			add(identity(id, spec.Parent, link), r)
			return true
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
