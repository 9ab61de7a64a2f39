package commit

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/slate"
)

// A writable branch stores its writes under catalog ids of its own, over
// its parent's keys as the store holds them at the branch record's seq
// (catalog/branch_write.go). What the pipeline keeps for each such catalog:
// the parent's catalog id, the seq the branch reads it at (looked up in the
// store once the fork is durable) and the keys the branch has written
// there, which its drop deletes. A key the branch deletes is written with
// a hidden (empty) value, since deleting a key it never wrote would leave
// the parent's showing.
type branchCat struct {
	parent uint32
	seq    uint64 // 0 until read from the branch record
	keys   map[string]bool
}

// ownCatalog returns the writable branch catalog stored under id, if it is
// one. REQUIRES: p.mu.
func (p *Pipeline) ownCatalog(id uint32) (*branchCat, bool) {
	b, ok := p.branchCats[id]
	return b, ok
}

// forkChildren returns the embedded child rows of the catalogs of the
// writable branch b, as its first version v holds them (what it reads of
// its parent at the fork), by parent identity under its own ids.
func (p *Pipeline) forkChildren(b *keyspace.Branch, v *catalog.Version) (map[string][]datum.Row, error) {
	out := map[string][]datum.Row{}
	for _, c := range b.Catalogs {
		if sc, ok := v.Schema(c.Schema); ok {
			if err := p.indexChildren(c.OwnID, sc, func(ident string, r datum.Row) { out[ident] = append(out[ident], r) }); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// forkCatalogs registers the catalogs of the writable branch a fork commit
// created, with their children. REQUIRES: p.mu.
func (p *Pipeline) forkCatalogs(b *keyspace.Branch, children map[string][]datum.Row) {
	for _, c := range b.Catalogs {
		p.branchCats[c.OwnID] = &branchCat{parent: c.ID, seq: b.Base, keys: map[string]bool{}}
	}
	for ident, rows := range children {
		p.children.set(ident, rows)
	}
}

// primeBranches registers, at load, the writable branches srv holds: the
// seqs their records pin and the keys stored under their own catalog ids.
// REQUIRES: p.mu.
func (p *Pipeline) primeBranches(ctx context.Context, srv *catalog.Server, s Scanner) error {
	it := s.ScanPrefix(ctx, keyspace.BranchPrefix())
	defer it.Close()
	for it.Next() {
		name, b, err := keyspace.DecodeBranch(it.Key(), it.Value())
		if err != nil {
			return fmt.Errorf("prime: %w", err)
		}
		if !b.Writable() {
			continue
		}
		if _, ok := srv.Lookup(name); !ok {
			continue
		}
		seq := it.Seq()
		if b.Base != 0 {
			seq = b.Base
		}
		for _, c := range b.Catalogs {
			bc := &branchCat{parent: c.ID, seq: seq, keys: map[string]bool{}}
			ki := s.ScanPrefix(ctx, keyspace.CatalogPrefix(c.OwnID))
			for ki.Next() {
				bc.keys[string(ki.Key())] = true
			}
			if err := closeIter(ki); err != nil {
				return fmt.Errorf("prime: branch %q: %w", name, err)
			}
			p.branchCats[c.OwnID] = bc
		}
	}
	return closeIter(it)
}

// branchStored reports whether the branch catalog b holds key (under its
// own id): its own value if it wrote one, else the parent's at the fork.
// REQUIRES: p.mu.
func (p *Pipeline) branchStored(ctx context.Context, b *branchCat, key []byte) (bool, error) {
	if v, err := getOne(ctx, p.store, key); err != nil || v != nil {
		return v != nil && !keyspace.Hidden(v), err
	}
	if b.seq == 0 {
		if err := p.findBranchSeq(ctx, b); err != nil {
			return false, err
		}
	}
	snap, err := p.store.SnapshotAt(b.seq)
	if err != nil {
		return false, err
	}
	defer snap.Close()
	v, err := getOne(ctx, snap, append(keyspace.CatalogPrefix(b.parent), key[4:]...))
	return v != nil, err
}

// findBranchSeq reads the seq of the record of b's branch. REQUIRES: p.mu.
func (p *Pipeline) findBranchSeq(ctx context.Context, b *branchCat) error {
	it := p.store.ScanPrefix(ctx, keyspace.BranchPrefix())
	defer it.Close()
	for it.Next() {
		_, rec, err := keyspace.DecodeBranch(it.Key(), it.Value())
		if err != nil {
			return err
		}
		for _, c := range rec.Catalogs {
			if c.OwnID != 0 && p.branchCats[c.OwnID] == b {
				b.seq = it.Seq()
				return nil
			}
		}
	}
	if err := closeIter(it); err != nil {
		return err
	}
	return fmt.Errorf("commit: the record of a writable branch (parent catalog %d) is not stored yet", b.parent)
}

// hideDeletes turns the deletes of a writable branch's own keys into
// hidden values. REQUIRES: p.mu.
func (tr *translator) hideDeletes() {
	if len(tr.p.branchCats) == 0 && len(tr.forkIDs) == 0 {
		return
	}
	for k, e := range tr.pending {
		if e.put || tr.dropped[e.catalogID] {
			continue
		}
		if _, ok := tr.p.ownCatalog(e.catalogID); ok || tr.forkIDs[e.catalogID] {
			e.put, e.value = true, []byte{}
			tr.pending[k] = e
		}
	}
}

// dropBranch deletes the keys the writable branch name (record b) wrote.
func (tr *translator) dropBranch(name string, b *keyspace.Branch) error {
	if tr.dropped == nil {
		tr.dropped = map[uint32]bool{}
	}
	for _, c := range b.Catalogs {
		bc, ok := tr.p.ownCatalog(c.OwnID)
		if !ok {
			return fmt.Errorf("commit: drop branch %q: catalog %d is not a branch's", name, c.OwnID)
		}
		tr.dropped[c.OwnID] = true
		for k := range bc.keys {
			tr.pending[k] = pendingKV{catalogID: c.OwnID}
		}
	}
	return nil
}

// branchKeys records, once a translation is queued, the keys a writable
// branch now holds of its own, and forgets dropped branches. REQUIRES: p.mu.
func (t *translation) branchKeys(p *Pipeline) {
	for _, w := range t.keys {
		if len(w.key) < 4 {
			continue
		}
		id := binary.BigEndian.Uint32([]byte(w.key[:4]))
		if bc, ok := p.branchCats[id]; ok && !t.dropped[id] {
			bc.keys[w.key] = true
		}
	}
	for id := range t.dropped {
		delete(p.branchCats, id)
	}
}

// recordSeq is the seq of the stored record of the branch called name.
// REQUIRES: p.mu.
func (p *Pipeline) recordSeq(ctx context.Context, name string) (uint64, error) {
	_, own, err := recordSeqs(ctx, p.store, name)
	return own, err
}

// BranchSeq returns the seqs of the stored record of the branch called
// name: the one it reads its parent at (its own, or the earlier one it
// names: keyspace.Branch.Base) and its own, which is its fork commit's.
// It is catalog.Options.BranchSeq over a store.
func BranchSeq(s interface {
	ScanPrefix(ctx context.Context, prefix []byte) *slate.Iterator
}) func(ctx context.Context, name string) (base, own uint64, err error) {
	return func(ctx context.Context, name string) (uint64, uint64, error) { return recordSeqs(ctx, s, name) }
}

// recordSeqs reads the record of the branch called name: the seq it reads
// its parent at, and its own.
func recordSeqs(ctx context.Context, s interface {
	ScanPrefix(ctx context.Context, prefix []byte) *slate.Iterator
}, name string) (base, own uint64, err error) {
	key := keyspace.BranchKey(name)
	it := s.ScanPrefix(ctx, key)
	defer it.Close()
	for it.Next() {
		if string(it.Key()) != string(key) {
			continue
		}
		_, b, err := keyspace.DecodeBranch(it.Key(), it.Value())
		if err != nil {
			return 0, 0, err
		}
		own = it.Seq()
		if base = own; b.Base != 0 {
			base = b.Base
		}
		return base, own, nil
	}
	if err := closeIter(it); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("commit: branch %q has no stored record", name)
}

// PinnedReader is the catalog.ReadAt over a store's snapshots at given
// seqs (at: slate.DB.SnapshotAt, slate.Snapshot.At): what a load reads
// branches through.
func PinnedReader(at func(seq uint64) (*slate.Snapshot, error)) catalog.ReadAt {
	return func(ctx context.Context, seq uint64, prefix []byte) (catalog.Iterator, func() error, error) {
		snap, err := at(seq)
		if err != nil {
			return nil, nil, err
		}
		it := snap.ScanPrefix(ctx, prefix)
		return it, func() error {
			err := it.Close()
			snap.Close()
			return err
		}, nil
	}
}
