package catalog

import (
	"bytes"
	"fmt"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Rows of a committed batch: each key names its row (follow.go).

// rowTable resolves a row key to its catalog, table and codec.
func (f *follower) rowTable(key []byte) (*followCat, *Table, *keyspace.Table, error) {
	cid, name, err := keyspace.RowKeyTable(key)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := f.cat(cid)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := c.b.peek(c.schema, name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: row of %s: %v", ErrCorrupt, name, err)
	}
	kt, err := t.Codec()
	if err != nil {
		return nil, nil, nil, err
	}
	return c, t, kt, nil
}

// find returns the ctid of t's row whose key is key.
func (f *follower) find(c *followCat, cid uint32, t *Table, kt *keyspace.Table, key []byte) (CTID, bool, error) {
	vals, err := kt.KeyValues(cid, key)
	if err != nil {
		return 0, false, err
	}
	var found CTID
	ok := false
	var kerr error
	var kb []byte
	check := func(c CTID, r datum.Row) bool {
		kb, kerr = kt.AppendKey(kb[:0], cid, r)
		if kerr == nil && bytes.Equal(kb, key) {
			found, ok = c, true
			return false
		}
		return kerr == nil
	}
	ti := t.info
	switch {
	case t.pk != nil && keyHolds(vals, ti.Def.PrimaryKey):
		pk := make([]datum.Value, len(ti.Def.PrimaryKey))
		for i, c := range ti.Def.PrimaryKey {
			pk[i] = vals[c]
		}
		if c, r, hit := t.LookupKey(pk); hit {
			check(c, r)
		}
	case t.look != nil && len(ti.lookCols) > 0 && !vals[ti.lookCols[0]].IsNull():
		var prefix []datum.Value
		for _, c := range ti.lookCols {
			if vals[c].IsNull() {
				break
			}
			prefix = append(prefix, vals[c])
		}
		if !t.LookupPrefix(prefix, check) {
			t.Scan(check)
		}
	default:
		idx, err := f.index(c, t, kt)
		if err != nil {
			return 0, false, err
		}
		idx.candidates(f.st.hash(key), func(cand CTID) bool {
			r, live := t.Lookup(cand)
			return !live || check(cand, r)
		})
	}
	return found, ok, kerr
}

// keyHolds reports whether every column of cols has a value in vals.
func keyHolds(vals []datum.Value, cols []int) bool {
	for _, c := range cols {
		if vals[c].IsNull() {
			return false
		}
	}
	return len(cols) > 0
}

func (f *follower) deleteRow(o PairOp) error {
	c, t, kt, err := f.rowTable(o.Key)
	if err != nil {
		return err
	}
	cid := keyspaceCatalogID(o.Key)
	ctid, ok, err := f.find(c, cid, t, kt, o.Key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s: no row with key %s", ErrCannotFollow, t.Name(), keyspace.FormatKey(o.Key))
	}
	old, err := f.delete(c, t.Name(), ctid, o.Key)
	if err != nil {
		return err
	}
	return f.dropChildren(c, kt, old)
}

func (f *follower) putRow(o PairOp) error {
	c, t, kt, err := f.rowTable(o.Key)
	if err != nil {
		return err
	}
	cid := keyspaceCatalogID(o.Key)
	e, err := keyspace.DecodeKV(o.Key, o.Value, func(id uint32, name string) (*keyspace.Table, bool) {
		if id == cid && name == t.Name() {
			return kt, true
		}
		return nil, false
	})
	if err != nil {
		return err
	}
	vals, err := e.Row.Decode(t.Types(), nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, t.Name(), err)
	}
	ctid, exists, err := f.find(c, cid, t, kt, o.Key)
	if err != nil {
		return err
	}
	if exists {
		old, err := f.delete(c, t.Name(), ctid, o.Key)
		if err != nil {
			return err
		}
		if err := f.dropChildren(c, kt, old); err != nil {
			return err
		}
	}
	if err := f.insert(c, t.Name(), vals, o.Key); err != nil {
		return err
	}
	if len(e.Children) == 0 {
		return nil
	}
	ct, err := c.b.peek(c.schema, e.ChildTable)
	if err != nil {
		return fmt.Errorf("%w: children of %s: %v", ErrCorrupt, t.Name(), err)
	}
	for _, r := range e.Children {
		cv, err := r.Decode(ct.Types(), nil)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, ct.Name(), err)
		}
		link, err := linkKey(r, ct.Types(), kt.ChildTable().Spec.ParentLink, 0)
		if err != nil {
			return err
		}
		if err := f.insert(c, ct.Name(), cv, []byte(link)); err != nil {
			return err
		}
	}
	return nil
}

// dropChildren deletes the embedded child rows of parent row (a data
// file's partition values, a partition spec's columns, a sort spec's
// expressions): they live and die with it.
func (f *follower) dropChildren(c *followCat, kt *keyspace.Table, parent datum.Row) error {
	ck := kt.ChildTable()
	if ck == nil {
		return nil
	}
	ct, err := c.b.peek(c.schema, ck.Def.Name)
	if err != nil {
		return nil // no child table in this catalog: no children
	}
	pt, err := c.b.peek(c.schema, kt.Def.Name)
	if err != nil {
		return err
	}
	want, err := linkKey(parent, pt.Types(), ck.Spec.ParentLink, 1)
	if err != nil {
		return err
	}
	idx, err := f.index(c, ct, nil)
	if err != nil {
		return err
	}
	var kids []CTID
	var lerr error
	seen := map[CTID]bool{}
	idx.candidates(f.st.hash([]byte(want)), func(cc CTID) bool {
		r, live := ct.Lookup(cc)
		if !live || seen[cc] {
			return true
		}
		seen[cc] = true
		var k string
		if k, lerr = linkKey(r, ct.Types(), ck.Spec.ParentLink, 0); lerr != nil {
			return false
		}
		if k == want {
			kids = append(kids, cc)
		}
		return true
	})
	if lerr != nil {
		return lerr
	}
	for _, cc := range kids {
		if _, err := f.delete(c, ct.Name(), cc, []byte(want)); err != nil {
			return err
		}
	}
	return nil
}

func keyspaceCatalogID(key []byte) uint32 {
	return uint32(key[0])<<24 | uint32(key[1])<<16 | uint32(key[2])<<8 | uint32(key[3])
}
