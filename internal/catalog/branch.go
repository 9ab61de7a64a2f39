package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// A branch is a database forked from another (its parent) at one instant:
// it starts as the parent's DuckLake catalogs exactly as they were then. It
// is read-only, or writable when forked with a data path of its own
// (branch_write.go). A fork costs one store record whatever the catalog's
// size (keyspace.Branch: the store keeps the parent's keys as of the
// record's seq), and O(1) memory: the branch's version is the parent's
// version at the fork, shared node for node.
//
// The data files a branch inherited are the parent's, in the parent's data
// path. The parent therefore may not delete, or schedule for deletion, a
// file any of its branches inherited, nor expire the snapshot a branch was
// forked at (checkBranches): DuckLake's maintenance functions on the parent
// fail with the branch named rather than remove what a branch reads. A
// parent is not dropped while it has branches.

var (
	ErrBranchReadOnly = errors.New("catalog: branch is read-only")
	ErrBranchPinned   = errors.New("catalog: a branch still reads it")
)

func errBranchReadOnly(db *Database) error {
	return &Error{Kind: ErrBranchReadOnly, Code: pgcode.ReadOnlySQLTransaction,
		Message: fmt.Sprintf("database %q is a branch of %q and is read-only", db.name, db.branch.Parent)}
}

// Branch returns what the database was forked from, or nil for a database
// that is not a branch.
func (db *Database) Branch() *keyspace.Branch { return db.branch }

// ForkOptions say what kind of branch a fork makes.
type ForkOptions struct {
	// DataPath makes the branch writable, its new files under it
	// (branch_write.go). Empty: read-only.
	DataPath string
	// HasAt forks at the parent's DuckLake snapshot At rather than its
	// newest: a read-only branch reading the lake as that snapshot did.
	HasAt bool
	At    int64
}

// ForkDatabase creates the database called name as a branch of parent at
// parent's newest commit, and returns once the fork is durable. No commit
// of parent lands between the instant it reads and its record.
func (s *Server) ForkDatabase(ctx context.Context, name, parent string, o ForkOptions) (*Database, error) {
	dataPath := o.DataPath
	if name == "" {
		return nil, &Error{Kind: ErrBadDef, Code: pgcode.InvalidName, Message: "database name must not be empty"}
	}
	p, ok := s.Lookup(parent)
	if !ok {
		return nil, &Error{Kind: ErrNoDatabase, Code: pgcode.InvalidCatalogName,
			Message: fmt.Sprintf("template database %q does not exist", parent)}
	}
	var v *Version
	var rec *keyspace.Branch
	if p.branch != nil {
		// A read-only branch is its parent at a pinned instant: a fork of
		// it is a branch of that parent, reading it there as well.
		if p.branch.Writable() || p.branch.HasAt {
			return nil, &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
				Message: fmt.Sprintf("cannot fork %q: it is a writable branch or one at an earlier snapshot of %q; fork %q or a read-only branch of it", parent, p.branch.Parent, p.branch.Parent)}
		}
		if _, ok := s.Lookup(p.branch.Parent); !ok {
			return nil, errNoDatabase(p.branch.Parent)
		}
		v = p.Current()
		rec = &keyspace.Branch{Parent: p.branch.Parent, Base: p.branch.Base, BaseOf: parent}
		for _, c := range p.branch.Catalogs {
			rec.Catalogs = append(rec.Catalogs, keyspace.BranchCatalog{Schema: c.Schema, ID: c.ID,
				Snapshot: c.Snapshot, HasSnapshot: c.HasSnapshot, NextFileID: c.NextFileID})
		}
		// The branch's parent commits on: forking from the branch holds
		// no lock of it (the versions read are pinned by the branch).
	} else {
		// Holding the parent's commit lock keeps its commits out until
		// the fork's record is queued behind every commit the fork's
		// version holds: the store reads the parent's keys at the record's
		// seq.
		p.commitMu.Lock()
		defer p.commitMu.Unlock()
		if p.dropped.Load() {
			return nil, errNoDatabase(parent)
		}
		v = p.cur.Load()
		rec = &keyspace.Branch{Parent: parent}
		for _, sc := range v.Schemas() {
			bc := keyspace.BranchCatalog{Schema: sc.Name, ID: uint32(sc.CatalogID)}
			bc.Snapshot, bc.HasSnapshot = headSnapshot(sc)
			bc.NextFileID = nextFileID(sc)
			rec.Catalogs = append(rec.Catalogs, bc)
		}
	}
	fork := func(t *Txn) error { return nil }
	if o.HasAt {
		if err := forkAt(rec, v, o); err != nil {
			return nil, err
		}
	}
	if dataPath != "" {
		var err error
		if v, fork, err = s.writableFork(v, rec, dataPath); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if db, ok := s.mu.dbs[name]; ok && !db.dropped.Load() {
		s.mu.Unlock()
		return nil, errDatabaseExists(name)
	}
	db := newDatabase(name, s, v)
	db.branch = rec
	s.mu.dbs[name] = db
	s.branches.Add(1)
	s.mu.Unlock()
	t := db.BeginLatest()
	t.b = newBuilder(t.base)
	t.ops = []Op{{Kind: OpForkDatabase}}
	err := fork(t)
	if err == nil {
		err = t.Commit(ctx)
	}
	if err != nil {
		t.Rollback()
		s.forget(db)
		return nil, err
	}
	return db, nil
}

// headSnapshot is the newest ducklake_snapshot id of a catalog.
func headSnapshot(sc *Schema) (int64, bool) {
	st, ok := sc.Table("ducklake_snapshot")
	if !ok {
		return 0, false
	}
	_, r, ok := lastRow(st)
	if !ok {
		return 0, false
	}
	v, err := r.Column(st.Types(), 0)
	if err != nil || v.IsNull() {
		return 0, false
	}
	return v.Int(), true
}

// forkAt makes rec read its parent as of DuckLake snapshot o.At, which the
// parent (v) must retain: read-only, of a parent with one DuckLake catalog.
func forkAt(rec *keyspace.Branch, v *Version, o ForkOptions) error {
	lake := -1
	for i, c := range rec.Catalogs {
		if sc, _ := v.Schema(c.Schema); sc != nil {
			if _, ok := sc.Table("ducklake_snapshot"); ok {
				if lake >= 0 {
					return &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
						Message: fmt.Sprintf("cannot fork %q at a snapshot: it holds several DuckLake catalogs", rec.Parent)}
				}
				lake = i
			}
		}
	}
	if lake < 0 {
		return &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
			Message: fmt.Sprintf("cannot fork %q at a snapshot: it holds no DuckLake catalog", rec.Parent)}
	}
	c := &rec.Catalogs[lake]
	sc, _ := v.Schema(c.Schema)
	st, _ := sc.Table("ducklake_snapshot")
	if _, _, ok := st.LookupKey([]datum.Value{datum.IntValue(o.At)}); !ok {
		return &Error{Kind: ErrBadDef, Code: pgcode.InvalidParameterValue,
			Message: fmt.Sprintf("snapshot %d is not a snapshot %q retains", o.At, rec.Parent)}
	}
	rec.HasAt, rec.At = true, o.At
	c.Snapshot, c.HasSnapshot = o.At, true
	return nil
}

// nextFileID is the next_file_id of a catalog's newest snapshot: the files
// the catalog holds have smaller ids.
func nextFileID(sc *Schema) int64 {
	st, ok := sc.Table("ducklake_snapshot")
	if !ok {
		return 0
	}
	_, r, ok := lastRow(st)
	if !ok {
		return 0
	}
	if i := st.Def().ColumnIndex("next_file_id"); i >= 0 {
		if v, err := r.Column(st.Types(), i); err == nil && !v.IsNull() {
			return v.Int()
		}
	}
	return 0
}

// addBranch registers a loaded or followed branch: name reads v, which
// holds the catalogs rec names.
func (s *Server) addBranch(name string, rec *keyspace.Branch, v *Version) *Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	db := newDatabase(name, s, v)
	db.branch = rec
	s.mu.dbs[name] = db
	s.branches.Add(1)
	return db
}

// AdoptBranch registers a branch another Server loaded (a replica's
// reload).
func (s *Server) AdoptBranch(db *Database) {
	if db.branch != nil {
		s.addBranch(db.name, db.branch, db.Current())
	}
}

// BranchesOf returns the live branches of the database called parent, by
// name.
func (s *Server) BranchesOf(parent string) []*Database {
	if s.branches.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Database
	for _, db := range s.mu.dbs {
		if db.branch != nil && db.branch.Parent == parent && !db.dropped.Load() {
			out = append(out, db)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// primaries returns the databases that own their catalogs (every database
// but the read-only branches, which read their parents' catalog ids), by
// name.
func (s *Server) primaries() []*Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Database, 0, len(s.mu.dbs))
	for _, db := range s.mu.dbs {
		if (db.branch == nil || db.branch.Writable()) && !db.dropped.Load() {
			out = append(out, db)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// checkBranches refuses a commit of db that would take from one of its
// branches what the branch reads: deleting the row of a data or delete
// file the branch references (DuckLake deletes it when it expires the last
// snapshot that sees the file, and schedules the file for deletion),
// scheduling such a file for deletion, or expiring the snapshot the branch
// was forked at; and dropping db while it has branches.
// REQUIRES: db.commitMu held (no fork of db runs meanwhile).
func (s *Server) checkBranches(db *Database, ops []Op) error {
	if db.branch != nil {
		// The fork commit itself removes, at an earlier snapshot, the
		// parent's later files (branch_at.go): not its inherited ones.
		if db.branch.Writable() && touchesFiles(ops) && !ForkCommit(ops) {
			return db.checkOwnFiles(ops)
		}
		return nil
	}
	if s.branches.Load() == 0 {
		return nil
	}
	if !dropsDatabase(ops) && !touchesFiles(ops) {
		return nil
	}
	kids := s.BranchesOf(db.name)
	if len(kids) == 0 {
		return nil
	}
	if dropsDatabase(ops) {
		names := make([]string, len(kids))
		for i, k := range kids {
			names[i] = "database " + k.name
		}
		return &Error{Kind: ErrBranchPinned, Code: pgcode.DependentObjectsStillExist,
			Message: fmt.Sprintf("cannot drop database %q because other objects depend on it", db.name),
			Detail:  fmt.Sprintf("%s is a branch of database %s.", strings.Join(names, ", "), db.name)}
	}
	for i := range ops {
		o := &ops[i]
		var row datum.Row
		switch {
		case o.Kind == OpDelete && (o.Table == "ducklake_data_file" || o.Table == "ducklake_delete_file" || o.Table == "ducklake_snapshot"):
			row = o.Old
		case o.Kind == OpInsert && o.Table == "ducklake_files_scheduled_for_deletion":
			row = o.New
		default:
			continue
		}
		for _, k := range kids {
			if err := k.branchReads(db, o, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// touchesFiles reports whether ops delete a snapshot, a data or delete
// file's row, or schedule a file: the operations checkBranches checks.
func touchesFiles(ops []Op) bool {
	for i := range ops {
		switch o := &ops[i]; {
		case o.Kind == OpDelete && (o.Table == "ducklake_data_file" || o.Table == "ducklake_delete_file" || o.Table == "ducklake_snapshot"):
			return true
		case o.Kind == OpInsert && o.Table == "ducklake_files_scheduled_for_deletion":
			return true
		}
	}
	return false
}

// branchReads reports, as an error naming the branch, that the row o
// deletes or schedules is one the branch k reads.
func (k *Database) branchReads(parent *Database, o *Op, row datum.Row) error {
	var fork keyspace.BranchCatalog
	found := false
	for _, c := range k.branch.Catalogs {
		if c.Schema == o.Schema {
			fork, found = c, true
		}
	}
	if !found {
		return nil
	}
	pt, err := parent.cur.Load().Table(o.Schema, o.Table)
	if err != nil {
		return nil
	}
	id, err := row.Column(pt.Types(), 0)
	if err != nil || id.IsNull() {
		return nil
	}
	pinned := func(detail string) error {
		return &Error{Kind: ErrBranchPinned, Code: pgcode.ObjectInUse, Schema: o.Schema, Table: o.Table,
			Message: fmt.Sprintf("database %q is a branch of %q and still reads %s", k.name, parent.name, detail),
			Detail:  fmt.Sprintf("The branch was forked at snapshot %d. Drop the branch (DROP DATABASE %s) before expiring what it reads.", fork.Snapshot, k.name)}
	}
	if o.Table == "ducklake_snapshot" {
		if fork.HasSnapshot && id.Int() == fork.Snapshot {
			return pinned(fmt.Sprintf("snapshot %d", fork.Snapshot))
		}
		return nil
	}
	// The files a branch reads of its parent's are those it holds rows of
	// with ids below the parent's next_file_id at the fork: an id names
	// one file in both (the branch may have rewritten the row's path).
	if id.Int() >= fork.NextFileID {
		return nil
	}
	for _, table := range []string{"ducklake_data_file", "ducklake_delete_file"} {
		bt, err := k.cur.Load().Table(o.Schema, table)
		if err != nil {
			continue
		}
		if _, _, ok := bt.LookupKey([]datum.Value{id}); ok {
			detail := fmt.Sprintf("file %d", id.Int())
			if p, ok := columnText(pt, row, "path"); ok {
				detail = fmt.Sprintf("file %q", p)
			}
			return pinned(detail)
		}
	}
	return nil
}

// columnText is the text value of the named column of r, a row of t.
func columnText(t *Table, r datum.Row, name string) (string, bool) {
	i := t.Def().ColumnIndex(name)
	if i < 0 {
		return "", false
	}
	v, err := r.Column(t.Types(), i)
	if err != nil || v.IsNull() {
		return "", false
	}
	return v.Text(), true
}

// pendingBranch is a branch record Load met: the branch is read at seq, the
// record's own.
type pendingBranch struct {
	name string
	rec  keyspace.Branch
	seq  uint64
	at   uint64 // a writable branch's own keys are read at the load's seq
}

// loadBranch loads the branch b: its catalogs as the store held them at
// b.seq, under b's name.
func (s *Server) loadBranch(ctx context.Context, b pendingBranch, opts Options) error {
	if opts.ReadAt == nil {
		return fmt.Errorf("load branch %q: the store holds branches and the loader cannot read at their seqs", b.name)
	}
	writable := b.rec.Writable()
	v, err := readBranch(ctx, b.name, b.rec.Catalogs, writable, func(c keyspace.BranchCatalog) (Iterator, []func() error, error) {
		ci, done, err := opts.ReadAt(ctx, b.seq, keyspace.CatalogPrefix(c.ID))
		if err != nil || !writable {
			return ci, []func() error{done}, err
		}
		oi, odone, err := opts.ReadAt(ctx, b.at, keyspace.CatalogPrefix(c.OwnID))
		if err != nil {
			return nil, []func() error{done}, err
		}
		return &overlayIter{base: ci, over: oi, own: keyspace.CatalogPrefix(c.OwnID)}, []func() error{done, odone}, nil
	})
	if err != nil {
		return err
	}
	if p, ok := s.Lookup(b.rec.Parent); ok && p.branch == nil {
		v = shareUnchanged(v, p.Current())
	}
	rec := b.rec
	s.addBranch(b.name, &rec, v)
	return nil
}

// readBranch loads, as one version of a database called name, the
// catalogs cats: each one's pairs from open, under the branch's own
// catalog id if own, else the parent's.
func readBranch(ctx context.Context, name string, cats []keyspace.BranchCatalog, own bool, open func(keyspace.BranchCatalog) (Iterator, []func() error, error)) (*Version, error) {
	// The branch's pairs: its registry as of the fork (the catalogs, under
	// the branch's name), then each catalog's keys, in id order: key
	// order, as Load requires.
	idOf := func(c keyspace.BranchCatalog) uint32 {
		if own {
			return c.OwnID
		}
		return c.ID
	}
	cats = append([]keyspace.BranchCatalog(nil), cats...)
	sort.Slice(cats, func(i, j int) bool { return idOf(cats[i]) < idOf(cats[j]) })
	var reg []kvPair
	for _, c := range cats {
		reg = append(reg, kvPair{keyspace.RegistryKey(name, c.Schema), keyspace.EncodeRegistryValue(idOf(c))})
	}
	sort.Slice(reg, func(i, j int) bool { return string(reg[i].k) < string(reg[j].k) })
	it := &concatIter{pairs: reg}
	defer it.close()
	for _, c := range cats {
		ci, dones, err := open(c)
		it.dones = append(it.dones, dones...)
		if err != nil {
			return nil, fmt.Errorf("load branch %q: catalog %d: %w", name, c.ID, err)
		}
		it.its = append(it.its, ci)
	}
	sub, err := Load(ctx, it, Options{})
	if err == nil {
		err = it.close()
	}
	if err != nil {
		return nil, fmt.Errorf("load branch %q: %w", name, err)
	}
	db, ok := sub.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: branch %q reads no catalog", ErrCorrupt, name)
	}
	return db.Current(), nil
}

// shareUnchanged returns v with each table that is, row for row and oid
// for oid, the parent's table in parent replaced by the parent's: a
// loaded branch then holds in memory only the tables its parent changed
// since the fork, as a fork in memory does.
func shareUnchanged(v, parent *Version) *Version {
	b := newBuilder(v)
	b.v.seq = v.seq
	for name, sc := range v.schemas {
		ps, ok := parent.schemas[name]
		if !ok || ps.OID != sc.OID {
			continue
		}
		for tn, t := range sc.tables {
			if pt, ok := ps.tables[tn]; ok && sameTable(t, pt) {
				own, _ := b.ownSchema(name)
				own.tables[tn] = pt
			}
		}
	}
	return b.finish()
}

// sameTable reports whether two published tables have the same definition,
// oids and rows at the same ctids.
func sameTable(a, b *Table) bool {
	ai, bi := a.info, b.info
	if ai.OID != bi.OID || ai.IndexOID != bi.IndexOID || ai.ConstraintOID != bi.ConstraintOID || ai.SchemaOID != bi.SchemaOID ||
		!reflect.DeepEqual(ai.Def, bi.Def) || a.Len() != b.Len() || a.Pages() != b.Pages() {
		return false
	}
	type row struct {
		c CTID
		r datum.Row
	}
	rows := make([]row, 0, a.Len())
	a.Scan(func(c CTID, r datum.Row) bool {
		rows = append(rows, row{c, r})
		return true
	})
	i, same := 0, true
	b.Scan(func(c CTID, r datum.Row) bool {
		same = i < len(rows) && rows[i].c == c && bytes.Equal(rows[i].r, r)
		i++
		return same
	})
	return same && i == len(rows)
}

type kvPair struct{ k, v []byte }

// concatIter yields pairs, then each iterator's pairs in turn.
type concatIter struct {
	pairs []kvPair
	its   []Iterator
	dones []func() error
	i     int // next pair; then its[i-len(pairs)]
	k, v  []byte
	err   error
}

func (c *concatIter) Next() bool {
	for c.err == nil {
		if c.i < len(c.pairs) {
			c.k, c.v = c.pairs[c.i].k, c.pairs[c.i].v
			c.i++
			return true
		}
		j := c.i - len(c.pairs)
		if j >= len(c.its) {
			return false
		}
		if c.its[j].Next() {
			c.k, c.v = c.its[j].Key(), c.its[j].Value()
			return true
		}
		c.err = c.its[j].Err()
		c.i++
	}
	return false
}

func (c *concatIter) Key() []byte   { return c.k }
func (c *concatIter) Value() []byte { return c.v }
func (c *concatIter) Err() error    { return c.err }

func (c *concatIter) close() error {
	var first error
	for _, d := range c.dones {
		if d == nil {
			continue
		}
		if err := d(); err != nil && first == nil {
			first = err
		}
	}
	c.dones = nil
	return first
}

// followBranch applies a branch record a replica follows: a fork of the
// parent as the replica holds it (a writable branch's catalogs under their
// own ids), or, for a delete, nothing yet: the caller drops the branch
// with the rest of the batch. It returns the branch's name.
func (s *Server) followBranch(o PairOp) (string, error) {
	if o.Delete {
		r := keyspace.NewKeyReader(o.Key)
		r.Uint32()
		r.Byte()
		name, _ := r.String()
		if err := r.Done(); err != nil {
			return "", fmt.Errorf("%w: branch key: %v", ErrCorrupt, err)
		}
		return name, nil
	}
	name, rec, err := keyspace.DecodeBranch(o.Key, o.Value)
	if err != nil {
		return "", fmt.Errorf("follow branch: %w", err)
	}
	if rec.Base != 0 {
		// It reads its parent as of an earlier seq than this replica holds.
		return "", fmt.Errorf("%w: branch %q reads its parent at seq %d", ErrCannotFollow, name, rec.Base)
	}
	p, ok := s.Lookup(rec.Parent)
	if !ok || p.branch != nil {
		return "", fmt.Errorf("%w: branch %q of unknown database %q", ErrCannotFollow, name, rec.Parent)
	}
	v := p.Current()
	for _, c := range rec.Catalogs {
		if sc, ok := v.Schema(c.Schema); !ok || sc.CatalogID != c.ID {
			return "", fmt.Errorf("%w: branch %q reads catalog %s (%d), which %q does not hold", ErrCannotFollow, name, c.Schema, c.ID, rec.Parent)
		}
	}
	if rec.Writable() {
		b := newBuilder(v)
		for _, c := range rec.Catalogs {
			own, err := b.ownSchema(c.Schema)
			if err != nil {
				return "", err
			}
			own.CatalogID = c.OwnID
			for cur := s.nextCatalogID.Load(); cur <= c.OwnID && !s.nextCatalogID.CompareAndSwap(cur, c.OwnID+1); cur = s.nextCatalogID.Load() {
			}
		}
		v = b.finish()
	}
	s.addBranch(name, &rec, v)
	return name, nil
}

// overlayIter is a writable branch's catalog: the parent's pairs at the
// fork (base), their keys moved under the branch's own catalog id, with
// the branch's own pairs (over) in their place where it wrote; a hidden
// value of its own hides the key.
type overlayIter struct {
	base, over Iterator
	own        []byte // the branch's catalog prefix
	started    bool
	bOK, oOK   bool
	bKey       []byte // base's current key, under own
	adv        int    // the source to advance at the next call: 1 base, 2 over
	k, v       []byte
	err        error
}

func (m *overlayIter) Next() bool {
	switch {
	case !m.started:
		m.started = true
		m.nextBase()
		m.nextOver()
	case m.adv == 1:
		m.nextBase()
	case m.adv == 2:
		m.nextOver()
	}
	m.adv = 0
	for m.err == nil && (m.bOK || m.oOK) {
		c := 1
		switch {
		case !m.oOK:
			c = -1
		case m.bOK:
			c = bytes.Compare(m.bKey, m.over.Key())
		}
		if c < 0 {
			m.k, m.v, m.adv = m.bKey, m.base.Value(), 1
			return true
		}
		if c == 0 {
			m.nextBase() // the branch's own pair replaces the parent's
		}
		if keyspace.Hidden(m.over.Value()) {
			m.nextOver()
			continue
		}
		m.k, m.v, m.adv = m.over.Key(), m.over.Value(), 2
		return true
	}
	return false
}

func (m *overlayIter) nextBase() {
	if m.bOK = m.base.Next(); m.bOK {
		m.bKey = append(append(m.bKey[:0], m.own...), m.base.Key()[len(m.own):]...)
	} else if err := m.base.Err(); err != nil {
		m.err = err
	}
}

func (m *overlayIter) nextOver() {
	if m.oOK = m.over.Next(); !m.oOK {
		if err := m.over.Err(); err != nil {
			m.err = err
		}
	}
}

func (m *overlayIter) Key() []byte   { return m.k }
func (m *overlayIter) Value() []byte { return m.v }
func (m *overlayIter) Err() error    { return m.err }
