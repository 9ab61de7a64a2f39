package keyspace

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/moraine-db/moraine/internal/datum"
)

// Records of the catalog's own metadata: the store-global catalog registry
// and next catalog id, each catalog's head, and its table definitions.
//
// Values use the plain codec below (uvarint lengths, zig-zag varints) after
// the format version byte.

// FormatVersion is the keyspace format a catalog's head records. A head with
// a newer format is refused (ErrUnknownShape): a newer moraine wrote it.
const FormatVersion uint32 = 1

// Meta record names.
const (
	metaHead          = "head"            // per catalog
	metaNextCatalogID = "next_catalog_id" // store-global
)

// RegistryKey is the key naming the catalog of a (database, metadata schema)
// pair: a client attaching dbname=D with METADATA_SCHEMA S reaches the
// catalog registered under (D, S).
func RegistryKey(database, schema string) []byte {
	k := KindPrefix(StoreCatalogID, KindRegistry)
	k = AppendString(k, database)
	return AppendString(k, schema)
}

// RegistryPrefix is the prefix of every registry key.
func RegistryPrefix() []byte { return KindPrefix(StoreCatalogID, KindRegistry) }

// EncodeRegistryValue is the value of a registry key: the catalog id.
func EncodeRegistryValue(catalogID uint32) []byte {
	return AppendUint32([]byte{valueFormatV1}, catalogID)
}

// DecodeRegistry decodes a registry key and value.
func DecodeRegistry(key, value []byte) (database, schema string, catalogID uint32, err error) {
	r := NewKeyReader(key)
	if r.Uint32() != StoreCatalogID || Kind(r.Byte()) != KindRegistry {
		if r.Err() != nil {
			return "", "", 0, r.Err()
		}
		return "", "", 0, fmt.Errorf("%w: not a registry key", ErrUnknownShape)
	}
	database, n1 := r.String()
	schema, n2 := r.String()
	if err := r.Done(); err != nil {
		return "", "", 0, err
	}
	if n1 || n2 {
		return "", "", 0, fmt.Errorf("%w: registry key with NULL name", ErrCorrupt)
	}
	id, err := decodeUint32Value(value)
	if err != nil {
		return "", "", 0, fmt.Errorf("registry %s.%s: %w", database, schema, err)
	}
	if id == StoreCatalogID {
		return "", "", 0, fmt.Errorf("%w: registry %s.%s names the reserved catalog id 0", ErrCorrupt, database, schema)
	}
	return database, schema, id, nil
}

func decodeUint32Value(value []byte) (uint32, error) {
	if len(value) == 0 {
		return 0, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if value[0] != valueFormatV1 {
		return 0, fmt.Errorf("%w: value format version %d", ErrUnknownShape, value[0])
	}
	if len(value) != 5 {
		return 0, fmt.Errorf("%w: %d-byte id value", ErrCorrupt, len(value))
	}
	return binary.BigEndian.Uint32(value[1:]), nil
}

// NextCatalogIDKey is the store-global record holding the next catalog id
// to allocate.
func NextCatalogIDKey() []byte {
	return AppendString(KindPrefix(StoreCatalogID, KindMeta), metaNextCatalogID)
}

// EncodeNextCatalogID encodes the next catalog id record.
func EncodeNextCatalogID(next uint32) []byte { return EncodeRegistryValue(next) }

// DecodeNextCatalogID decodes the next catalog id record.
func DecodeNextCatalogID(value []byte) (uint32, error) {
	id, err := decodeUint32Value(value)
	if err != nil {
		return 0, fmt.Errorf("next catalog id: %w", err)
	}
	return id, nil
}

// Head is a catalog's head record, rewritten by every commit in the same
// batch as the commit's rows.
type Head struct {
	FormatVersion uint32 // keyspace format of the catalog; FormatVersion when written
	Database      string // the registry names, for inspection tools
	Schema        string
	// Snapshot is the newest ducklake_snapshot id committed; HasSnapshot is
	// false before the catalog's first snapshot.
	Snapshot    int64
	HasSnapshot bool
	// Commits counts commits applied to the catalog (snapshot-minting or not).
	Commits uint64
}

// HeadKey is the key of a catalog's head record.
func HeadKey(catalogID uint32) []byte {
	return AppendString(KindPrefix(catalogID, KindMeta), metaHead)
}

// EncodeHead encodes h.
func EncodeHead(h Head) []byte {
	b := []byte{valueFormatV1}
	b = binary.AppendUvarint(b, uint64(h.FormatVersion))
	b = appendStr(b, h.Database)
	b = appendStr(b, h.Schema)
	b = appendOptVarint(b, h.Snapshot, h.HasSnapshot)
	return binary.AppendUvarint(b, h.Commits)
}

// DecodeHead decodes a head record.
func DecodeHead(value []byte) (Head, error) {
	d, err := newValueReader(value, "head")
	if err != nil {
		return Head{}, err
	}
	var h Head
	fv := d.uvarint()
	if d.err == nil && fv > uint64(FormatVersion) {
		return Head{}, fmt.Errorf("%w: head: keyspace format %d is newer than this moraine's %d", ErrUnknownShape, fv, FormatVersion)
	}
	h.FormatVersion = uint32(fv)
	h.Database = d.str()
	h.Schema = d.str()
	h.Snapshot, h.HasSnapshot = d.optVarint()
	h.Commits = d.uvarint()
	if err := d.done(); err != nil {
		return Head{}, err
	}
	return h, nil
}

// TableDefKey is the key of the definition of table name in a catalog.
func TableDefKey(catalogID uint32, name string) []byte {
	return AppendString(KindPrefix(catalogID, KindTableDef), name)
}

// EncodeTableDef encodes def. The value layout:
//
//	version byte | str schema | str name | uvarint ncols |
//	  per column: str name | uvarint oid | varint typmod | byte notnull |
//	uvarint npk | uvarint column index…
func EncodeTableDef(def *TableDef) []byte {
	b := []byte{valueFormatV1}
	b = appendStr(b, def.Schema)
	b = appendStr(b, def.Name)
	b = binary.AppendUvarint(b, uint64(len(def.Columns)))
	for _, c := range def.Columns {
		b = appendStr(b, c.Name)
		b = binary.AppendUvarint(b, uint64(c.Type.OID))
		b = binary.AppendVarint(b, int64(c.Type.Mod))
		if c.NotNull {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(def.PrimaryKey)))
	for _, i := range def.PrimaryKey {
		b = binary.AppendUvarint(b, uint64(i))
	}
	return b
}

// DecodeTableDef decodes a table definition record and checks that the key
// names it and that it is a shape ValidateDef accepts, so that a catalog
// reopens with exactly the column sets it had, or not at all.
func DecodeTableDef(key, value []byte) (catalogID uint32, def TableDef, err error) {
	r := NewKeyReader(key)
	catalogID = r.Uint32()
	if k := Kind(r.Byte()); k != KindTableDef && r.Err() == nil {
		return 0, TableDef{}, fmt.Errorf("%w: %v key is not a table definition", ErrUnknownShape, k)
	}
	name, null := r.String()
	if err := r.Done(); err != nil {
		return 0, TableDef{}, err
	}
	if null {
		return 0, TableDef{}, fmt.Errorf("%w: table definition key with NULL name", ErrCorrupt)
	}
	d, err := newValueReader(value, "table definition "+name)
	if err != nil {
		return 0, TableDef{}, err
	}
	def.Schema = d.str()
	def.Name = d.str()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		var c ColumnDef
		c.Name = d.str()
		oid := d.uvarint()
		mod := d.varint()
		if oid > math.MaxUint32 || mod < math.MinInt32 || mod > math.MaxInt32 {
			d.fail("bad type")
		}
		c.Type = datum.Type{OID: uint32(oid), Mod: int32(mod)}
		switch d.byte() {
		case 0:
		case 1:
			c.NotNull = true
		default:
			d.fail("bad NOT NULL flag")
		}
		def.Columns = append(def.Columns, c)
	}
	npk := d.count()
	for i := 0; i < npk && d.err == nil; i++ {
		idx := d.uvarint()
		if idx >= uint64(len(def.Columns)) {
			d.fail("primary key column out of range")
		}
		def.PrimaryKey = append(def.PrimaryKey, int(idx))
	}
	if err := d.done(); err != nil {
		return 0, TableDef{}, err
	}
	if def.Name != name {
		return 0, TableDef{}, fmt.Errorf("%w: table definition under key %q names %q", ErrCorrupt, name, def.Name)
	}
	if err := ValidateDef(&def); err != nil {
		// The catalog and name still come back: the loader names the
		// table in its error (UnloadableTableError).
		return catalogID, TableDef{Schema: def.Schema, Name: def.Name}, fmt.Errorf("%w: stored definition: %v", ErrUnknownShape, err)
	}
	return catalogID, def, nil
}

// appendOptVarint appends an optional integer: u8 0, or u8 1 and the
// varint.
func appendOptVarint(b []byte, v int64, has bool) []byte {
	if !has {
		return append(b, 0)
	}
	return binary.AppendVarint(append(b, 1), v)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// valueReader reads the plain value codec; the first error sticks.
type valueReader struct {
	b    []byte
	what string
	err  error
}

func newValueReader(value []byte, what string) (*valueReader, error) {
	if len(value) == 0 {
		return nil, fmt.Errorf("%w: %s: empty value", ErrCorrupt, what)
	}
	if value[0] != valueFormatV1 {
		return nil, fmt.Errorf("%w: %s: value format version %d", ErrUnknownShape, what, value[0])
	}
	return &valueReader{b: value[1:], what: what}, nil
}

func (d *valueReader) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrCorrupt, d.what, msg)
	}
	d.b = nil
}

// uvarint and varint accept only the shortest encoding, the one moraine
// writes: a record has one encoding, so decoding and encoding again gives
// back its bytes.
func (d *valueReader) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	if k <= 0 || k != len(binary.AppendUvarint(nil, v)) {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *valueReader) varint() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 || k != len(binary.AppendVarint(nil, v)) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[k:]
	return v
}

// count reads a length that must not exceed the remaining bytes (every
// counted item takes at least one byte), so corrupt input cannot make the
// decoder allocate without bound.
func (d *valueReader) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count exceeds value")
		return 0
	}
	return int(n)
}

func (d *valueReader) byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *valueReader) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("truncated string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// optVarint reads what appendOptVarint appends.
func (d *valueReader) optVarint() (int64, bool) {
	switch d.byte() {
	case 0:
		return 0, false
	case 1:
		return d.varint(), true
	}
	d.fail("bad optional-value flag")
	return 0, false
}

func (d *valueReader) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	return d.err
}

// UnloadableTableError is a stored table definition the loader refuses: a
// table DuckLake does not create, or one altered out of DuckLake's shape.
// moraine refuses to commit such a definition, but a store written before
// it did may hold one; the error names the table and the way out.
type UnloadableTableError struct {
	Database, Schema, Table string
	Err                     error
}

func (e *UnloadableTableError) Error() string {
	return fmt.Sprintf("table %s.%s of database %q cannot be loaded (%v); it was stored before moraine refused such tables: "+
		"with no server running, remove it with `moraine repair drop-table --store <the store URL> --database %s --table %s.%s` (docs/operations.md, Repairs)",
		e.Schema, e.Table, e.Database, e.Err, e.Database, e.Schema, e.Table)
}

func (e *UnloadableTableError) Unwrap() error { return e.Err }
