package memcat

import (
	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// A writable branch writes its files under a data path of its own and
// reads the files it inherited where its parent wrote them
// (catalog/branch_write.go). DuckLake resolves a relative file path
// against the catalog's data path, which on the branch is the branch's;
// so the branch is served the rows of the files it inherited — ids below
// the parent's next_file_id at the fork — with their paths resolved
// against the parent's data path and made absolute. Served so, DuckDB
// reads them where they are, and the branch's delete_orphaned_files,
// which lists the branch's data path only, never meets them. The rows are
// stored as DuckLake wrote them; only their serving changes, and serving
// an absolute path is a no-op, so a row the branch updates (ending a
// file) may be stored either way.

// A read-only branch forked at an earlier snapshot of its parent is
// served the parent's catalog at the fork without the snapshots after that
// one (a writable one holds that catalog itself: catalog/branch_at.go) (ducklake_snapshot, ducklake_snapshot_changes): DuckLake takes the
// newest snapshot it sees as the catalog's and reads every other table as
// of it, by begin and end snapshot, as its time travel does.

// viewFor returns how schema.table's rows are served on a branch (and
// whether the view hides rows), nil where rows are served as stored.
// REQUIRES: v.mu held.
func (v *Version) viewFor(schema, table string) (func([]datum.Value) bool, bool) {
	if v.branch == nil {
		return nil, false
	}
	if v.branch.HasAt && !v.branch.Writable() {
		if table != "ducklake_snapshot" && table != "ducklake_snapshot_changes" {
			return nil, false
		}
		at := v.branch.At
		return func(vals []datum.Value) bool { return len(vals) == 0 || vals[0].IsNull() || vals[0].I <= at }, true
	}
	fix := v.fixFor(schema, table)
	if fix == nil {
		return nil, false
	}
	return func(vals []datum.Value) bool { fix(vals); return true }, false
}

// fixFor returns the rewrite of schema.table's served rows on a writable
// branch, nil where rows are served as stored. REQUIRES: v.mu held.
func (v *Version) fixFor(schema, table string) func([]datum.Value) {
	if v.branch == nil || !v.branch.Writable() || (table != "ducklake_data_file" && table != "ducklake_delete_file") {
		return nil
	}
	var fork keyspace.BranchCatalog
	for _, c := range v.branch.Catalogs {
		if c.Schema == schema {
			fork = c
		}
	}
	if fork.DataPath == "" {
		return nil
	}
	t, err := v.src.Table(schema, table)
	if err != nil {
		return nil
	}
	def := t.Def()
	path, rel, tid := def.ColumnIndex("path"), def.ColumnIndex("path_is_relative"), def.ColumnIndex("table_id")
	if path < 0 || rel < 0 || tid < 0 {
		return nil
	}
	dirs, ok := v.dirs[schema]
	if !ok {
		// Both file tables resolve against the same directories.
		dirs = v.src.TableDirs(schema, fork.DataPath)
		if v.dirs == nil {
			v.dirs = map[string]map[int64]string{}
		}
		v.dirs[schema] = dirs
	}
	return func(vals []datum.Value) {
		if len(vals) <= max(path, rel, tid) || vals[0].IsNull() || vals[0].I >= fork.NextFileID ||
			vals[rel].IsNull() || vals[rel].I == 0 || vals[tid].IsNull() {
			return
		}
		dir, ok := dirs[vals[tid].I]
		if !ok {
			return
		}
		vals[path] = datum.TextValue(catalog.JoinPath(dir, vals[path].S, true))
		vals[rel] = datum.BoolValue(false)
	}
}
