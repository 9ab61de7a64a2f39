package keyspace

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
)

// Key layout of a DuckLake row (docs/storage-format.md has the byte table):
//
//	catalog id   uint32
//	kind         byte
//	subspace     byte, versioned kinds only: 0x01 current, 0x02 history
//	name fields  dynamic tables only: table_id, then schema_version for
//	             inlined data (int fields)
//	entity key   TableSpec.EntityKey columns in order (int or string fields)
//	begin        begin_snapshot, for versioned tables without a primary key
//	end          end_snapshot, history keys only
//
// The key is a pure function of the catalog id, the table and the row.

// Format version bytes of values. They only ratchet; a retired value stays
// reserved.
const (
	valueFormatV1 byte = 0x01
)

// Table is the codec for one table of a catalog: a validated TableDef bound
// to its TableSpec. It is immutable and safe for concurrent use.
type Table struct {
	Def   TableDef
	Spec  *TableSpec
	types []datum.Type
	// keyCols are the row columns read for the key, in key order, and
	// keyStr marks string fields; maxKeyCol bounds the columns decoded.
	keyCols   []int
	keyStr    []bool
	maxKeyCol int
	// child is the embedded table of a parent kind.
	child *Table
}

// NewTable validates def and returns its codec.
func NewTable(def TableDef) (*Table, error) {
	if err := ValidateDef(&def); err != nil {
		return nil, err
	}
	spec, _ := Known(def.Name)
	return newTable(def.Clone(), spec), nil
}

func newTable(def TableDef, spec *TableSpec) *Table {
	t := &Table{Def: def, Spec: spec, types: def.Types()}
	t.keyCols = append(t.keyCols, spec.EntityKey...)
	if spec.keyHasBegin() {
		t.keyCols = append(t.keyCols, spec.Begin)
	}
	for _, c := range t.keyCols {
		// A key column an older version's table lacks (0.3's
		// schema_versions.table_id) reads as NULL.
		var typ datum.Type
		if c < len(t.types) {
			typ = t.types[c]
		} else {
			typ = spec.Columns[c].Type
		}
		t.keyStr = append(t.keyStr, typ.Kind() == datum.KindText)
		t.maxKeyCol = max(t.maxKeyCol, c)
	}
	if spec.End > t.maxKeyCol {
		t.maxKeyCol = spec.End
	}
	t.maxKeyCol = min(t.maxKeyCol, len(t.types)-1)
	if spec.Child != "" {
		cs := fixedByName[spec.Child]
		t.child = newTable(TableDef{Schema: def.Schema, Name: cs.Name, Columns: cs.Columns}, cs)
	}
	return t
}

// staticTable returns the codec of a fixed or inlined-delete table at its
// newest column set, for decoding without a catalog's definitions.
func staticTable(spec *TableSpec) *Table {
	return newTable(TableDef{Name: spec.Name, Columns: spec.Columns, PrimaryKey: spec.PrimaryKey}, spec)
}

// KeyColumns returns the indexes of the columns the key is built from, in
// key order (entity key, then begin_snapshot where it is a key field; the
// subspace and history suffix come from end_snapshot). An UPDATE that
// changes none of these columns nor end_snapshot keeps the row's key.
func (t *Table) KeyColumns() []int { return append([]int(nil), t.keyCols...) }

// Types returns the column types of the table.
func (t *Table) Types() []datum.Type { return t.types }

// ChildTable returns the codec of the embedded child table (nil if none).
func (t *Table) ChildTable() *Table { return t.child }

// Subspace returns where row lives: SubNone for unversioned tables, else
// SubCurrent when its end_snapshot is NULL and SubHistory otherwise.
func (t *Table) Subspace(row datum.Row) (Subspace, error) {
	if !t.Spec.Versioned() {
		return SubNone, nil
	}
	v, err := row.Column(t.types, t.Spec.End)
	if err != nil {
		return 0, fmt.Errorf("keyspace: %s: %w", t.Def.Name, err)
	}
	if v.IsNull() {
		return SubCurrent, nil
	}
	return SubHistory, nil
}

// Key returns the key of row in catalog catalogID.
func (t *Table) Key(catalogID uint32, row datum.Row) ([]byte, error) {
	return t.AppendKey(nil, catalogID, row)
}

// AppendKey appends the key of row to dst.
func (t *Table) AppendKey(dst []byte, catalogID uint32, row datum.Row) ([]byte, error) {
	if t.Spec.Embedded() {
		return nil, fmt.Errorf("keyspace: %s rows are embedded in %s values and have no key of their own", t.Def.Name, t.Spec.Parent)
	}
	if catalogID == StoreCatalogID {
		return nil, fmt.Errorf("keyspace: %s: catalog id 0 is reserved for store-global records", t.Def.Name)
	}
	var buf [24]datum.Value
	vals, err := row.Decode(t.types[:t.maxKeyCol+1], buf[:0])
	if err != nil {
		return nil, fmt.Errorf("keyspace: %s: key columns: %w", t.Def.Name, err)
	}
	return t.keyFromVals(dst, catalogID, vals), nil
}

// keyFromVals appends the key of a row given its decoded values; columns
// beyond len(vals) are NULL (a row stored before a migration added them).
func (t *Table) keyFromVals(dst []byte, catalogID uint32, vals []datum.Value) []byte {
	col := func(i int) datum.Value {
		if i < len(vals) {
			return vals[i]
		}
		return datum.Null
	}
	dst = AppendUint32(dst, catalogID)
	dst = append(dst, byte(t.Spec.Kind))
	var end datum.Value
	if t.Spec.Versioned() {
		end = col(t.Spec.End)
		if end.IsNull() {
			dst = append(dst, byte(SubCurrent))
		} else {
			dst = append(dst, byte(SubHistory))
		}
	}
	if t.Spec.Dynamic {
		dst = AppendInt(dst, t.Spec.TableID)
		if t.Spec.Kind == KindInlinedRow {
			dst = AppendInt(dst, t.Spec.SchemaVersion)
		}
	}
	for i, c := range t.keyCols {
		v := col(c)
		switch {
		case v.IsNull():
			dst = AppendNull(dst)
		case t.keyStr[i]:
			dst = AppendString(dst, v.S)
		default:
			dst = AppendInt(dst, v.I)
		}
	}
	if !end.IsNull() {
		dst = AppendInt(dst, end.I)
	}
	return dst
}

// Encode returns the key and value of row with its embedded children (only
// for parent kinds: data files carry ducklake_file_partition_value rows,
// partition specs ducklake_partition_column rows, sort specs
// ducklake_sort_expression rows). Rows are datum.Row encodings in the table's
// physical column order; they may have fewer columns than the table (rows
// written before a migration added columns) but not more. Children must
// belong to row (same data_file_id/partition_id/sort_id and table_id); they
// are stored in the order given.
func (t *Table) Encode(catalogID uint32, row datum.Row, children []datum.Row) (key, value []byte, err error) {
	key, err = t.Key(catalogID, row)
	if err != nil {
		return nil, nil, err
	}
	value, err = t.EncodeValue(nil, row, children)
	if err != nil {
		return nil, nil, err
	}
	return key, value, nil
}

// EncodeValue appends the value of row with its children to dst.
func (t *Table) EncodeValue(dst []byte, row datum.Row, children []datum.Row) ([]byte, error) {
	sc := getScratch()
	defer putScratch(sc)
	if _, err := t.canonical(row, sc, false); err != nil {
		return nil, err
	}
	dst = append(dst, valueFormatV1)
	if t.child == nil {
		if len(children) != 0 {
			return nil, fmt.Errorf("keyspace: %s has no embedded rows, got %d", t.Def.Name, len(children))
		}
		return append(dst, row...), nil
	}
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	dst = append(dst, row...)
	dst = binary.AppendUvarint(dst, uint64(len(children)))
	for i, c := range children {
		if err := t.checkChild(c, sc); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", t.child.Def.Name, i, err)
		}
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst, nil
}

// scratch holds the buffers of one encode or decode, pooled so that the
// load path (millions of records) allocates nothing per record.
type scratch struct {
	vals, cvals []datum.Value
	key         []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(s *scratch) {
	// Drop references into row memory so the pool does not pin it.
	clear(s.vals[:cap(s.vals)])
	clear(s.cvals[:cap(s.cvals)])
	scratchPool.Put(s)
}

// canonical verifies that r is the canonical row encoding of at most the
// table's columns (datum.Row.DecodeCanonical) and returns its decoded
// values (into sc.vals, or sc.cvals when child is set).
func (t *Table) canonical(r datum.Row, sc *scratch, child bool) ([]datum.Value, error) {
	buf := sc.vals
	if child {
		buf = sc.cvals
	}
	vals, err := r.DecodeCanonical(t.types, buf[:0])
	if child {
		sc.cvals = vals
	} else {
		sc.vals = vals
	}
	if err != nil {
		return nil, fmt.Errorf("keyspace: %s: %w", t.Def.Name, err)
	}
	return vals, nil
}

// checkChild verifies that child is a canonical row of the embedded table
// and belongs to the parent whose values are in sc.vals.
func (t *Table) checkChild(child datum.Row, sc *scratch) error {
	cv, err := t.child.canonical(child, sc, true)
	if err != nil {
		return err
	}
	at := func(vals []datum.Value, i int) datum.Value {
		if i < len(vals) {
			return vals[i]
		}
		return datum.Null
	}
	for _, l := range t.child.Spec.ParentLink {
		c, p := at(cv, l[0]), at(sc.vals, l[1])
		if !datum.Equal(c, p) {
			return fmt.Errorf("keyspace: %s row has %s %s, its %s row has %s",
				t.child.Def.Name, t.child.Def.Columns[l[0]].Name, show(c), t.Def.Name, show(p))
		}
	}
	return nil
}

func show(v datum.Value) string {
	if v.IsNull() {
		return "NULL"
	}
	if v.K == datum.KindText {
		return fmt.Sprintf("%q", v.S)
	}
	return fmt.Sprint(v.I)
}

// EncodeEntity is Table.Encode for a one-off definition: it validates def,
// then encodes row and its embedded children. Callers encoding many rows of
// one table keep a *Table instead.
func EncodeEntity(catalogID uint32, def TableDef, row datum.Row, children ...datum.Row) (key, value []byte, err error) {
	t, err := NewTable(def)
	if err != nil {
		return nil, nil, err
	}
	return t.Encode(catalogID, row, children)
}

// Entity is a decoded DuckLake record: one row and, for parent kinds, the
// rows of its embedded child table. Rows alias the value passed to DecodeKV.
type Entity struct {
	CatalogID  uint32
	Kind       Kind
	Sub        Subspace
	Table      string // the table Row belongs to
	Row        datum.Row
	ChildTable string      // the embedded table, for parent kinds
	Children   []datum.Row // rows of ChildTable, in stored order
}

// DefLookup returns a catalog's definition of a table. DecodeKV needs it for
// ducklake_inlined_data_<t>_<v> rows, whose column types are the catalog's
// own; for fixed tables it is optional (without it rows are checked against
// the newest known column set).
type DefLookup func(catalogID uint32, table string) (*Table, bool)

// DecodeKV decodes a stored DuckLake record back into the rows it holds. It
// refuses (ErrCorrupt) bytes that do not parse, rows that are not canonical
// for their table, children that do not belong to their parent, and a key
// that is not the key of the decoded row; it refuses (ErrUnknownShape) value
// format versions and kinds it does not know. Keys of the catalog's own
// metadata (registry, meta, table definitions) are ErrUnknownShape here:
// read them with their own decoders.
func DecodeKV(key, value []byte, defs DefLookup) (Entity, error) {
	e, _, err := DecodeKVValues(key, value, defs, nil)
	return e, err
}

// DecodeKVValues is DecodeKV that also returns the values of the entity's
// row, decoded (as checking it decodes them anyway) into vals, reused when
// large enough: one per column the row stores, which may be fewer than
// the table has. Text values alias value.
func DecodeKVValues(key, value []byte, defs DefLookup, vals []datum.Value) (Entity, []datum.Value, error) {
	e, err := decodeKV(key, value, defs, &vals)
	return e, vals, err
}

func decodeKV(key, value []byte, defs DefLookup, out *[]datum.Value) (Entity, error) {
	r := NewKeyReader(key)
	e := Entity{CatalogID: r.Uint32(), Kind: Kind(r.Byte())}
	if err := r.Err(); err != nil {
		return Entity{}, err
	}
	if !e.Kind.IsRowKind() {
		return Entity{}, fmt.Errorf("%w: %v is not a row kind", ErrUnknownShape, e.Kind)
	}
	if e.CatalogID == StoreCatalogID {
		return Entity{}, fmt.Errorf("%w: %v row in the reserved catalog 0", ErrCorrupt, e.Kind)
	}
	if e.Kind.Versioned() {
		e.Sub = Subspace(r.Byte())
		if e.Sub != SubCurrent && e.Sub != SubHistory && r.Err() == nil {
			return Entity{}, fmt.Errorf("%w: key: subspace 0x%02x", ErrCorrupt, byte(e.Sub))
		}
	}
	name := kinds[e.Kind].table
	if e.Kind == KindInlinedRow || e.Kind == KindInlinedDelete {
		tid, null := r.Int()
		if null && r.Err() == nil {
			return Entity{}, fmt.Errorf("%w: key: NULL table id", ErrCorrupt)
		}
		name = InlinedDeleteTableName(tid)
		if e.Kind == KindInlinedRow {
			sv, null := r.Int()
			if null && r.Err() == nil {
				return Entity{}, fmt.Errorf("%w: key: NULL schema version", ErrCorrupt)
			}
			name = InlinedDataTableName(tid, sv)
		}
		if err := r.Err(); err != nil {
			return Entity{}, err
		}
		if _, ok := Known(name); !ok {
			return Entity{}, fmt.Errorf("%w: key: table %q", ErrCorrupt, name)
		}
	}
	var t *Table
	if defs != nil {
		t, _ = defs(e.CatalogID, name)
		if t == nil && kinds[e.Kind].legacy != "" {
			// A catalog from before 0.3 holds the kind under its old name.
			if t, _ = defs(e.CatalogID, kinds[e.Kind].legacy); t != nil {
				name = kinds[e.Kind].legacy
			}
		}
	}
	switch {
	case t != nil:
		if t.Def.Name != name {
			return Entity{}, fmt.Errorf("keyspace: definition lookup for %s returned table %q", name, t.Def.Name)
		}
	case e.Kind == KindInlinedRow:
		return Entity{}, fmt.Errorf("%w: catalog %d has no definition of %s", ErrUnknownShape, e.CatalogID, name)
	case e.Kind == KindInlinedDelete:
		spec, _ := Known(name)
		t = staticTable(spec)
	default:
		t = staticTables[e.Kind]
	}
	e.Table = t.Def.Name
	if len(value) == 0 {
		return Entity{}, fmt.Errorf("%w: %s: empty value", ErrCorrupt, e.Table)
	}
	if value[0] != valueFormatV1 {
		return Entity{}, fmt.Errorf("%w: %s: value format version %d", ErrUnknownShape, e.Table, value[0])
	}
	body := value[1:]
	if t.child == nil {
		e.Row = datum.Row(body)
	} else {
		e.ChildTable = t.child.Def.Name
		row, rest, err := lenPrefixed(body)
		if err != nil {
			return Entity{}, fmt.Errorf("%s: %w", e.Table, err)
		}
		e.Row = row
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)) {
			return Entity{}, fmt.Errorf("%w: %s: bad child count", ErrCorrupt, e.Table)
		}
		rest = rest[k:]
		if n > 0 {
			e.Children = make([]datum.Row, 0, n)
		}
		for i := uint64(0); i < n; i++ {
			var c datum.Row
			c, rest, err = lenPrefixed(rest)
			if err != nil {
				return Entity{}, fmt.Errorf("%s child %d: %w", e.Table, i, err)
			}
			e.Children = append(e.Children, c)
		}
		if len(rest) != 0 {
			return Entity{}, fmt.Errorf("%w: %s: %d trailing bytes", ErrCorrupt, e.Table, len(rest))
		}
	}
	sc := getScratch()
	if out != nil {
		// Decode into the caller's buffer, which is handed back and
		// never pooled.
		sc.vals = (*out)[:0]
		defer func() { *out, sc.vals = sc.vals, nil; putScratch(sc) }()
	} else {
		defer putScratch(sc)
	}
	vals, err := t.canonical(e.Row, sc, false)
	if err != nil {
		return Entity{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	sc.key = t.keyFromVals(sc.key[:0], e.CatalogID, vals)
	if string(sc.key) != string(key) {
		return Entity{}, fmt.Errorf("%w: %s: key [%s] does not match its row, whose key is [%s]",
			ErrCorrupt, e.Table, FormatKey(key), FormatKey(sc.key))
	}
	for _, c := range e.Children {
		if err := t.checkChild(c, sc); err != nil {
			return Entity{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	return e, nil
}

func lenPrefixed(b []byte) (datum.Row, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: bad length prefix", ErrCorrupt)
	}
	return datum.Row(b[k : k+int(n)]), b[k+int(n):], nil
}

// staticTables are the codecs of the fixed parent tables at their newest
// column sets, keyed by kind.
var staticTables = buildStaticTables()

func buildStaticTables() (m [256]*Table) {
	for _, s := range fixedOrder {
		if !s.Embedded() {
			m[s.Kind] = staticTable(s)
		}
	}
	return m
}

// StaticTable returns the codec of a fixed table at its newest column set.
func StaticTable(name string) (*Table, bool) {
	s, ok := fixedByName[name]
	if !ok {
		return nil, false
	}
	if s.Embedded() {
		return staticTables[s.Kind].child, true
	}
	return staticTables[s.Kind], true
}

// KeyValues decodes a row key of table t back into the values of the
// columns it holds: the entity key columns and, for a history key, the
// end column (NULL for a current key). The result has one value per column
// of t, NULL where the key says nothing. It is the inverse of the key
// function on the columns the key holds: a row with these values there has
// exactly this key.
func (t *Table) KeyValues(catalogID uint32, key []byte) ([]datum.Value, error) {
	r := NewKeyReader(key)
	if r.Uint32() != catalogID || Kind(r.Byte()) != t.Spec.Kind {
		if r.Err() == nil {
			return nil, fmt.Errorf("%w: key %s is not a %s key of catalog %d", ErrCorrupt, FormatKey(key), t.Def.Name, catalogID)
		}
		return nil, r.Err()
	}
	history := false
	if t.Spec.Versioned() {
		history = Subspace(r.Byte()) == SubHistory
	}
	if t.Spec.Dynamic {
		r.Int()
		if t.Spec.Kind == KindInlinedRow {
			r.Int()
		}
	}
	vals := make([]datum.Value, len(t.types))
	for i, c := range t.keyCols {
		if t.keyStr[i] {
			if s, null := r.String(); !null {
				vals[c] = datum.Value{K: datum.KindText, S: s}
			}
		} else if n, null := r.Int(); !null {
			vals[c] = datum.Value{K: t.types[c].Kind(), I: n}
		}
	}
	if history {
		if n, null := r.Int(); !null {
			vals[t.Spec.End] = datum.Value{K: t.types[t.Spec.End].Kind(), I: n}
		}
	}
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("%w: %s key: %v", ErrCorrupt, t.Def.Name, err)
	}
	if got := t.keyFromVals(nil, catalogID, vals); string(got) != string(key) {
		return nil, fmt.Errorf("%w: %s key %s does not round-trip", ErrCorrupt, t.Def.Name, FormatKey(key))
	}
	return vals, nil
}

// RowKeyTable returns the catalog and the table of a row key.
func RowKeyTable(key []byte) (catalogID uint32, table string, err error) {
	r := NewKeyReader(key)
	catalogID = r.Uint32()
	kind := Kind(r.Byte())
	if err := r.Err(); err != nil {
		return 0, "", err
	}
	if !kind.IsRowKind() {
		return 0, "", fmt.Errorf("%w: %v is not a row kind", ErrUnknownShape, kind)
	}
	if kind.Versioned() {
		r.Byte()
	}
	name := kinds[kind].table
	if kind == KindInlinedRow || kind == KindInlinedDelete {
		tid, null := r.Int()
		if null && r.Err() == nil {
			return 0, "", fmt.Errorf("%w: key: NULL table id", ErrCorrupt)
		}
		name = InlinedDeleteTableName(tid)
		if kind == KindInlinedRow {
			sv, null := r.Int()
			if null && r.Err() == nil {
				return 0, "", fmt.Errorf("%w: key: NULL schema version", ErrCorrupt)
			}
			name = InlinedDataTableName(tid, sv)
		}
	}
	if err := r.Err(); err != nil {
		return 0, "", err
	}
	return catalogID, name, nil
}
