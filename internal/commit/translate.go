package commit

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/slate"
)

// The translation of one commit into keyspace operations.
//
// Row kinds whose rows stand alone are translated operation by operation: a
// row's key is a pure function of the row (keyspace), so an insert puts the
// new row's key, a delete deletes the old row's key (which names the exact
// current or history row, as RFC 0008 requires of hard deletes), and an
// update does both (ending a row moves it from its current key to a history
// key; a begin_snapshot rebase rewrites a data file's value in place).
//
// Parent kinds (data files, partition specs, sort specs) carry their embedded
// children in their value (RFC 0013), so any operation on a parent or on one
// of its children marks the parent entity touched; after all operations the
// entity is written once, from the parent row(s) in the next version and the
// children the pipeline's child index holds plus this commit's changes. In a
// merge the parent and its children are hard-deleted "in no guaranteed
// order" (RFC 0008): deciding from the batch's end state rather than from
// operation order is what makes that order irrelevant.

type pendingKV struct {
	put       bool
	value     []byte
	catalogID uint32
	table     string
}

type parentTouch struct {
	catalogID uint32
	schema    string
	codec     *keyspace.Table // the parent table's codec
	link      []datum.Value   // the parent's link column values (identity)
	keys      map[string]bool // keys of parent rows the commit's operations named
}

type childChange struct {
	added, removed []datum.Row
}

type translation struct {
	batch        *slate.Batch
	keys         []keyWrite // every key the batch writes, in key order
	children     map[string]*childChange
	heads        map[uint32]headState
	dropped      map[uint32]bool        // catalogs whose head the pipeline forgets
	fork         *keyspace.Branch       // a writable branch the commit forks
	forkChildren map[string][]datum.Row // its catalogs' embedded children
}

// keyWrite is a key a batch writes and whether it puts or deletes it.
type keyWrite struct {
	key string
	put bool
}

type headState struct {
	head keyspace.Head
}

type translator struct {
	// fork is a writable branch the commit forks, forkIDs its own catalog
	// ids (branch.go).
	fork         *keyspace.Branch
	forkIDs      map[uint32]bool
	forkChildren map[string][]datum.Row

	ctx      context.Context
	p        *Pipeline
	c        *catalog.Commit
	pending  map[string]pendingKV
	parents  map[string]*parentTouch
	children map[string]*childChange
	defs     map[defRef]bool
	catalogs map[uint32]bool // catalogs whose rows or definitions changed
	minted   map[uint32]int64
	newCats  map[uint32]catalog.CatalogRef
	// dropped are the catalogs a drop-database commit erases.
	dropped map[uint32]bool
	// rewrite are the tables whose stored rows all change encoding: a
	// column dropped, or added with a default that every row now reads.
	rewrite map[tableRef]bool
}

type tableRef struct{ schema, table string }

type defRef struct {
	catalogID uint32
	schema    string
	table     string
}

func (p *Pipeline) translate(ctx context.Context, c *catalog.Commit) (*translation, error) {
	tr := &translator{
		ctx: ctx, p: p, c: c,
		// Most ops write one key; sized once, the map does not rehash as
		// a commit's twenty-odd keys go in.
		pending:  make(map[string]pendingKV, len(c.Ops)),
		parents:  map[string]*parentTouch{},
		children: map[string]*childChange{},
		defs:     map[defRef]bool{},
		catalogs: map[uint32]bool{},
		minted:   map[uint32]int64{},
		newCats:  map[uint32]catalog.CatalogRef{},
		forkIDs:  map[uint32]bool{},
	}
	for i := range c.Ops {
		o := &c.Ops[i]
		rewrite := o.Kind == catalog.OpDropColumn || o.Kind == catalog.OpRenameTable ||
			o.Kind == catalog.OpAddColumn && !o.Column.Default.IsNull()
		if !rewrite {
			continue
		}
		if tr.rewrite == nil {
			tr.rewrite = map[tableRef]bool{}
		}
		tr.rewrite[tableRef{o.Schema, o.Table}] = true
		if o.Kind == catalog.OpRenameTable {
			tr.rewrite[tableRef{o.Schema, o.Column.NewName}] = true
		}
	}
	for i := range c.Ops {
		if err := tr.op(&c.Ops[i]); err != nil {
			return nil, err
		}
	}
	if m := c.Consumes; m != nil {
		// A merge: the branch goes in the same batch (catalog/merge.go).
		b := m.Branch()
		if b == nil || !b.Writable() {
			return nil, fmt.Errorf("commit: merge of %q, which is no writable branch", m.Name())
		}
		tr.pending[string(keyspace.BranchKey(m.Name()))] = pendingKV{catalogID: keyspace.StoreCatalogID}
		if err := tr.dropBranch(m.Name(), b); err != nil {
			return nil, err
		}
	}
	if err := tr.rewriteTables(); err != nil {
		return nil, err
	}
	if err := tr.finishParents(); err != nil {
		return nil, err
	}
	return tr.emit()
}

// catalogID returns the keyspace catalog id of a schema of the database.
func (tr *translator) catalogID(schema string) (uint32, error) {
	s, ok := tr.c.Next.Schema(schema)
	if !ok {
		s, ok = tr.c.Base.Schema(schema)
	}
	if !ok {
		return 0, fmt.Errorf("commit: schema %q is in neither version", schema)
	}
	if s.CatalogID == 0 || s.CatalogID > math.MaxUint32 {
		return 0, fmt.Errorf("commit: schema %q has catalog id %d outside the keyspace's range", schema, s.CatalogID)
	}
	return uint32(s.CatalogID), nil
}

// table returns the table as of the next version, else as of the base.
func (tr *translator) table(schema, name string) (*catalog.Table, bool) {
	if t, err := tr.c.Next.Table(schema, name); err == nil {
		return t, true
	}
	if t, err := tr.c.Base.Table(schema, name); err == nil {
		return t, true
	}
	return nil, false
}

func (tr *translator) op(o *catalog.Op) error {
	switch o.Kind {
	case catalog.OpCreateSchema:
		if o.CatalogID == 0 || o.CatalogID > math.MaxUint32 {
			return fmt.Errorf("commit: schema %q has catalog id %d outside the keyspace's range", o.Schema, o.CatalogID)
		}
		id := uint32(o.CatalogID)
		tr.put(keyspace.RegistryKey(tr.c.DB.Name(), o.Schema), keyspace.EncodeRegistryValue(id), keyspace.StoreCatalogID, "")
		tr.newCats[id] = catalog.CatalogRef{Database: tr.c.DB.Name(), Schema: o.Schema}
		tr.catalogs[id] = true
		return nil
	case catalog.OpCreateDatabase:
		// The database's catalogs (its "public" schema) get their registry
		// name and head now, so that the database exists after a restart.
		for _, s := range tr.c.Next.Schemas() {
			tr.newCats[s.CatalogID] = catalog.CatalogRef{Database: tr.c.DB.Name(), Schema: s.Name}
			tr.catalogs[s.CatalogID] = true
		}
		return nil
	case catalog.OpForkDatabase:
		// One record, whatever the parent's size: the store keeps the
		// parent's keys as of the record's seq for as long as it lives.
		b := tr.c.DB.Branch()
		if b == nil {
			return fmt.Errorf("commit: fork of %q without a branch record", tr.c.DB.Name())
		}
		if b.BaseOf != "" && b.Base == 0 {
			// Forked from a read-only branch: read the parent where it does.
			seq, err := tr.p.recordSeq(tr.ctx, b.BaseOf)
			if err != nil {
				return err
			}
			b.Base = seq
		}
		tr.put(keyspace.BranchKey(tr.c.DB.Name()), keyspace.EncodeBranch(*b), keyspace.StoreCatalogID, "")
		if b.Writable() {
			tr.fork = b
			children, err := tr.p.forkChildren(b, tr.c.Next)
			if err != nil {
				return err
			}
			tr.forkChildren = children
			next := uint32(0)
			for _, c := range b.Catalogs {
				tr.forkIDs[c.OwnID] = true
				next = max(next, c.OwnID+1)
			}
			// Its own ids stay allocated across restarts, dropped or not.
			tr.put(keyspace.NextCatalogIDKey(), keyspace.EncodeNextCatalogID(next), keyspace.StoreCatalogID, "")
		}
		return nil
	case catalog.OpDropDatabase:
		if b := tr.c.DB.Branch(); b != nil {
			tr.pending[string(keyspace.BranchKey(tr.c.DB.Name()))] = pendingKV{catalogID: keyspace.StoreCatalogID}
			if b.Writable() {
				return tr.dropBranch(tr.c.DB.Name(), b)
			}
			return nil // the catalogs are the parent's: the branch is its record
		}
		return tr.dropDatabase()
	case catalog.OpCreateTable, catalog.OpDropTable, catalog.OpRenameColumn, catalog.OpAddColumn, catalog.OpDropColumn, catalog.OpRenameTable:
		id, err := tr.catalogID(o.Schema)
		if err != nil {
			return err
		}
		tr.defs[defRef{id, o.Schema, o.Table}] = true
		if o.Kind == catalog.OpRenameTable {
			tr.defs[defRef{id, o.Schema, o.Column.NewName}] = true
		}
		tr.catalogs[id] = true
		if o.Kind == catalog.OpDropTable {
			return tr.dropRows(id, o)
		}
		return nil
	case catalog.OpInsert, catalog.OpUpdate, catalog.OpDelete:
		id, err := tr.catalogID(o.Schema)
		if err != nil {
			return err
		}
		tr.catalogs[id] = true
		if tr.rewrite[tableRef{o.Schema, o.Table}] {
			return nil // the whole table is rewritten from the next version
		}
		codec, err := tr.codec(o.Schema, o.Table)
		if err != nil {
			return err
		}
		if o.Kind != catalog.OpInsert {
			if err := tr.row(id, o.Schema, codec, o.Old, false); err != nil {
				return err
			}
		}
		if o.Kind != catalog.OpDelete {
			if err := tr.row(id, o.Schema, codec, o.New, true); err != nil {
				return err
			}
			if o.Table == "ducklake_snapshot" && o.Kind == catalog.OpInsert {
				v, err := o.New.Column(codec.Types(), 0)
				if err != nil || v.IsNull() {
					return shapeErr("ducklake_snapshot row without a snapshot_id")
				}
				if cur, ok := tr.minted[id]; !ok || v.I > cur {
					tr.minted[id] = v.I
				}
			}
		}
		return nil
	}
	return fmt.Errorf("commit: unknown operation %s", o.Kind)
}

// dropRows deletes the stored rows of a table the commit drops, as the base
// version held them (rows the commit itself inserted never reach the batch:
// emit skips puts for tables that do not exist in the next version).
func (tr *translator) dropRows(id uint32, o *catalog.Op) error {
	t, err := tr.c.Base.Table(o.Schema, o.Table)
	if err != nil {
		return nil // created and dropped within the commit
	}
	codec, err := codecOf(t)
	if err != nil {
		return err
	}
	var ferr error
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		ferr = tr.row(id, o.Schema, codec, r, false)
		return ferr == nil
	})
	return ferr
}

// rewriteTables replaces every stored row of the tables whose encoding,
// kind or name the commit changed: the base version's rows go, the next
// version's come (a renamed table is in the set under both names). Their
// row ops are skipped, since each is encoded under whichever column set the
// table had at the time, and the next version holds their outcome. Parent
// kinds' rows are touched from the next version first, so that
// finishParents encodes them (with their children) under the next column
// set; then every base row is deleted; then the other kinds' next rows are
// put, replacing the deletes of the same keys.
func (tr *translator) rewriteTables() error {
	each := func(v *catalog.Version, put, parents bool) error {
		for ref := range tr.rewrite {
			spec, ok := keyspace.Known(ref.table)
			if isParent := ok && spec.Child != ""; put && isParent != parents {
				continue
			}
			t, err := v.Table(ref.schema, ref.table)
			if err != nil {
				continue // created, dropped or renamed by the commit
			}
			id, err := tr.catalogID(ref.schema)
			if err != nil {
				return err
			}
			codec, err := codecOf(t)
			if err != nil {
				return err
			}
			var ferr error
			t.Scan(func(_ catalog.CTID, r datum.Row) bool {
				ferr = tr.row(id, ref.schema, codec, r, put)
				return ferr == nil
			})
			if ferr != nil {
				return ferr
			}
		}
		return nil
	}
	if err := each(tr.c.Next, true, true); err != nil {
		return err
	}
	if err := each(tr.c.Base, false, false); err != nil {
		return err
	}
	return each(tr.c.Next, true, false)
}

// dropDatabase deletes every key of every catalog of the database: the
// pairs its current version represents (catalog.Version.CatalogPairs),
// which are exactly the keys the store holds for it.
func (tr *translator) dropDatabase() error {
	if tr.dropped == nil {
		tr.dropped = map[uint32]bool{}
	}
	for _, s := range tr.c.Base.Schemas() {
		id := s.CatalogID
		tr.dropped[id] = true
		tr.pending[string(keyspace.RegistryKey(tr.c.DB.Name(), s.Name))] = pendingKV{catalogID: keyspace.StoreCatalogID}
		err := tr.c.Base.CatalogPairs(tr.c.DB.Name(), s, func(key, _ []byte) error {
			tr.pending[string(key)] = pendingKV{catalogID: id}
			return nil
		})
		if err != nil {
			return fmt.Errorf("commit: drop database %q: catalog %d: %w", tr.c.DB.Name(), id, err)
		}
	}
	return nil
}

func (tr *translator) codec(schema, table string) (*keyspace.Table, error) {
	t, ok := tr.table(schema, table)
	if !ok {
		return nil, fmt.Errorf("commit: table %s.%s is in neither version", schema, table)
	}
	return codecOf(t)
}

// row records that row is added to (put) or removed from its table.
func (tr *translator) row(id uint32, schema string, codec *keyspace.Table, row datum.Row, put bool) error {
	spec := codec.Spec
	switch {
	case spec.Embedded():
		pc, err := tr.parentCodec(id, schema, spec.Parent)
		if err != nil {
			return err
		}
		link, err := linkValues(row, codec.Types(), spec.ParentLink, 0)
		if err != nil {
			return fmt.Errorf("commit: %s: %w", codec.Def.Name, err)
		}
		ident := identity(id, spec.Parent, link)
		tr.touch(ident, id, schema, pc, link)
		ch := tr.children[ident]
		if ch == nil {
			ch = &childChange{}
			tr.children[ident] = ch
		}
		if put {
			ch.added = append(ch.added, row)
		} else {
			ch.removed = append(ch.removed, row)
		}
		return nil
	case spec.Child != "":
		child := codec.ChildTable()
		link, err := linkValues(row, codec.Types(), child.Spec.ParentLink, 1)
		if err != nil {
			return fmt.Errorf("commit: %s: %w", codec.Def.Name, err)
		}
		ident := identity(id, codec.Def.Name, link)
		pt := tr.touch(ident, id, schema, codec, link)
		k, err := codec.Key(id, row)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		pt.keys[string(k)] = true
		return nil
	default:
		k, err := codec.Key(id, row)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if !put {
			tr.pending[string(k)] = pendingKV{catalogID: id, table: codec.Def.Name}
			return nil
		}
		v, err := codec.EncodeValue(nil, row, nil)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		// Two live rows with one key would be one row after a reload: a
		// table without a primary key may hold duplicates in PostgreSQL, but
		// the keyspace keys rows by their identity, so a second row with the
		// same identity is refused rather than silently merged.
		prev, had := tr.pending[string(k)]
		switch {
		case had && prev.put:
			return shapeErr("two rows of %s in one commit have the same identity (%s)", codec.Def.Name, keyspace.FormatKey(k))
		case !had:
			exists, err := tr.p.stored(tr.ctx, k)
			if err != nil {
				return fmt.Errorf("commit: checking %s: %w", keyspace.FormatKey(k), err)
			}
			if exists {
				return shapeErr("a row of %s with the same identity is already stored (%s)", codec.Def.Name, keyspace.FormatKey(k))
			}
		}
		tr.pending[string(k)] = pendingKV{put: true, value: v, catalogID: id, table: codec.Def.Name}
		return nil
	}
}

func (tr *translator) parentCodec(id uint32, schema, parent string) (*keyspace.Table, error) {
	if t, ok := tr.table(schema, parent); ok {
		return codecOf(t)
	}
	return nil, shapeErr("%s.%s rows need their parent table %s, which does not exist", schema, parent, parent)
}

func (tr *translator) touch(ident string, id uint32, schema string, codec *keyspace.Table, link []datum.Value) *parentTouch {
	pt := tr.parents[ident]
	if pt == nil {
		pt = &parentTouch{catalogID: id, schema: schema, codec: codec, link: link, keys: map[string]bool{}}
		tr.parents[ident] = pt
	}
	return pt
}

// linkValues reads the link columns of a row: side 0 reads the child's
// columns of each (child, parent) pair, side 1 the parent's.
func linkValues(row datum.Row, types []datum.Type, links [][2]int, side int) ([]datum.Value, error) {
	vals, err := row.Decode(types, nil)
	if err != nil {
		return nil, err
	}
	out := make([]datum.Value, len(links))
	for i, l := range links {
		out[i] = vals[l[side]]
	}
	return out, nil
}

// identity names a parent entity: catalog, parent table and link values.
func identity(id uint32, parent string, link []datum.Value) string {
	b := keyspace.AppendUint32(nil, id)
	b = keyspace.AppendString(b, parent)
	for _, v := range link {
		switch {
		case v.IsNull():
			b = keyspace.AppendNull(b)
		case v.K == datum.KindText:
			b = keyspace.AppendString(b, v.S)
		default:
			b = keyspace.AppendInt(b, v.I)
		}
	}
	return string(b)
}

// finishParents writes every touched parent entity from the next version.
func (tr *translator) finishParents() error {
	for ident, pt := range tr.parents {
		t, err := tr.c.Next.Table(pt.schema, pt.codec.Def.Name)
		var rows []datum.Row
		if err == nil {
			rows = findParents(t, pt)
		}
		children := tr.p.children.rows(ident)
		if ch := tr.children[ident]; ch != nil {
			children = applyChildChange(children, ch)
		}
		if len(rows) == 0 && len(children) > 0 {
			return shapeErr("%d %s rows belong to no %s row (%s)", len(children),
				pt.codec.ChildTable().Def.Name, pt.codec.Def.Name, describeLink(pt))
		}
		final := map[string]bool{}
		for _, r := range rows {
			k, v, err := pt.codec.Encode(pt.catalogID, r, children)
			if err != nil {
				return shapeErr("%v", err)
			}
			final[string(k)] = true
			tr.pending[string(k)] = pendingKV{put: true, value: v, catalogID: pt.catalogID, table: pt.codec.Def.Name}
		}
		for k := range pt.keys {
			if !final[k] {
				tr.pending[k] = pendingKV{catalogID: pt.catalogID, table: pt.codec.Def.Name}
			}
		}
	}
	return nil
}

func describeLink(pt *parentTouch) string {
	var b bytes.Buffer
	for i, l := range pt.codec.ChildTable().Spec.ParentLink {
		if i > 0 {
			b.WriteString(", ")
		}
		v := pt.link[i]
		fmt.Fprintf(&b, "%s=%s", pt.codec.Def.Columns[l[1]].Name, datum.FormatText(pt.codec.Types()[l[1]], v))
	}
	return b.String()
}

// findParents returns the rows of t whose link columns equal pt.link: by
// primary key when the table has one, else by a scan (partition and sort
// specs are small tables).
func findParents(t *catalog.Table, pt *parentTouch) []datum.Row {
	links := pt.codec.ChildTable().Spec.ParentLink
	match := func(r datum.Row) bool {
		vals, err := r.Decode(t.Types(), nil)
		if err != nil {
			return false
		}
		for i, l := range links {
			if !datum.Equal(vals[l[1]], pt.link[i]) {
				return false
			}
		}
		return true
	}
	def := t.Def()
	if len(def.PrimaryKey) > 0 {
		key := make([]datum.Value, 0, len(def.PrimaryKey))
		ok := true
		for _, pk := range def.PrimaryKey {
			found := false
			for i, l := range links {
				if l[1] == pk {
					key = append(key, pt.link[i])
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			if _, r, found := t.LookupKey(key); found && match(r) {
				return []datum.Row{r}
			}
			return nil
		}
	}
	var out []datum.Row
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if match(r) {
			out = append(out, r)
		}
		return true
	})
	return out
}

func applyChildChange(base []datum.Row, ch *childChange) []datum.Row {
	out := append([]datum.Row(nil), base...)
	for _, r := range ch.removed {
		for i := range out {
			if bytes.Equal(out[i], r) {
				out = append(out[:i], out[i+1:]...)
				break
			}
		}
	}
	return append(out, ch.added...)
}

func (tr *translator) put(key, value []byte, id uint32, table string) {
	tr.pending[string(key)] = pendingKV{put: true, value: value, catalogID: id, table: table}
}

// emit builds the batch: table definitions, rows, heads; sorted by key so the
// batch is deterministic.
func (tr *translator) emit() (*translation, error) {
	for d := range tr.defs {
		k := keyspace.TableDefKey(d.catalogID, d.table)
		if t, err := tr.c.Next.Table(d.schema, d.table); err == nil {
			// What the loader would refuse must not be stored: a table
			// DuckLake does not create, or one altered out of its shape,
			// would leave a store no server can load.
			if err := keyspace.ValidateDef(t.Def()); err != nil {
				return nil, &Error{Kind: ErrShape, Code: pgcode.FeatureNotSupported, Message: fmt.Sprintf(
					"moraine does not support this table definition: %s", err)}
			}
			if other := tr.sameKind(d.schema, d.table); other != "" {
				return nil, &Error{Kind: ErrShape, Code: pgcode.FeatureNotSupported, Message: fmt.Sprintf(
					"moraine does not support %s beside %s: DuckLake keeps one of them (the table was renamed at catalog version 0.3)", d.table, other)}
			}
			tr.put(k, keyspace.EncodeTableDef(t.Def()), d.catalogID, "")
		} else {
			tr.pending[string(k)] = pendingKV{catalogID: d.catalogID}
		}
	}
	// A put for a table that does not exist after the commit (inserted, then
	// dropped) must not reach the store.
	exists := map[defRef]bool{}
	for k, e := range tr.pending {
		if !e.put || e.table == "" {
			continue
		}
		ref := defRef{catalogID: e.catalogID, table: e.table}
		ok, seen := exists[ref]
		if !seen {
			ok = tr.tableExists(e.catalogID, e.table)
			exists[ref] = ok
		}
		if !ok {
			tr.pending[k] = pendingKV{catalogID: e.catalogID, table: e.table}
		}
	}
	heads := map[uint32]headState{}
	for id := range tr.catalogs {
		if tr.dropped[id] {
			continue
		}
		h, ok := tr.p.heads[id]
		if !ok {
			ref, isNew := tr.newCats[id]
			if !isNew {
				ref = tr.refOf(id)
			}
			h = headState{head: keyspace.Head{FormatVersion: keyspace.FormatVersion, Database: ref.Database, Schema: ref.Schema}}
			// The catalog's first durable commit also records its name: a
			// database's "public" schema exists before any commit names it.
			// A branch's catalogs are named by its record.
			if tr.c.DB.Branch() == nil {
				tr.put(keyspace.RegistryKey(ref.Database, ref.Schema), keyspace.EncodeRegistryValue(id), keyspace.StoreCatalogID, "")
			}
		}
		h.head.Commits++
		if s, ok := tr.minted[id]; ok && (!h.head.HasSnapshot || s > h.head.Snapshot) {
			h.head.Snapshot, h.head.HasSnapshot = s, true
		}
		heads[id] = h
		tr.put(keyspace.HeadKey(id), keyspace.EncodeHead(h.head), id, "")
	}
	tr.hideDeletes()
	keys := make([]string, 0, len(tr.pending))
	for k := range tr.pending {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The keys and values are the translator's own and go nowhere else:
	// the batch takes them without copying.
	b := slate.NewBatchSized(len(keys))
	written := make([]keyWrite, len(keys))
	for i, k := range keys {
		e := tr.pending[k]
		if e.put {
			b.PutOwned([]byte(k), e.value)
		} else {
			b.DeleteOwned([]byte(k))
		}
		// A hidden value is a delete to the duplicate check.
		written[i] = keyWrite{k, e.put && !keyspace.Hidden(e.value)}
	}
	return &translation{batch: b, keys: written, children: tr.children, heads: heads, dropped: tr.dropped, fork: tr.fork, forkChildren: tr.forkChildren}, nil
}

// sameKind returns the other table of schema in the next version whose rows
// are stored under the same kind as table's (a fixed table under its name
// before and after a DuckLake rename), "" if there is none: the two would
// share keys.
func (tr *translator) sameKind(schema, table string) string {
	spec, ok := keyspace.Known(table)
	if !ok || spec.Dynamic || spec.Embedded() {
		return ""
	}
	for _, name := range keyspace.KindTables(spec.Kind) {
		if name == table {
			continue
		}
		if _, err := tr.c.Next.Table(schema, name); err == nil {
			return name
		}
	}
	return ""
}

func (tr *translator) tableExists(id uint32, name string) bool {
	for _, s := range tr.c.Next.Schemas() {
		if id == s.CatalogID {
			_, ok := s.Table(name)
			return ok
		}
	}
	return false
}

func (tr *translator) refOf(id uint32) catalog.CatalogRef {
	for _, s := range tr.c.Next.Schemas() {
		if id == s.CatalogID {
			return catalog.CatalogRef{Database: tr.c.DB.Name(), Schema: s.Name}
		}
	}
	return catalog.CatalogRef{Database: tr.c.DB.Name()}
}

// publish folds a durable commit into the pipeline's indexes.
func (t *translation) publish(p *Pipeline) {
	if t.fork != nil {
		p.forkCatalogs(t.fork, t.forkChildren)
	}
	t.branchKeys(p)
	for ident, ch := range t.children {
		p.children.set(ident, applyChildChange(p.children.rows(ident), ch))
	}
	for id, h := range t.heads {
		p.heads[id] = h
	}
	for id := range t.dropped {
		delete(p.heads, id)
	}
}
