package catalog

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// PostgreSQL object ids moraine reports.
const (
	// PublicSchemaOID is pg_namespace.oid of "public" in every PostgreSQL.
	PublicSchemaOID uint32 = 2200
	// FirstNormalOID is where PostgreSQL starts user object ids.
	FirstNormalOID uint32 = 16384
)

// Schema is a namespace of a database at one version. Each schema holding
// DuckLake tables is one DuckLake catalog (the database plus its metadata
// schema); CatalogID is the id the keyspace keys of that catalog begin with.
// A *Schema handed out by a Version is immutable.
type Schema struct {
	Name      string
	OID       uint32
	CatalogID uint32
	tables    map[string]*Table
	owner     uint64
}

// Table returns the named table.
func (s *Schema) Table(name string) (*Table, bool) {
	t, ok := s.tables[name]
	if ok {
		t = t.freeze()
	}
	return t, ok
}

// Len is the number of tables in the schema.
func (s *Schema) Len() int { return len(s.tables) }

// EachTable calls fn for every table of the schema in no particular order:
// the allocation-free form of Tables for callers that do not need order.
func (s *Schema) EachTable(fn func(*Table)) {
	for _, t := range s.tables {
		fn(t.freeze())
	}
}

// Tables returns the schema's tables ordered by name.
func (s *Schema) Tables() []*Table {
	out := make([]*Table, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t.freeze())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].info.Def.Name < out[j].info.Def.Name })
	return out
}

// Version is one immutable state of a database: every schema and table, as
// of one commit. Pinning it is holding the pointer (O(1)); applying a commit
// yields a new Version that shares every unchanged table and every
// unchanged B-tree node with this one.
type Version struct {
	seq     uint64
	nextOID uint32
	schemas map[string]*Schema
	// ddlSeq counts the commits since the database was loaded that
	// changed a schema or a table definition (not its rows).
	ddlSeq uint64
	// spec is set on a sealed version (Txn.Seal): its fate.
	spec *speculation
}

func newVersion() *Version {
	return &Version{nextOID: FirstNormalOID, schemas: map[string]*Schema{}}
}

// Seq counts the commits applied since the database was created or loaded.
func (v *Version) Seq() uint64 { return v.seq }

// DDLSeq changes exactly when a commit changed a schema or a table
// definition: two versions with the same DDLSeq have the same tables with
// the same columns.
func (v *Version) DDLSeq() uint64 { return v.ddlSeq }

// NextOID is the object id the next CREATE will be given.
func (v *Version) NextOID() uint32 { return v.nextOID }

// Schema returns the named schema.
func (v *Version) Schema(name string) (*Schema, bool) {
	s, ok := v.schemas[name]
	return s, ok
}

// Schemas returns every schema ordered by OID.
func (v *Version) Schemas() []*Schema {
	out := make([]*Schema, 0, len(v.schemas))
	for _, s := range v.schemas {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OID < out[j].OID })
	return out
}

// Table returns the table schema.name.
func (v *Version) Table(schema, name string) (*Table, error) {
	s, ok := v.schemas[schema]
	if !ok {
		return nil, errNoSchema(schema)
	}
	t, ok := s.Table(name)
	if !ok {
		return nil, errNoTable(schema, name)
	}
	return t, nil
}

var builderGen atomic.Uint64

// builder turns a base Version into the next one. It owns (may modify in
// place) only what it has copied: the version struct and schema map from
// the start, each schema and table from its first write. Txn stages its
// writes through a builder; Version.Apply replays ops through one.
type builder struct {
	base *Version
	v    *Version
	gen  uint64

	// Scratch reused by every write of the builder (never by what it
	// stores): a row is encoded here and then copied once into memory of
	// exactly its size, so a stored row carries no slack capacity and
	// costs one allocation rather than one per growth of the encoding;
	// a replaced row's values are decoded here.
	enc  []byte
	prev []datum.Value
}

// encodeRow returns the encoding of vals in memory of its own, of exactly
// its length.
func (b *builder) encodeRow(types []datum.Type, vals []datum.Value) datum.Row {
	b.enc = datum.EncodeRow(b.enc[:0], types, vals)
	return datum.Row(append(make([]byte, 0, len(b.enc)), b.enc...))
}

func newBuilder(base *Version) *builder {
	v := &Version{seq: base.seq + 1, nextOID: base.nextOID, ddlSeq: base.ddlSeq, schemas: make(map[string]*Schema, len(base.schemas)+1)}
	for k, s := range base.schemas {
		v.schemas[k] = s
	}
	return &builder{base: base, v: v, gen: builderGen.Add(1)}
}

// finish freezes everything the builder owns and returns the new version.
// The builder must not be used afterwards.
func (b *builder) finish() *Version {
	for _, s := range b.v.schemas {
		if s.owner != b.gen {
			continue
		}
		s.owner = 0
		for _, t := range s.tables {
			if t.owner == b.gen {
				t.owner, t.view = 0, nil
			}
		}
	}
	return b.v
}

func (b *builder) ownSchema(name string) (*Schema, error) {
	s, ok := b.v.schemas[name]
	if !ok {
		return nil, errNoSchema(name)
	}
	if s.owner == b.gen {
		return s, nil
	}
	c := &Schema{Name: s.Name, OID: s.OID, CatalogID: s.CatalogID, owner: b.gen,
		tables: make(map[string]*Table, len(s.tables)+1)}
	for k, t := range s.tables {
		c.tables[k] = t
	}
	b.v.schemas[name] = c
	return c, nil
}

func (b *builder) ownTable(schema, name string) (*Table, error) {
	s, ok := b.v.schemas[schema]
	if !ok {
		return nil, errNoSchema(schema)
	}
	t, ok := s.tables[name]
	if !ok {
		return nil, errNoTable(schema, name)
	}
	if t.owner == b.gen {
		t.view = nil
		return t, nil
	}
	s, _ = b.ownSchema(schema)
	t = t.own(b.gen)
	s.tables[name] = t
	return t, nil
}

// peek returns a table of the working version without freezing it (for
// the builder's own reads).
func (b *builder) peek(schema, name string) (*Table, error) {
	s, ok := b.v.schemas[schema]
	if !ok {
		return nil, errNoSchema(schema)
	}
	t, ok := s.tables[name]
	if !ok {
		return nil, errNoTable(schema, name)
	}
	return t, nil
}

func (b *builder) allocOID() uint32 {
	o := b.v.nextOID
	b.v.nextOID++
	return o
}

func (b *builder) createSchema(name string, catalogID uint32) (*Schema, error) {
	b.v.ddlSeq = b.base.ddlSeq + 1
	if _, ok := b.v.schemas[name]; ok {
		return nil, errSchemaExists(name)
	}
	oid := PublicSchemaOID
	if name != "public" {
		oid = b.allocOID()
	}
	s := &Schema{Name: name, OID: oid, CatalogID: catalogID, tables: map[string]*Table{}, owner: b.gen}
	b.v.schemas[name] = s
	return s, nil
}

func validateDef(def *keyspace.TableDef) error {
	if def.Name == "" {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: empty table name", ErrBadDef)
	}
	if len(def.Columns) == 0 {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q has no columns", ErrBadDef, def.Name)
	}
	seen := map[string]bool{}
	for _, c := range def.Columns {
		if c.Name == "" || seen[c.Name] {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: empty or duplicate column name %q", ErrBadDef, def.Name, c.Name)
		}
		seen[c.Name] = true
		if !c.Type.Known() {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q column %q: unknown type %d", ErrBadDef, def.Name, c.Name, c.Type.OID)
		}
	}
	for _, p := range def.PrimaryKey {
		if p < 0 || p >= len(def.Columns) {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: primary key column %d out of range", ErrBadDef, def.Name, p)
		}
	}
	return nil
}

func (b *builder) createTable(def keyspace.TableDef) (*Table, error) {
	b.v.ddlSeq = b.base.ddlSeq + 1
	if err := validateDef(&def); err != nil {
		return nil, err
	}
	s, err := b.ownSchema(def.Schema)
	if err != nil {
		return nil, err
	}
	if _, ok := s.tables[def.Name]; ok {
		return nil, errTableExists(def.Schema, def.Name)
	}
	def = def.Clone()
	oid := b.allocOID()
	var idx, con uint32
	if len(def.PrimaryKey) > 0 {
		idx, con = b.allocOID(), b.allocOID()
	}
	t := newTable(newTableInfo(def, oid, idx, con, s.OID), b.gen)
	s.tables[def.Name] = t
	return t, nil
}

func (b *builder) dropTable(schema, name string) (*Table, error) {
	b.v.ddlSeq = b.base.ddlSeq + 1
	s, err := b.ownSchema(schema)
	if err != nil {
		return nil, err
	}
	t, ok := s.tables[name]
	if !ok {
		return nil, errNoTable(schema, name)
	}
	delete(s.tables, name)
	return t.freeze(), nil
}

// renameTable gives a table a new name; its rows, ctids and OIDs stay, as
// in PostgreSQL.
func (b *builder) renameTable(schema, from, to string) error {
	b.v.ddlSeq = b.base.ddlSeq + 1
	if _, err := b.ownTable(schema, from); err != nil {
		return err
	}
	s, err := b.ownSchema(schema)
	if err != nil {
		return err
	}
	if _, ok := s.tables[to]; ok {
		return errTableExists(schema, to)
	}
	t := s.tables[from]
	nd := t.info.Def.Clone()
	nd.Name = to
	t.heap.target = noBlock // as for addColumn
	old := t.info
	t.info = newTableInfo(nd, old.OID, old.IndexOID, old.ConstraintOID, old.SchemaOID)
	delete(s.tables, from)
	s.tables[to] = t
	return t.syncLookup(old)
}

func (b *builder) addColumn(schema, table string, col keyspace.ColumnDef, dflt datum.Value) error {
	b.v.ddlSeq = b.base.ddlSeq + 1
	t, err := b.ownTable(schema, table)
	if err != nil {
		return err
	}
	d := &t.info.Def
	if d.ColumnIndex(col.Name) >= 0 {
		return errColumnExists(table, col.Name)
	}
	if !col.Type.Known() {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: column %q: unknown type %d", ErrBadDef, col.Name, col.Type.OID)
	}
	if !dflt.IsNull() && dflt.K != col.Type.Kind() {
		return errBadValue(table, "default for column %q is not a %s", col.Name, col.Type)
	}
	if col.NotNull && dflt.IsNull() && t.rows.Len() > 0 {
		return &Error{Kind: ErrNotNull, Code: pgcode.NotNullViolation, Table: table, Column: col.Name,
			Message: fmt.Sprintf("column %q of relation %q contains null values", col.Name, table)}
	}
	nd := d.Clone()
	nd.Columns = append(nd.Columns, col)
	// DDL invalidates PostgreSQL's relcache entry and with it the cached
	// target block: the next insert starts again from the last page.
	t.heap.target = noBlock
	old := t.info
	t.info = newTableInfo(nd, old.OID, old.IndexOID, old.ConstraintOID, old.SchemaOID)
	if dflt.IsNull() {
		// Rows encoded with fewer columns read the missing ones as NULL.
		return t.syncLookup(old)
	}
	// PostgreSQL keeps the default as the column's "missing value" and does
	// not rewrite the heap, so ctids stay; moraine re-encodes the rows so
	// that readers see the default, and leaves their ctids alone.
	if err := t.reencode(old, func(vals []datum.Value) []datum.Value { return append(vals, dflt) }); err != nil {
		return err
	}
	return t.syncLookup(old)
}

// reencode rewrites every row of t, encoded under old's columns, as edit
// makes its values, under t's current columns; ctids stay.
func (t *Table) reencode(old *TableInfo, edit func([]datum.Value) []datum.Value) error {
	var vals []datum.Value
	var upd []rowItem
	var err error
	t.rows.Scan(func(it rowItem) bool {
		vals, err = it.row.Decode(old.types, vals[:0])
		if err != nil {
			return false
		}
		vals = edit(vals)
		upd = append(upd, rowItem{it.ctid, datum.EncodeRow(nil, t.info.types, vals)})
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: table %q: %v", ErrCorrupt, t.info.Def.Name, err)
	}
	for _, it := range upd {
		t.rows.Set(it)
	}
	return nil
}

// dropColumn removes a column from a table's definition and re-encodes
// its rows without it. PostgreSQL only marks the column dropped and keeps
// the heap, so ctids stay; so do moraine's. A primary key column cannot be
// dropped (DuckLake never does; PostgreSQL would drop the constraint).
func (b *builder) dropColumn(schema, table, name string) error {
	b.v.ddlSeq = b.base.ddlSeq + 1
	t, err := b.ownTable(schema, table)
	if err != nil {
		return err
	}
	d := &t.info.Def
	i := d.ColumnIndex(name)
	if i < 0 {
		return errNoColumn(table, name)
	}
	for _, pk := range d.PrimaryKey {
		if pk == i {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "cannot drop primary key column %q of %q (DuckLake never does)", name, table)
		}
	}
	if len(d.Columns) == 1 {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "cannot drop the only column %q of %q (DuckLake never does)", name, table)
	}
	nd := d.Clone()
	nd.Columns = append(nd.Columns[:i], nd.Columns[i+1:]...)
	for k, pk := range nd.PrimaryKey {
		if pk > i {
			nd.PrimaryKey[k] = pk - 1
		}
	}
	t.heap.target = noBlock // as for addColumn
	old := t.info
	t.info = newTableInfo(nd, old.OID, old.IndexOID, old.ConstraintOID, old.SchemaOID)
	if err := t.reencode(old, func(vals []datum.Value) []datum.Value { return append(vals[:i], vals[i+1:]...) }); err != nil {
		return err
	}
	return t.syncLookup(old)
}

func (b *builder) renameColumn(schema, table, from, to string) error {
	b.v.ddlSeq = b.base.ddlSeq + 1
	t, err := b.ownTable(schema, table)
	if err != nil {
		return err
	}
	d := &t.info.Def
	i := d.ColumnIndex(from)
	if i < 0 {
		return errNoColumn(table, from)
	}
	if d.ColumnIndex(to) >= 0 {
		return errColumnExists(table, to)
	}
	nd := d.Clone()
	nd.Columns[i].Name = to
	t.heap.target = noBlock // as for addColumn
	old := t.info
	t.info = newTableInfo(nd, old.OID, old.IndexOID, old.ConstraintOID, old.SchemaOID)
	return t.syncLookup(old)
}

// insert adds a row and returns its ctid and encoding.
func (b *builder) insert(schema, table string, vals []datum.Value) (CTID, datum.Row, error) {
	t, err := b.ownTable(schema, table)
	if err != nil {
		return 0, nil, err
	}
	ti := t.info
	if err := ti.checkRow(vals); err != nil {
		return 0, nil, err
	}
	var key string
	if t.pk != nil {
		key = ti.pkKeyOf(vals)
		if _, dup := t.pk.Get(pkItem{key: key}); dup {
			cols, vs := ti.keyText(vals)
			return 0, nil, DuplicateKey(schema, table, cols, vs)
		}
	}
	row := b.encodeRow(ti.types, vals)
	c := t.heap.insert(ti.tupleLen(vals))
	t.rows.Set(rowItem{c, row})
	if t.pk != nil {
		t.pk.Set(pkItem{key, c})
	}
	if t.look != nil {
		t.look.Set(lookItem{ti.lookKeyOf(vals), c})
	}
	return c, row, nil
}

// update replaces the row at old and returns the new version's ctid, the
// old row and the new one.
func (b *builder) update(schema, table string, old CTID, vals []datum.Value) (CTID, datum.Row, datum.Row, error) {
	t, err := b.ownTable(schema, table)
	if err != nil {
		return 0, nil, nil, err
	}
	prev, ok := t.rows.Get(rowItem{ctid: old})
	if !ok {
		return 0, nil, nil, errNoRow(table, old)
	}
	ti := t.info
	if err := ti.checkRow(vals); err != nil {
		return 0, nil, nil, err
	}
	var key, prevKey string
	var pv []datum.Value
	if t.pk != nil || t.look != nil {
		if pv, err = prev.row.Decode(ti.types, b.prev); err != nil {
			return 0, nil, nil, fmt.Errorf("%w: table %q row %s: %v", ErrCorrupt, table, old, err)
		}
		b.prev = pv
	}
	if t.pk != nil {
		key = ti.pkKeyOf(vals)
		prevKey = ti.pkKeyOf(pv)
		if key != prevKey {
			if _, dup := t.pk.Get(pkItem{key: key}); dup {
				cols, vs := ti.keyText(vals)
				return 0, nil, nil, DuplicateKey(schema, table, cols, vs)
			}
		}
	}
	row := b.encodeRow(ti.types, vals)
	c := t.heap.update(old, ti.tupleLen(vals))
	t.rows.Delete(rowItem{ctid: old})
	t.rows.Set(rowItem{c, row})
	if t.pk != nil {
		t.pk.Delete(pkItem{key: prevKey})
		t.pk.Set(pkItem{key, c})
	}
	if t.look != nil {
		t.look.Delete(lookItem{ti.lookKeyOf(pv), old})
		t.look.Set(lookItem{ti.lookKeyOf(vals), c})
	}
	return c, prev.row, row, nil
}

// delete removes the row at c and returns it.
func (b *builder) delete(schema, table string, c CTID) (datum.Row, error) {
	t, err := b.ownTable(schema, table)
	if err != nil {
		return nil, err
	}
	prev, ok := t.rows.Delete(rowItem{ctid: c})
	if !ok {
		return nil, errNoRow(table, c)
	}
	if t.pk != nil || t.look != nil {
		pv, err := prev.row.Decode(t.info.types, b.prev)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q row %s: %v", ErrCorrupt, table, c, err)
		}
		b.prev = pv
		if t.pk != nil {
			t.pk.Delete(pkItem{key: t.info.pkKeyOf(pv)})
		}
		if t.look != nil {
			t.look.Delete(lookItem{t.info.lookKeyOf(pv), c})
		}
	}
	return prev.row, nil
}
