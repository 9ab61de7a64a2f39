package keyspace

import "fmt"

// Key ranges. Every helper returns a prefix p; the range of keys with that
// prefix is [p, PrefixEnd(p)).

// StoreCatalogID is the reserved catalog id of store-global records (the
// catalog registry and the next catalog id). Catalogs are numbered from 1.
const StoreCatalogID uint32 = 0

// CatalogPrefix is the prefix of every key of one catalog.
func CatalogPrefix(catalogID uint32) []byte { return AppendUint32(nil, catalogID) }

// KindPrefix is the prefix of every key of one kind of one catalog (both
// subspaces of a versioned kind).
func KindPrefix(catalogID uint32, k Kind) []byte {
	return append(CatalogPrefix(catalogID), byte(k))
}

// SubspacePrefix is the prefix of the current or history keys of a versioned
// kind. For an unversioned kind it is an error.
func SubspacePrefix(catalogID uint32, k Kind, sub Subspace) ([]byte, error) {
	if !k.Versioned() {
		return nil, fmt.Errorf("keyspace: kind %v has no current/history subspaces", k)
	}
	if sub != SubCurrent && sub != SubHistory {
		return nil, fmt.Errorf("keyspace: bad subspace %d", sub)
	}
	return append(KindPrefix(catalogID, k), byte(sub)), nil
}

// tableFirst lists the kinds whose keys begin with table_id after the kind
// (and subspace) byte: per-table collections, so that "everything of table T
// in kind K" is one contiguous range.
var tableFirst = map[Kind]bool{
	KindTable: true, KindColumnTag: true, KindColumn: true, KindDataFile: true,
	KindFileColumnStats: true, KindFileVariantStats: true, KindDeleteFile: true,
	KindPartition: true, KindSort: true, KindTableStats: true, KindTableColumnStats: true,
	KindInlinedTables: true, KindInlinedRow: true, KindInlinedDelete: true,
	KindColumnMapping: true, KindSchemaVersions: true,
}

// TableFirst reports whether k's keys begin with table_id.
func (k Kind) TableFirst() bool { return tableFirst[k] }

// TablePrefix is the prefix of the keys of one table_id in a per-table kind:
// for example the current data files of table T with their partition values
// are TablePrefix(c, KindDataFile, SubCurrent, T). sub must be SubNone for
// unversioned kinds and SubCurrent or SubHistory for versioned ones.
func TablePrefix(catalogID uint32, k Kind, sub Subspace, tableID int64) ([]byte, error) {
	if !k.TableFirst() {
		return nil, fmt.Errorf("keyspace: kind %v is not keyed by table_id", k)
	}
	var p []byte
	if k.Versioned() {
		var err error
		if p, err = SubspacePrefix(catalogID, k, sub); err != nil {
			return nil, err
		}
	} else {
		if sub != SubNone {
			return nil, fmt.Errorf("keyspace: kind %v has no subspaces", k)
		}
		p = KindPrefix(catalogID, k)
	}
	return AppendInt(p, tableID), nil
}

// InlinedDataPrefixKey is the prefix of the rows of one inlined data table
// (ducklake_inlined_data_<tableID>_<schemaVersion>) in one subspace.
func InlinedDataPrefixKey(catalogID uint32, sub Subspace, tableID, schemaVersion int64) ([]byte, error) {
	p, err := TablePrefix(catalogID, KindInlinedRow, sub, tableID)
	if err != nil {
		return nil, err
	}
	return AppendInt(p, schemaVersion), nil
}

// ParseKeyHeader reads the catalog id, kind and (for versioned row kinds)
// subspace at the start of any keyspace key, without decoding the rest.
func ParseKeyHeader(key []byte) (catalogID uint32, kind Kind, sub Subspace, err error) {
	r := NewKeyReader(key)
	catalogID, kind = r.Uint32(), Kind(r.Byte())
	if r.Err() == nil && kind.IsRowKind() && kind.Versioned() {
		sub = Subspace(r.Byte())
		if r.Err() == nil && sub != SubCurrent && sub != SubHistory {
			return 0, 0, 0, fmt.Errorf("%w: key: subspace 0x%02x", ErrCorrupt, byte(sub))
		}
	}
	if err := r.Err(); err != nil {
		return 0, 0, 0, err
	}
	return catalogID, kind, sub, nil
}
