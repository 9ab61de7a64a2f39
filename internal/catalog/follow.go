package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

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
	// A branch's fork reads its parent as the batches before its record
	// left it — as this replica holds it now, before the rest of the batch
	// (a writable branch's own first rows, which need it).
	var dropBranches []string
	for _, o := range ops {
		if len(o.Key) < 5 || keyspaceCatalogID(o.Key) != keyspace.StoreCatalogID || keyspace.Kind(o.Key[4]) != keyspace.KindBranch {
			continue
		}
		name, err := s.followBranch(o)
		if err != nil {
			return err
		}
		if o.Delete {
			dropBranches = append(dropBranches, name)
		}
	}
	cats := map[uint32]*followCat{}
	for _, db := range s.primaries() {
		for _, sc := range db.Current().Schemas() {
			cats[sc.CatalogID] = &followCat{db: db, dbName: db.name, schema: sc.Name}
		}
	}
	if s.follow == nil {
		s.follow = newFollowState()
	}
	f := &follower{srv: s, st: s.follow, cats: cats, dropping: map[string]bool{}}
	for _, name := range dropBranches {
		f.dropping[name] = true // its own keys go with it
	}
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
		if !o.Delete && keyspace.Hidden(o.Value) && keyspaceCatalogID(o.Key) != keyspace.StoreCatalogID {
			// A writable branch's delete of a key it read of its parent.
			o.Delete, o.Value = true, nil
		}
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
		case kind == keyspace.KindBranch:
			// Followed above.
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
	if len(f.dropping) > 0 {
		f.st.forget(func(cid uint32) bool {
			c, ok := cats[cid]
			return ok && f.dropping[c.dbName]
		})
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
	if spec, ok := keyspace.Known(def.Name); ok && !spec.Dynamic && !spec.Embedded() {
		// A table renamed to a name of the same kind (DuckLake's 0.2 → 0.3
		// rename of its column statistics table) keeps its rows' keys:
		// their puts would land in whichever table has the kind's first
		// name, so the follower reloads instead.
		for _, other := range keyspace.KindTables(spec.Kind) {
			if _, err := c.b.peek(c.schema, other); other != def.Name && err == nil {
				return fmt.Errorf("%w: table %s.%s renamed to %s", ErrCannotFollow, def.Schema, other, def.Name)
			}
		}
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
		delete(f.st.idx, idxKey{t.info, cid})
	}
	return err
}

// Promote makes a follower the writer of its catalog: commits go to c from
// now on, and the follower's indexes are released. Nothing may apply a
// batch after Promote is called, and no commit may be offered before it
// returns: a replica refuses writes until it is promoted.
func (s *Server) Promote(c Committer) {
	s.opts.Committer = c
	s.opts.Follow = false
	s.follow = nil
}
