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
	// the newest snapshot each had at the fork.
	Catalogs []BranchCatalog
}

// BranchCatalog is one catalog a branch reads.
type BranchCatalog struct {
	Schema      string
	ID          uint32
	Snapshot    int64
	HasSnapshot bool
}

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
		if c.HasSnapshot {
			v = append(v, 1)
			v = binary.AppendVarint(v, c.Snapshot)
		} else {
			v = append(v, 0)
		}
	}
	return v
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
		switch d.byte() {
		case 0:
		case 1:
			c.HasSnapshot, c.Snapshot = true, d.varint()
		default:
			d.fail("bad snapshot flag")
		}
		if c.ID == StoreCatalogID {
			d.fail("catalog id 0")
		}
		b.Catalogs = append(b.Catalogs, c)
	}
	if err := d.done(); err != nil {
		return "", Branch{}, err
	}
	if b.Parent == "" {
		return "", Branch{}, fmt.Errorf("%w: branch %s without a parent", ErrCorrupt, name)
	}
	return name, b, nil
}
