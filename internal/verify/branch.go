package verify

import (
	"fmt"
	"sort"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Kinds of the cross-branch file rule: a branch reads its parent's files
// in the parent's data path, so the parent must keep knowing each of them
// (else its ducklake_delete_orphaned_files deletes it), must not schedule
// any for deletion (else its ducklake_cleanup_old_files does), and must
// keep the snapshot the branch was forked at.
const (
	// KindBranchOrphaned: a branch's parent database, or one of the
	// catalogs it reads there, no longer exists.
	KindBranchOrphaned Kind = "branch-parent-missing"
	// KindBranchForkExpired: the parent expired the snapshot a branch was
	// forked at.
	KindBranchForkExpired Kind = "branch-fork-expired"
	// KindBranchFileUnknown: a file a branch reads has no data-file or
	// delete-file row in the parent.
	KindBranchFileUnknown Kind = "branch-file-unknown"
	// KindBranchFileScheduled: a file a branch reads is in the parent's
	// deletion schedule.
	KindBranchFileScheduled Kind = "branch-file-scheduled"
)

// storedFiles returns the data and delete files a catalog references and
// those it has scheduled for deletion, each id with its path as stored.
func storedFiles(c *commit.StoredCatalog) (refs, scheduled map[int64]string, err error) {
	refs, scheduled = map[int64]string{}, map[int64]string{}
	for table, into := range map[string]map[int64]string{
		"ducklake_data_file": refs, "ducklake_delete_file": refs, "ducklake_files_scheduled_for_deletion": scheduled,
	} {
		def, ok := c.Defs[table]
		if !ok {
			continue
		}
		types, pi := def.Types(), def.ColumnIndex("path")
		if pi < 0 {
			return nil, nil, fmt.Errorf("verify: %s has no path column", table)
		}
		for _, r := range c.Rows[table] {
			id, err := r.Column(types, 0)
			if err != nil {
				return nil, nil, fmt.Errorf("verify: %s: %w", table, err)
			}
			p, err := r.Column(types, pi)
			if err != nil {
				return nil, nil, fmt.Errorf("verify: %s: %w", table, err)
			}
			if !id.IsNull() {
				into[id.Int()] = p.Text()
			}
		}
	}
	return refs, scheduled, nil
}

// snapshotIDs returns the snapshot ids a catalog retains.
func snapshotIDs(c *commit.StoredCatalog) map[int64]bool {
	out := map[int64]bool{}
	def, ok := c.Defs["ducklake_snapshot"]
	if !ok {
		return out
	}
	for _, r := range c.Rows["ducklake_snapshot"] {
		if v, err := r.Column(def.Types(), 0); err == nil && !v.IsNull() {
			out[v.Int()] = true
		}
	}
	return out
}

// CheckBranches checks the cross-branch file rule for every branch against
// its parent's catalogs as stored now (cats, by id).
func CheckBranches(branches []*commit.StoredBranch, cats map[uint32]*commit.StoredCatalog) ([]Violation, error) {
	var out []Violation
	for _, b := range branches {
		for _, bc := range b.Catalogs {
			name := b.Name + "." + bc.Schema
			fork := forkOf(b.Branch, bc.Schema)
			parent, ok := cats[fork.ID]
			if !ok || parent.Database != b.Branch.Parent || parent.Schema != bc.Schema {
				out = append(out, Violation{name, KindBranchOrphaned, fmt.Sprintf("reads catalog %d (%s.%s), which the store no longer holds", fork.ID, b.Branch.Parent, bc.Schema)})
				continue
			}
			if !IsDuckLake(bc) {
				continue
			}
			if fork.HasSnapshot && !snapshotIDs(parent)[fork.Snapshot] {
				out = append(out, Violation{name, KindBranchForkExpired, fmt.Sprintf("%s.%s expired snapshot %d, the fork", parent.Database, parent.Schema, fork.Snapshot)})
			}
			reads, _, err := storedFiles(bc)
			if err != nil {
				return nil, err
			}
			known, scheduled, err := storedFiles(parent)
			if err != nil {
				return nil, err
			}
			// The files it reads of the parent's: ids below the parent's
			// next_file_id at the fork (one id, one file on both sides;
			// a writable branch may store the path made absolute).
			var files []int64
			for id := range reads {
				if id < fork.NextFileID {
					files = append(files, id)
				}
			}
			sort.Slice(files, func(i, j int) bool { return files[i] < files[j] })
			for _, id := range files {
				_, isScheduled := scheduled[id]
				_, isKnown := known[id]
				switch {
				case isScheduled:
					out = append(out, Violation{name, KindBranchFileScheduled, fmt.Sprintf("file %d (%s) is scheduled for deletion in %s.%s", id, reads[id], parent.Database, parent.Schema)})
				case !isKnown:
					out = append(out, Violation{name, KindBranchFileUnknown, fmt.Sprintf("file %d (%s) has no row in %s.%s: its orphan cleanup would delete it", id, reads[id], parent.Database, parent.Schema)})
				}
			}
		}
	}
	return out, nil
}

func forkOf(b keyspace.Branch, schema string) keyspace.BranchCatalog {
	for _, c := range b.Catalogs {
		if c.Schema == schema {
			return c
		}
	}
	return keyspace.BranchCatalog{}
}
