package keyspace

import (
	"encoding/binary"
	"fmt"
)

// A branch is a database forked from another at one instant: it reads the
// parent's DuckLake catalogs exactly as the store held them when its record
// was written. The record's key lives under BranchPrefix, which the store
// treats as its pin prefix (slate.Options.PinPrefix): while the record
// lives, the store keeps every key's version as of the record's own seq,
// and a branch is loaded by reading its catalogs at that seq. A fork
// therefore writes one record, whatever the catalog's size.

// Branch is the value of a branch record.
type Branch struct {
	// Parent is the database the branch was forked from.
	Parent string
	// Catalogs are the parent's DuckLake catalogs the branch reads, with
	// the newest snapshot each had at the fork (or At).
	Catalogs []BranchCatalog
	// HasAt: the branch reads its parent as of its DuckLake snapshot At,
	// an earlier one than the fork's newest — the snapshots after it
	// hidden, as DuckLake's time travel reads the catalog. Read-only.
	HasAt bool
	At    int64
	// Base is the store seq the branch reads its parent's catalogs at
	// when it is not the record's own: a branch forked from a read-only
	// branch reads the parent as that one does. Pinned like the record's
	// own seq (BranchBase).
	Base uint64
	// BaseOf, in memory only, names the read-only branch whose Base (or
	// record seq) the commit that stores this record resolves into Base.
	BaseOf string
}

// BranchBase returns the Base a stored branch record pins besides its
// own seq: slate's Options.PinValue.
func BranchBase(value []byte) (uint64, bool) {
	_, b, err := DecodeBranch(BranchKey("x"), value)
	if err != nil || b.Base == 0 {
		return 0, false
	}
	return b.Base, true
}

// BranchCatalog is one catalog a branch reads.
type BranchCatalog struct {
	Schema      string
	ID          uint32 // the parent's catalog id, read at the record's seq
	Snapshot    int64
	HasSnapshot bool
	// OwnID is, for a writable branch, the catalog id its own writes are
	// stored under: keys under it overlay the parent's (an empty value
	// hides the parent's key). 0: the branch is read-only.
	OwnID uint32
	// NextFileID is the parent's next_file_id at the fork: the data and
	// delete files with smaller ids are the parent's, in DataPath.
	NextFileID int64
	// DataPath is the parent's data path at the fork: where the files the
	// branch inherited are (their relative paths resolve against it).
	DataPath string
}

// Writable reports whether the branch stores writes of its own.
func (b Branch) Writable() bool { return len(b.Catalogs) > 0 && b.Catalogs[0].OwnID != 0 }

// Hidden is the value that, under a writable branch's own catalog id,
// hides the parent's key: no stored value is empty.
func Hidden(value []byte) bool { return len(value) == 0 }

// BranchKey is the key of the record of the branch database called name.
func BranchKey(name string) []byte {
	return AppendString(KindPrefix(StoreCatalogID, KindBranch), name)
}

// BranchPrefix is the prefix of every branch record: the store's pin prefix.
func BranchPrefix() []byte { return KindPrefix(StoreCatalogID, KindBranch) }

// EncodeBranch encodes a branch record's value.
func EncodeBranch(b Branch) []byte {
	v := []byte{valueFormatV1}
	v = appendStr(v, b.Parent)
	v = binary.AppendUvarint(v, uint64(len(b.Catalogs)))
	for _, c := range b.Catalogs {
		v = appendStr(v, c.Schema)
		v = binary.BigEndian.AppendUint32(v, c.ID)
		v = appendOptVarint(v, c.Snapshot, c.HasSnapshot)
		v = binary.BigEndian.AppendUint32(v, c.OwnID)
		v = binary.AppendVarint(v, c.NextFileID)
		v = appendStr(v, c.DataPath)
	}
	v = appendOptVarint(v, b.At, b.HasAt)
	return binary.AppendUvarint(v, b.Base)
}

// DecodeBranch decodes a branch record: the branch's name and value.
func DecodeBranch(key, value []byte) (name string, b Branch, err error) {
	r := NewKeyReader(key)
	if r.Uint32() != StoreCatalogID || Kind(r.Byte()) != KindBranch {
		if r.Err() != nil {
			return "", Branch{}, r.Err()
		}
		return "", Branch{}, fmt.Errorf("%w: not a branch key", ErrUnknownShape)
	}
	name, null := r.String()
	if err := r.Done(); err != nil {
		return "", Branch{}, err
	}
	if null || name == "" {
		return "", Branch{}, fmt.Errorf("%w: branch key without a name", ErrCorrupt)
	}
	d, err := newValueReader(value, "branch "+name)
	if err != nil {
		return "", Branch{}, err
	}
	b.Parent = d.str()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		var c BranchCatalog
		c.Schema = d.str()
		if len(d.b) < 4 {
			d.fail("truncated catalog id")
			break
		}
		c.ID = binary.BigEndian.Uint32(d.b)
		d.b = d.b[4:]
		c.Snapshot, c.HasSnapshot = d.optVarint()
		if len(d.b) < 4 {
			d.fail("truncated own catalog id")
			break
		}
		c.OwnID = binary.BigEndian.Uint32(d.b)
		d.b = d.b[4:]
		c.NextFileID = d.varint()
		c.DataPath = d.str()
		if c.ID == StoreCatalogID || c.OwnID == c.ID {
			d.fail("bad catalog id")
		}
		if len(b.Catalogs) > 0 && (c.OwnID == 0) != (b.Catalogs[0].OwnID == 0) {
			d.fail("own catalog ids on some catalogs only")
		}
		b.Catalogs = append(b.Catalogs, c)
	}
	b.At, b.HasAt = d.optVarint()
	b.Base = d.uvarint()
	if err := d.done(); err != nil {
		return "", Branch{}, err
	}
	if b.Parent == "" {
		return "", Branch{}, fmt.Errorf("%w: branch %s without a parent", ErrCorrupt, name)
	}
	return name, b, nil
}
