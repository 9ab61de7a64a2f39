package catalog

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/tidwall/btree"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// rowItem is one row of a table: its locator and its compact encoding.
type rowItem struct {
	ctid CTID
	row  datum.Row
}

// pkItem maps an encoded primary key to the row holding it.
type pkItem struct {
	key  string
	ctid CTID
}

// lookItem is one entry of a lookup index: the encoded lookup columns of
// the row at ctid. Several rows may share a key; the ctid orders them.
type lookItem struct {
	key  string
	ctid CTID
}

func rowLess(a, b rowItem) bool { return a.ctid < b.ctid }
func pkLess(a, b pkItem) bool   { return a.key < b.key }
func lookLess(a, b lookItem) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.ctid < b.ctid
}

// btreeDegree trades node size for depth. A transaction's first write to a
// published table copies every node on the path it changes (the trees are
// persistent), and DuckLake's commits write six or so tables each, so
// smaller nodes copy less: at 16, a 16-writer DuckLake commit run went
// from ~830 to ~950 commits/s against 64, for 7% more heap per data file
// (`moraine bench catalog --files=300000`: 1 064 against 991 bytes) and the
// same load and scan rates. At 12 the executor's DuckLake commit benchmark
// allocates 17% less than at 16 (111 against 134 KB per commit) and the
// binary COPY of ducklake_data_file scans as fast (BenchmarkCopyDataFile:
// 8.9–9.1 against 8.4–8.6 M rows/s); at 8 it allocates 20% less but scans
// 8% slower.
const btreeDegree = 12

// treeOptions leaves out the B-tree's own read-write lock. Concurrency here
// is by immutability: a published table's trees are never written (writers
// copy them, see own and copyTree), and an owned table's trees belong to one
// builder. The lock would only cost every read of a shared tree two atomic
// updates of one cache line that all cores contend for.
var treeOptions = btree.Options{Degree: btreeDegree, NoLocks: true}

func newRowTree() *btree.BTreeG[rowItem] { return btree.NewBTreeGOptions(rowLess, treeOptions) }

func newPKTree() *btree.BTreeG[pkItem] { return btree.NewBTreeGOptions(pkLess, treeOptions) }

func newLookTree() *btree.BTreeG[lookItem] { return btree.NewBTreeGOptions(lookLess, treeOptions) }

// copyTree returns a copy of a published tree that the caller may write,
// without writing to the published one. (The B-tree's own Copy gives its
// receiver a new copy-on-write id so that the receiver's later writes copy
// shared nodes too: a write to the published tree's header, which other
// goroutines read and copy concurrently. A published tree is never written
// again, so the copy is taken from a private duplicate of its header.)
func copyTree[T any](t *btree.BTreeG[T]) *btree.BTreeG[T] {
	header := *t
	return header.IsoCopy()
}

// TableInfo is the immutable description of a table at one version: its
// definition and the PostgreSQL object ids the SQL layer's pg_catalog
// emulation reports. DDL replaces a TableInfo, never modifies it.
type TableInfo struct {
	Def keyspace.TableDef
	// OID is pg_class.oid of the table.
	OID uint32
	// IndexOID and ConstraintOID are the oids of the primary key's index
	// (pg_class/pg_index) and constraint (pg_constraint); 0 without a key.
	IndexOID      uint32
	ConstraintOID uint32
	// SchemaOID is pg_namespace.oid of the table's schema.
	SchemaOID uint32

	types   []datum.Type
	pkTypes []datum.Type
	layout  []colLayout
	// lookCols are the columns of the table's lookup index
	// (keyspace.TableSpec.Lookup), nil without one; lookTypes their types.
	lookCols  []int
	lookTypes []datum.Type

	// codec is Def's keyspace codec, made at its first use (Codec). It
	// lives and goes with the definition it encodes: a cache of codecs
	// keyed by definition elsewhere would keep every dropped table's
	// TableInfo alive.
	codecOnce sync.Once
	codec     *keyspace.Table
	codecErr  error
}

// Codec returns the keyspace codec of the table's definition: how its rows
// are keyed and encoded in the store.
func (ti *TableInfo) Codec() (*keyspace.Table, error) {
	ti.codecOnce.Do(func() { ti.codec, ti.codecErr = keyspace.NewTable(ti.Def) })
	return ti.codec, ti.codecErr
}

// tupleLen is TupleLen with the table's precomputed layout.
func (ti *TableInfo) tupleLen(vals []datum.Value) int { return tupleLen(ti.layout, ti.types, vals) }

func newTableInfo(def keyspace.TableDef, oid, indexOID, constraintOID, schemaOID uint32) *TableInfo {
	ti := &TableInfo{Def: def, OID: oid, IndexOID: indexOID, ConstraintOID: constraintOID, SchemaOID: schemaOID}
	ti.types = def.Types()
	ti.layout = makeLayout(ti.types)
	for _, i := range def.PrimaryKey {
		ti.pkTypes = append(ti.pkTypes, def.Columns[i].Type)
	}
	ti.lookCols = lookupColumns(&def)
	for _, i := range ti.lookCols {
		ti.lookTypes = append(ti.lookTypes, def.Columns[i].Type)
	}
	return ti
}

// lookupColumns returns the positions in def of the lookup index columns
// keyspace declares for a DuckLake table without a primary key, matched by
// name; nil when the table has a primary key, is not a DuckLake table or
// lacks one of the columns.
func lookupColumns(def *keyspace.TableDef) []int {
	spec, ok := keyspace.Known(def.Name)
	if !ok || len(spec.Lookup) == 0 || len(def.PrimaryKey) > 0 {
		return nil
	}
	cols := make([]int, len(spec.Lookup))
	for i, c := range spec.Lookup {
		j := def.ColumnIndex(spec.Columns[c].Name)
		if j < 0 || def.Columns[j].Type.Kind() != spec.Columns[c].Type.Kind() {
			return nil
		}
		cols[i] = j
	}
	return cols
}

// lookKeyOf extracts and encodes the lookup columns of a full row of
// values. A NULL encodes as the zero value of its column's kind: the index
// may then offer rows that do not match, never miss one that does, and its
// users re-check every row they are offered.
func (ti *TableInfo) lookKeyOf(vals []datum.Value) string {
	return keyOf(ti.lookCols, ti.lookTypes, vals)
}

// Table is one table at one version. A *Table handed out by a Version or a
// Txn is immutable: it never changes, whatever commits or writes follow.
type Table struct {
	info *TableInfo
	rows *btree.BTreeG[rowItem]
	pk   *btree.BTreeG[pkItem] // nil when the table has no primary key
	// look is the lookup index (TableInfo.lookCols), nil without one.
	// INVARIANT: it holds exactly one entry per row, under the row's
	// lookKeyOf and ctid.
	look *btree.BTreeG[lookItem]
	heap heap
	// owner is the generation of the builder that may modify this table in
	// place; 0 once the table is frozen (published or handed out).
	owner uint64
	// view caches a frozen copy of an owned table for the owner's reads;
	// reset by every write.
	view *Table
}

func newTable(info *TableInfo, owner uint64) *Table {
	t := &Table{info: info, rows: newRowTree(), heap: newHeap(), owner: owner}
	if len(info.Def.PrimaryKey) > 0 {
		t.pk = newPKTree()
	}
	if info.lookCols != nil {
		t.look = newLookTree()
	}
	return t
}

// Info returns the table's description.
func (t *Table) Info() *TableInfo { return t.info }

// Def returns the table definition. The caller must not modify its slices.
func (t *Table) Def() *keyspace.TableDef { return &t.info.Def }

// Codec returns the keyspace codec of the table's definition.
func (t *Table) Codec() (*keyspace.Table, error) { return t.info.Codec() }

// Name returns the table name.
func (t *Table) Name() string { return t.info.Def.Name }

// OID returns pg_class.oid.
func (t *Table) OID() uint32 { return t.info.OID }

// Types returns the column types in physical order; the caller must not
// modify the slice.
func (t *Table) Types() []datum.Type { return t.info.types }

// Len returns the number of live rows.
func (t *Table) Len() int { return t.rows.Len() }

// Pages returns the number of heap pages the emulated PostgreSQL heap has
// (what pg_class.relpages reports after ANALYZE).
func (t *Table) Pages() uint32 { return t.heap.npages }

// Scan calls fn for each live row in ctid order until fn returns false.
// Row bytes are immutable and may be retained.
//
// It walks the B-tree a leaf at a time and reads a byte at each end of
// every row of the leaf before handing them to fn. A row's bytes were
// allocated when it was last written, so the live rows of a table updated
// in place over many commits (ducklake_table_stats, rewritten by every
// insert into its table) lie scattered over the heap: visited one by one,
// each costs a cache miss that the next cannot start before. The loads of
// one leaf are independent, so the processor overlaps their misses: on the
// 10 000-row ducklake_table_stats of a built catalog this halves the time
// of its whole-table COPY.
func (t *Table) Scan(fn func(c CTID, r datum.Row) bool) {
	t.rows.Walk(func(items []rowItem) bool {
		var sum byte
		for _, it := range items {
			if r := it.row; len(r) > 0 {
				sum += r[0] + r[len(r)-1]
			}
		}
		runtime.KeepAlive(sum) // the loads are the point: keep them
		for _, it := range items {
			if !fn(it.ctid, it.row) {
				return false
			}
		}
		return true
	})
}

// Chunk is a run of consecutive rows of a frozen table (Frozen) as its
// B-tree holds them together: a leaf's rows, or one row kept in a branch.
type Chunk struct{ items []rowItem }

// ChunkKey names a chunk's rows: two chunks with equal keys hold the same
// rows, ctids and bytes. It holds no reference to them (a cache keyed by it
// keeps no table alive), and the key of a chunk whose node is gone never
// equals a later chunk's (weak pointers compare by object, not address).
type ChunkKey struct {
	first weak.Pointer[rowItem]
	n     int
}

// Len is the number of rows in the chunk.
func (c Chunk) Len() int { return len(c.items) }

// Row returns the chunk's i-th row. Row bytes are immutable.
func (c Chunk) Row(i int) (CTID, datum.Row) { return c.items[i].ctid, c.items[i].row }

// Key returns the chunk's key.
func (c Chunk) Key() ChunkKey { return ChunkKey{first: weak.Make(&c.items[0]), n: len(c.items)} }

// Touch reads a byte at each end of every row of the chunk: the loads are
// independent, so a caller about to read the rows one by one has their
// cache misses overlap (see Scan).
func (c Chunk) Touch() {
	var sum byte
	for _, it := range c.items {
		if r := it.row; len(r) > 0 {
			sum += r[0] + r[len(r)-1]
		}
	}
	runtime.KeepAlive(sum)
}

// Frozen reports whether the table can no longer change: a published
// table, or the frozen view of one a transaction is writing (Table); not
// the working table a transaction writes in place (Txn.Peek).
func (t *Table) Frozen() bool { return t.owner == 0 }

// Chunks calls fn with the table's rows in ctid order, a chunk at a time,
// until fn returns false. It reports false, without calling fn, for a table
// a transaction is still writing: its B-tree nodes change in place. A
// frozen table's nodes never change — a writer copies a node before writing
// it (own and copyTree for a published table; freeze gives the working
// table's trees new copy-on-write ids) — and that is what lets a chunk's
// key name its rows for as long as the key can be matched.
func (t *Table) Chunks(fn func(Chunk) bool) bool {
	if !t.Frozen() {
		return false
	}
	t.rows.Walk(func(items []rowItem) bool {
		return len(items) == 0 || fn(Chunk{items: items})
	})
	return true
}

// ScanFrom is Scan starting at the first row whose ctid is >= from.
func (t *Table) ScanFrom(from CTID, fn func(c CTID, r datum.Row) bool) {
	t.rows.Ascend(rowItem{ctid: from}, func(it rowItem) bool { return fn(it.ctid, it.row) })
}

// Lookup returns the row at ctid c.
func (t *Table) Lookup(c CTID) (datum.Row, bool) {
	it, ok := t.rows.Get(rowItem{ctid: c})
	return it.row, ok
}

// HasPrimaryKey reports whether the table has a primary key index.
func (t *Table) HasPrimaryKey() bool { return t.pk != nil }

// LookupKey finds the row whose primary key columns equal key (one value
// per primary key column, in PrimaryKey order) in O(log n).
func (t *Table) LookupKey(key []datum.Value) (CTID, datum.Row, bool) {
	if t.pk == nil || len(key) != len(t.info.pkTypes) {
		return 0, nil, false
	}
	it, ok := t.pk.Get(pkItem{key: string(encodePK(nil, t.info.pkTypes, key))})
	if !ok {
		return 0, nil, false
	}
	r, ok := t.Lookup(it.ctid)
	return it.ctid, r, ok
}

// EdgeKey returns the row holding the smallest (last false) or largest (last
// true) value of the first primary key column in O(log n), when that column
// sorts in the key index as in SQL (integers, dates, times, timestamps).
// ok is false when the table has no such key or no rows. It is what answers
// MIN/MAX of that column, DuckLake's "latest snapshot", without a scan.
func (t *Table) EdgeKey(last bool) (c CTID, r datum.Row, ok bool) {
	if t.pk == nil || !orderedKind(t.info.pkTypes[0].Kind()) {
		return 0, nil, false
	}
	var it pkItem
	if last {
		it, ok = t.pk.Max()
	} else {
		it, ok = t.pk.Min()
	}
	if !ok {
		return 0, nil, false
	}
	r, ok = t.Lookup(it.ctid)
	return it.ctid, r, ok
}

// AscendKeyFrom calls fn, in key order, for every row whose first primary
// key column is >= first, until fn returns false; O(log n) to start. It
// returns false without calling fn when the key index does not order that
// column as SQL does (see EdgeKey); the caller then scans.
func (t *Table) AscendKeyFrom(first datum.Value, fn func(c CTID, r datum.Row) bool) bool {
	if t.pk == nil || !orderedKind(t.info.pkTypes[0].Kind()) || first.IsNull() {
		return false
	}
	// The encoding of the first column alone is a prefix of every key that
	// starts with it, so it sorts at or before all of them.
	pivot := pkItem{key: string(encodePK(nil, t.info.pkTypes[:1], []datum.Value{first}))}
	t.pk.Ascend(pivot, func(it pkItem) bool {
		r, ok := t.Lookup(it.ctid)
		if !ok {
			return true
		}
		return fn(it.ctid, r)
	})
	return true
}

// LookupColumns returns the column positions of the table's lookup index
// (keyspace.TableSpec.Lookup), nil without one. The slice must not be
// modified.
func (t *Table) LookupColumns() []int { return t.info.lookCols }

// LookupPrefix calls fn, in ctid order, for every row whose first
// len(prefix) lookup columns may equal prefix (non-NULL values of the
// columns' kinds), until fn returns false. The index only narrows: a row
// with a NULL there may be offered too, so fn must re-check. ok is false,
// without calling fn, when the table has no lookup index or prefix does
// not fit it; the caller then scans.
func (t *Table) LookupPrefix(prefix []datum.Value, fn func(c CTID, r datum.Row) bool) (ok bool) {
	ti := t.info
	if t.look == nil || len(prefix) == 0 || len(prefix) > len(ti.lookCols) {
		return false
	}
	for i, v := range prefix {
		if v.IsNull() || v.K != ti.lookTypes[i].Kind() {
			return false
		}
	}
	// Every column encoding is self-delimiting (fixed width, or escaped
	// and terminated), so the prefix's encoding is a prefix exactly of the
	// keys of rows that start with those values.
	p := string(encodePK(nil, ti.lookTypes[:len(prefix)], prefix))
	var ctids []CTID
	t.look.Ascend(lookItem{key: p}, func(it lookItem) bool {
		if !strings.HasPrefix(it.key, p) {
			return false
		}
		ctids = append(ctids, it.ctid)
		return true
	})
	if len(prefix) < len(ti.lookCols) {
		slices.Sort(ctids) // entries are in ctid order only per whole key
	}
	for _, c := range ctids {
		r, found := t.Lookup(c)
		if found && !fn(c, r) {
			break
		}
	}
	return true
}

// syncLookup rebuilds the lookup index after DDL replaced the table's info
// old, when the columns it is on changed. REQUIRES: t is owned and its rows
// are encoded for t.info.
func (t *Table) syncLookup(old *TableInfo) error {
	if slices.Equal(old.lookCols, t.info.lookCols) {
		return nil
	}
	ti := t.info
	if ti.lookCols == nil {
		t.look = nil
		return nil
	}
	t.look = newLookTree()
	var err error
	t.rows.Scan(func(it rowItem) bool {
		vals, derr := it.row.Decode(ti.types, nil)
		if derr != nil {
			err = fmt.Errorf("%w: table %q row %s: %v", ErrCorrupt, ti.Def.Name, it.ctid, derr)
			return false
		}
		t.look.Set(lookItem{ti.lookKeyOf(vals), it.ctid})
		return true
	})
	return err
}

// CheckIndexes verifies the table's key and lookup indexes against its
// rows: one entry per row, under the row's key and ctid. It is O(n log n);
// tests and the checker run it, the server never needs to.
func (tb *Table) CheckIndexes() error {
	ti := tb.info
	want := map[CTID][2]string{}
	var err error
	tb.Scan(func(c CTID, r datum.Row) bool {
		vals, derr := r.Decode(ti.types, nil)
		if derr != nil {
			err = derr
			return false
		}
		var k [2]string
		if tb.pk != nil {
			k[0] = ti.pkKeyOf(vals)
		}
		if tb.look != nil {
			k[1] = ti.lookKeyOf(vals)
		}
		want[c] = k
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: table %q: %v", ErrCorrupt, ti.Def.Name, err)
	}
	if tb.pk != nil {
		if tb.pk.Len() != len(want) {
			return fmt.Errorf("key index has %d entries for %d rows", tb.pk.Len(), len(want))
		}
		tb.pk.Scan(func(it pkItem) bool {
			if k, ok := want[it.ctid]; !ok || k[0] != it.key {
				err = fmt.Errorf("key index entry %x for row %s, which has %x (present %v)", it.key, it.ctid, k[0], ok)
			}
			return err == nil
		})
	}
	if tb.look != nil {
		if tb.look.Len() != len(want) {
			return fmt.Errorf("lookup index has %d entries for %d rows", tb.look.Len(), len(want))
		}
		tb.look.Scan(func(it lookItem) bool {
			if k, ok := want[it.ctid]; !ok || k[1] != it.key {
				err = fmt.Errorf("lookup index entry %x for row %s, which has %x (present %v)", it.key, it.ctid, k[1], ok)
			}
			return err == nil
		})
	}
	return err
}

// PrimaryKey returns the column positions of the primary key, in key order
// (nil without one). The slice must not be modified.
func (t *Table) PrimaryKey() []int { return t.info.Def.PrimaryKey }

// pkKeyOf extracts and encodes the primary key of a full row of values.
func (ti *TableInfo) pkKeyOf(vals []datum.Value) string {
	return keyOf(ti.Def.PrimaryKey, ti.pkTypes, vals)
}

// keyText renders a row's key for the unique-violation DETAIL.
func (ti *TableInfo) keyText(vals []datum.Value) (cols, values string) {
	var c, v []string
	for _, i := range ti.Def.PrimaryKey {
		c = append(c, ti.Def.Columns[i].Name)
		if vals[i].IsNull() {
			v = append(v, "null")
		} else {
			v = append(v, datum.FormatText(ti.types[i], vals[i]))
		}
	}
	return strings.Join(c, ", "), strings.Join(v, ", ")
}

// checkRow validates a full row of values against the table definition.
func (ti *TableInfo) checkRow(vals []datum.Value) error {
	d := &ti.Def
	if len(vals) != len(d.Columns) {
		return errBadValue(d.Name, "%d values for %d columns", len(vals), len(d.Columns))
	}
	for i, v := range vals {
		c := &d.Columns[i]
		if v.IsNull() {
			if c.NotNull || ti.inPK(i) {
				return errNotNull(d.Name, c.Name)
			}
			continue
		}
		if k := c.Type.Kind(); v.K != k {
			return errBadValue(d.Name, "column %q is %s, value kind %d", c.Name, c.Type, v.K)
		}
	}
	return nil
}

func (ti *TableInfo) inPK(i int) bool {
	for _, p := range ti.Def.PrimaryKey {
		if p == i {
			return true
		}
	}
	return false
}

// freeze returns an immutable copy of an owned table in O(1); the owner
// keeps writing to its own trees, which copy shared nodes on write.
func (t *Table) freeze() *Table {
	if t.owner == 0 {
		return t
	}
	if t.view != nil {
		return t.view
	}
	// Copy, unlike copyTree, gives the owner's trees new copy-on-write ids,
	// which is what it must do: from here on their nodes are shared with f.
	f := &Table{info: t.info, rows: t.rows.Copy(), heap: t.heap.clone()}
	if t.pk != nil {
		f.pk = t.pk.Copy()
	}
	if t.look != nil {
		f.look = t.look.Copy()
	}
	// The frozen copy shares the heap chunks; give the owner a new heap
	// generation so that its next page write copies the chunk.
	t.heap.gen = heapGen.Add(1)
	t.view = f
	return f
}

// own returns a copy of a frozen table that the builder of generation gen
// may modify in place.
func (t *Table) own(gen uint64) *Table {
	if t.owner == gen {
		return t
	}
	o := &Table{info: t.info, rows: copyTree(t.rows), heap: t.heap.clone(), owner: gen}
	if t.pk != nil {
		o.pk = copyTree(t.pk)
	}
	if t.look != nil {
		o.look = copyTree(t.look)
	}
	return o
}

func (t *Table) String() string { return fmt.Sprintf("%s.%s", t.info.Def.Schema, t.info.Def.Name) }
