package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// A merge publishes a writable branch's work on its parent and consumes
// the branch: one commit of the parent carries the rows a planner derives
// from what the branch changed since the fork, and the same store batch
// erases the branch (Commit.Consumes). Both, or neither: once the parent
// names the files under the branch's data path, the branch's own
// maintenance must never run again, and until it does, the parent must
// not name them.
//
// The merge holds the branch's commit lock from reading its version to
// the commit, so nothing lands on the branch in between; the parent's
// commits go on, and the merge commit is rebased on them or refused
// (Txn.Commit) as any transaction.

// ErrNotMergeable is the Kind of a merge refused before a commit: the
// database is no writable branch of the target, or its store cannot read
// the fork.
var ErrNotMergeable = errors.New("catalog: cannot merge")

// Merge is what a merge planner reads and writes.
type Merge struct {
	// Branch is the branch's record; Name its database name.
	Branch *keyspace.Branch
	Name   string
	// Fork is the branch as its fork commit left it; Head its newest
	// version. Shared: Fork is Head's ancestor in memory, so the two share
	// every B-tree node Head did not change (Table.Chunks); else Fork was
	// read back from the store.
	Fork, Head *Version
	Shared     bool
	// Txn is a transaction of the parent, at its newest version, which
	// the planner fills with the merge's rows.
	Txn *Txn
}

// MergeBranch merges the writable branch name into its parent into: plan
// fills m.Txn, which then commits together with the branch's erasure.
// A plan that writes nothing refuses the merge (55000): there is nothing
// to publish, and the branch stays.
func (s *Server) MergeBranch(ctx context.Context, name, into string, plan func(m *Merge) error) error {
	db, p, err := s.mergeable(name, into)
	if err != nil {
		return err
	}
	b := db.branch
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	if db.dropped.Load() {
		return errNoDatabase(name)
	}
	fork, shared := db.forkVer, db.forkVer != nil
	if !shared {
		var err error
		if fork, err = s.forkVersion(ctx, name, b); err != nil {
			return err
		}
	}
	// The branch's newest version: every commit before the lock was taken
	// is published, and none follows until it is released.
	head := db.cur.Load()
	if err := head.landed(ctx, s.opts.sealedWait()); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	// Wait for the branch's own commits to be durable: the merge must not
	// publish what a failed store write of the branch would take back.
	if err := db.WaitDurable(ctx, head); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	// A merge is planned on the parent's newest version; when the parent
	// commits before it does, it is planned again on the newer one.
	for range mergeAttempts {
		t := p.BeginLatest()
		m := &Merge{Branch: b, Name: name, Fork: fork, Head: head, Shared: shared, Txn: t}
		if err = plan(m); err != nil {
			t.Rollback()
			return err
		}
		if !t.Dirty() {
			t.Rollback()
			return &Error{Kind: ErrNotMergeable, Code: pgcode.ObjectNotInPrerequisiteState,
				Message: fmt.Sprintf("branch %q has nothing to merge into %q", name, into)}
		}
		t.consumes = db
		if err = t.Commit(ctx); !errors.Is(err, ErrSerialization) {
			return err
		}
	}
	return err
}

// mergeAttempts bounds how often a merge is planned again because its
// parent committed meanwhile.
const mergeAttempts = 20

// CheckMerge reports whether name is a writable branch of into that this
// server can merge, without merging: the errors MergeBranch would return
// before it reads anything.
func (s *Server) CheckMerge(name, into string) error {
	_, _, err := s.mergeable(name, into)
	return err
}

func (s *Server) mergeable(name, into string) (db, parent *Database, err error) {
	db, ok := s.Lookup(name)
	if !ok {
		return nil, nil, errNoDatabase(name)
	}
	b := db.branch
	if b == nil || !b.Writable() {
		return nil, nil, &Error{Kind: ErrNotMergeable, Code: pgcode.WrongObjectType,
			Message: fmt.Sprintf("database %q is not a writable branch: only a branch forked with a LOCATION has commits of its own to merge", name)}
	}
	if b.Parent != into {
		return nil, nil, &Error{Kind: ErrNotMergeable, Code: pgcode.InvalidParameterValue,
			Message: fmt.Sprintf("database %q is a branch of %q, not of %q", name, b.Parent, into)}
	}
	p, ok := s.Lookup(into)
	if !ok {
		return nil, nil, errNoDatabase(into)
	}
	if s.opts.BranchSeq == nil || s.opts.ReadAt == nil {
		return nil, nil, &Error{Kind: ErrNotMergeable, Code: pgcode.FeatureNotSupported,
			Message: "a merge reads the branch's fork from the store, and this server keeps no store"}
	}
	return db, p, nil
}

// forkVersion reads, from the store, the branch b (called name) as its
// fork commit left it: its parent's catalogs as it read them, with what
// the fork itself wrote (its data path; a
// fork at an earlier snapshot, that snapshot made its present).
func (s *Server) forkVersion(ctx context.Context, name string, b *keyspace.Branch) (*Version, error) {
	base, own, err := s.opts.BranchSeq(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	return readBranch(ctx, name, b.Catalogs, true, func(c keyspace.BranchCatalog) (Iterator, []func() error, error) {
		bi, bdone, err := s.opts.ReadAt(ctx, base, keyspace.CatalogPrefix(c.ID))
		if err != nil {
			return nil, []func() error{bdone}, err
		}
		oi, odone, err := s.opts.ReadAt(ctx, own, keyspace.CatalogPrefix(c.OwnID))
		if err != nil {
			return nil, []func() error{bdone, odone}, err
		}
		return &overlayIter{base: bi, over: oi, own: keyspace.CatalogPrefix(c.OwnID)}, []func() error{bdone, odone}, nil
	})
}

// consumed forgets the branch a merge commit erased, once the commit is
// queued. REQUIRES: db's commit lock (MergeBranch holds it).
func (s *Server) consumed(db *Database) {
	if db == nil {
		return
	}
	db.dropped.Store(true)
	s.forget(db)
}
