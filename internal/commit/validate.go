package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

func isKind(err, kind error) bool { return errors.Is(err, kind) }

// validate checks everything the seeds require before a byte is written:
// row shapes, the head advancing by one, DuckLake's conflict matrix, and for
// compactions that next_row_id is untouched and the row ids are held.
func (p *Pipeline) validate(ctx context.Context, c *catalog.Commit) error {
	byCatalog := map[string][]*catalog.Op{} // schema → row ops
	for i := range c.Ops {
		o := &c.Ops[i]
		switch o.Kind {
		case catalog.OpInsert, catalog.OpUpdate, catalog.OpDelete:
			byCatalog[o.Schema] = append(byCatalog[o.Schema], o)
		}
	}
	forks := catalog.ForkCommit(c.Ops)
	for schema, ops := range byCatalog {
		if forks {
			// The rows of a fork commit are the server's own, not a
			// DuckLake step (catalog/branch_at.go): only their shapes are
			// checked.
			if err := checkShapes(schema, ops); err != nil {
				return err
			}
			continue
		}
		if err := p.validateCatalog(ctx, c, schema, ops); err != nil {
			return err
		}
	}
	return nil
}

// checkShapes refuses a row op on a table that is not DuckLake's.
func checkShapes(schema string, ops []*catalog.Op) error {
	for _, o := range ops {
		if _, ok := keyspace.Known(o.Table); !ok {
			return shapeErr("%s.%s is not a DuckLake catalog table", schema, o.Table)
		}
	}
	return nil
}

// mutable are the tables DuckLake updates in place (besides ending rows):
// options, table statistics, and the inlined-data and metadata-migration
// paths that rewrite a value without versioning it.
var mutable = map[string]bool{
	"ducklake_metadata":           true,
	"ducklake_table_stats":        true,
	"ducklake_table_column_stats": true,
}

// immutable tables are append-only logs: no row of them is ever updated.
var immutable = map[string]bool{
	"ducklake_snapshot":                     true,
	"ducklake_snapshot_changes":             true,
	"ducklake_files_scheduled_for_deletion": true,
}

func (p *Pipeline) validateCatalog(ctx context.Context, c *catalog.Commit, schema string, ops []*catalog.Op) error {
	if _, err := c.Base.Table(schema, "ducklake_snapshot"); err != nil {
		return p.validateNewCatalog(ctx, c, schema, ops)
	}
	var minted []int64
	var changesMade []string
	var rowIDMoves []string
	added := addedColumns(c, schema)
	for _, o := range ops {
		spec, ok := keyspace.Known(o.Table)
		if !ok {
			return shapeErr("%s.%s is not a DuckLake catalog table", schema, o.Table)
		}
		t, err := tableOf(c, o.Schema, o.Table)
		if err != nil {
			return err
		}
		types := t.Types()
		switch o.Kind {
		case catalog.OpUpdate:
			if err := checkUpdate(spec, t.Def(), types, o, added[o.Table]); err != nil {
				return err
			}
			if o.Table == "ducklake_table_stats" {
				if moved, desc := nextRowIDChanged(t.Def(), types, o); moved {
					rowIDMoves = append(rowIDMoves, desc)
				}
			}
		case catalog.OpInsert:
			switch o.Table {
			case "ducklake_snapshot":
				v, err := o.New.Column(types, 0)
				if err != nil || v.IsNull() {
					return shapeErr("ducklake_snapshot row without snapshot_id")
				}
				minted = append(minted, v.I)
			case "ducklake_snapshot_changes":
				v, err := o.New.Column(types, 1)
				if err == nil && !v.IsNull() {
					changesMade = append(changesMade, v.S)
				}
			}
		}
	}
	if len(minted) > 1 {
		if c.Consumes == nil {
			return shapeErr("one commit inserts %d snapshots (%v); a commit mints at most one", len(minted), minted[:min(len(minted), 5)])
		}
		// A merge mints one snapshot per commit of the branch it
		// publishes (catalog/merge.go), consecutive from the head on.
		slices.Sort(minted)
		for i, s := range minted {
			if s != minted[0]+int64(i) {
				return shapeErr("a merge inserts snapshots %v, which are not consecutive", minted[:min(len(minted), 5)])
			}
		}
	}
	var mine changes.Set
	for _, s := range changesMade {
		set, err := changes.Parse(s)
		if err != nil {
			return &Error{Kind: ErrShape, Code: pgcode.InvalidTextRepresentation, Message: fmt.Sprintf("invalid changes_made %q: %v", s, err)}
		}
		mine = append(mine, set...)
	}
	if len(minted) > 0 {
		head, has, err := maxSnapshot(c.Base, schema)
		if err != nil {
			return err
		}
		switch {
		case !has && minted[0] != 0 && !snapshotsExisted(c.Base, schema):
			// The first snapshot of a new catalog is DuckLake's seed, id 0.
			return &Error{Kind: ErrHead, Code: pgcode.SerializationFailure, Message: fmt.Sprintf(
				"could not serialize access due to concurrent update: the first snapshot of a catalog is 0, not %d", minted[0])}
		case has && minted[0] != head+1 && guardOn("head-by-one"):
			return &Error{Kind: ErrHead, Code: pgcode.SerializationFailure, Message: fmt.Sprintf(
				"could not serialize access due to concurrent update: snapshot %d does not advance the head %d by exactly one (conflict)", minted[0], head)}
		}
		// DuckLake's matrix against every commit since the transaction's
		// base snapshot: the commits the transaction did not see.
		if len(mine) > 0 {
			seen := minted[0] - 1
			if c.Pinned != nil {
				if h, ok, err := maxSnapshot(c.Pinned, schema); err == nil && ok {
					seen = h
				}
			}
			theirs, names, err := changesSince(c.Base, schema, seen)
			if err != nil {
				return err
			}
			if err := changes.Classify(mine, theirs, names); err != nil {
				e := &Error{Kind: ErrConflict, Code: pgcode.SerializationFailure, Message: err.Error()}
				var c *changes.Conflict
				if errors.As(err, &c) {
					e.Class = c.Class()
				}
				return e
			}
		}
	}
	if err := checkTombstones(c, schema, ops, mine); err != nil {
		return err
	}
	if err := checkLakeGuards(c, schema, ops, mine, minted); err != nil {
		return err
	}
	if mine.CompactionOnly() {
		if len(rowIDMoves) > 0 && guardOn("compaction-next-row-id") {
			return &Error{Kind: ErrHold, Code: pgcode.DataCorrupted, Message: "a compaction commit must leave next_row_id unchanged (RFC 0008): " + strings.Join(rowIDMoves, "; ")}
		}
		if p.opts.Hold != nil && guardOn("row-id-hold") {
			if err := p.checkHolds(ctx, c, schema, ops, mine); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateNewCatalog checks a commit that creates the catalog (Options.
// CheckNew): every row op must be a DuckLake shape, and the state it leaves
// must pass CheckNew. Nothing it writes can touch an existing lake.
func (p *Pipeline) validateNewCatalog(ctx context.Context, c *catalog.Commit, schema string, ops []*catalog.Op) error {
	for _, o := range ops {
		spec, ok := keyspace.Known(o.Table)
		if !ok {
			return shapeErr("%s.%s is not a DuckLake catalog table", schema, o.Table)
		}
		if o.Kind != catalog.OpUpdate {
			continue
		}
		t, err := tableOf(c, o.Schema, o.Table)
		if err != nil {
			return err
		}
		if err := checkUpdate(spec, t.Def(), t.Types(), o, nil); err != nil {
			return err
		}
	}
	if p.opts.CheckNew == nil {
		return nil
	}
	return p.opts.CheckNew(ctx, StoredOf(c.Next, c.DB.Name(), schema))
}

func tableOf(c *catalog.Commit, schema, name string) (*catalog.Table, error) {
	if t, err := c.Next.Table(schema, name); err == nil {
		return t, nil
	}
	return c.Base.Table(schema, name)
}

// checkUpdate enforces the update shapes DuckLake writes: on a versioned
// table an update may only end a current row (end_snapshot NULL → N, all
// else unchanged) or, on ducklake_data_file only, rebase a current row's
// begin_snapshot in place (RFC 0008 rewrite step 3).
// addedColumns returns, per table of schema, the columns the commit adds:
// a migration (DuckLake's 0.3 → 0.4 moves partial_max out of
// partial_file_info, fills default_value_type) sets them on existing rows.
func addedColumns(c *catalog.Commit, schema string) map[string]map[string]bool {
	var out map[string]map[string]bool
	for i := range c.Ops {
		o := &c.Ops[i]
		if o.Kind != catalog.OpAddColumn || o.Schema != schema {
			continue
		}
		if out == nil {
			out = map[string]map[string]bool{}
		}
		if out[o.Table] == nil {
			out[o.Table] = map[string]bool{}
		}
		out[o.Table][o.Column.Def.Name] = true
	}
	return out
}

// checkUpdate refuses an UPDATE DuckLake does not make: on a versioned
// table only ending a row, rebasing a live data file's begin_snapshot, and
// filling a column the same commit added (filled) are DuckLake's.
func checkUpdate(spec *keyspace.TableSpec, def *keyspace.TableDef, types []datum.Type, o *catalog.Op, filled map[string]bool) error {
	if immutable[o.Table] {
		return shapeErr("%s rows are never updated", o.Table)
	}
	if !spec.Versioned() {
		if mutable[o.Table] {
			return nil
		}
		return shapeErr("%s is append-only; UPDATE is not one of the operations DuckLake performs on it", o.Table)
	}
	oldV, err := o.Old.Decode(types, nil)
	if err != nil {
		return fmt.Errorf("commit: %s: %w", o.Table, err)
	}
	newV, err := o.New.Decode(types, nil)
	if err != nil {
		return fmt.Errorf("commit: %s: %w", o.Table, err)
	}
	var changed []int
	for i := range oldV {
		if !datum.Equal(oldV[i], newV[i]) && !filled[def.Columns[i].Name] {
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 {
		return nil // a no-op update, as PostgreSQL allows
	}
	endOld := oldV[spec.End]
	switch {
	case len(changed) == 1 && changed[0] == spec.End && endOld.IsNull() && !newV[spec.End].IsNull():
		return nil
	case len(changed) == 1 && changed[0] == spec.Begin && o.Table == "ducklake_data_file":
		if !endOld.IsNull() {
			return shapeErr("UPDATE ducklake_data_file SET begin_snapshot targets data file %s, which is not current (end_snapshot %s): only a live file's visibility can be rebased",
				datum.FormatText(types[0], oldV[0]), datum.FormatText(types[spec.End], endOld))
		}
		return nil
	case changed[0] == spec.Begin || (len(changed) > 1 && contains(changed, spec.Begin)):
		return shapeErr("UPDATE of %s.begin_snapshot: only a current ducklake_data_file row's begin_snapshot may be rebased", o.Table)
	case contains(changed, spec.End) && !endOld.IsNull():
		return shapeErr("UPDATE of %s.end_snapshot on a row that already ended at %s", o.Table, datum.FormatText(types[spec.End], endOld))
	}
	names := make([]string, len(changed))
	for i, c := range changed {
		names[i] = def.Columns[c].Name
	}
	return shapeErr("UPDATE of %s changes %s; on a versioned table DuckLake only ends rows", o.Table, strings.Join(names, ", "))
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func nextRowIDChanged(def *keyspace.TableDef, types []datum.Type, o *catalog.Op) (bool, string) {
	i := def.ColumnIndex("next_row_id")
	if i < 0 {
		return false, ""
	}
	a, err1 := o.Old.Column(types, i)
	b, err2 := o.New.Column(types, i)
	if err1 != nil || err2 != nil || datum.Equal(a, b) {
		return false, ""
	}
	tid, _ := o.Old.Column(types, def.ColumnIndex("table_id"))
	return true, fmt.Sprintf("table %s next_row_id %s → %s", datum.FormatText(datum.Int8, tid),
		datum.FormatText(datum.Int8, a), datum.FormatText(datum.Int8, b))
}

// maxSnapshot returns the highest snapshot id in the catalog's
// ducklake_snapshot table.
func maxSnapshot(v *catalog.Version, schema string) (int64, bool, error) {
	t, err := v.Table(schema, "ducklake_snapshot")
	if err != nil {
		return 0, false, nil
	}
	types := t.Types()
	if _, r, ok := t.EdgeKey(true); ok {
		id, err := r.Column(types, 0)
		return id.I, err == nil && !id.IsNull(), err
	}
	var max int64
	has := false
	var ferr error
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		id, err := r.Column(types, 0)
		if err != nil {
			ferr = err
			return false
		}
		if !id.IsNull() && (!has || id.I > max) {
			max, has = id.I, true
		}
		return true
	})
	return max, has, ferr
}

// snapshotsExisted reports whether the catalog ever had snapshots (a table
// that exists but is empty was emptied, not new).
func snapshotsExisted(v *catalog.Version, schema string) bool {
	t, err := v.Table(schema, "ducklake_snapshot_changes")
	return err == nil && t.Len() > 0
}

// changesSince returns the union of change sets of snapshots after seen, and
// the catalog's schema names by id (the matrix needs them for drop-schema).
func changesSince(v *catalog.Version, schema string, seen int64) (changes.Set, changes.SchemaNames, error) {
	var theirs changes.Set
	t, err := v.Table(schema, "ducklake_snapshot_changes")
	if err != nil {
		return nil, nil, nil
	}
	types := t.Types()
	var ferr error
	visit := func(_ catalog.CTID, r datum.Row) bool {
		vals, err := r.Decode(types, nil)
		if err != nil {
			ferr = err
			return false
		}
		if vals[0].IsNull() || vals[0].I <= seen || vals[1].IsNull() {
			return true
		}
		set, err := changes.Parse(vals[1].S)
		if err != nil {
			ferr = fmt.Errorf("commit: stored changes_made of snapshot %d: %w", vals[0].I, err)
			return false
		}
		theirs = append(theirs, set...)
		return true
	}
	// Only the snapshots after seen matter: start there in the key index
	// (snapshot_id is the key) rather than scanning the whole history.
	if !t.AscendKeyFrom(datum.IntValue(seen+1), visit) {
		t.Scan(visit)
	}
	if ferr != nil {
		return nil, nil, ferr
	}
	names := changes.SchemaNames{}
	if st, err := v.Table(schema, "ducklake_schema"); err == nil {
		def := st.Def()
		idI, nameI := def.ColumnIndex("schema_id"), def.ColumnIndex("schema_name")
		st.Scan(func(_ catalog.CTID, r datum.Row) bool {
			vals, err := r.Decode(st.Types(), nil)
			if err == nil && idI >= 0 && nameI >= 0 && !vals[idI].IsNull() {
				names[vals[idI].I] = vals[nameI].S
			}
			return true
		})
	}
	return theirs, names, nil
}

// checkTombstones enforces seed 004's rule for delete files: a live delete
// file (a tombstone) may stop being live only together with its data file,
// or when the same commit registers its replacement. And, RFC 0008 step 5, a
// merge never consumes a source that carries live deletes: merging it
// plainly would bring the deleted rows back.
func checkTombstones(c *catalog.Commit, schema string, ops []*catalog.Op, mine changes.Set) error {
	merging := map[int64]bool{}
	for _, e := range mine {
		if e.Kind == changes.MergeAdjacent {
			merging[e.ID] = true
		}
	}
	dt, err := tableOf(c, schema, "ducklake_delete_file")
	if err != nil {
		return nil
	}
	def, types := dt.Def(), dt.Types()
	iDel, iTable, iFile, iEnd := def.ColumnIndex("delete_file_id"), def.ColumnIndex("table_id"), def.ColumnIndex("data_file_id"), def.ColumnIndex("end_snapshot")
	if iDel < 0 || iTable < 0 || iFile < 0 || iEnd < 0 {
		return nil
	}
	type dropped struct{ delID, tableID, fileID int64 }
	var gone []dropped
	for _, o := range ops {
		if o.Table != "ducklake_delete_file" || o.Old == nil {
			continue
		}
		old, err := o.Old.Decode(types, nil)
		if err != nil || !old[iEnd].IsNull() {
			continue // history rows may go (expiry); only live tombstones matter
		}
		if o.Kind == catalog.OpUpdate {
			nv, err := o.New.Decode(types, nil)
			if err != nil || nv[iEnd].IsNull() {
				continue
			}
		}
		d := dropped{old[iDel].I, old[iTable].I, old[iFile].I}
		if o.Kind == catalog.OpDelete && merging[d.tableID] && guardOn("merge-live-deletes") {
			return shapeErr("merge_adjacent of table %d consumes data file %d, which carries the live delete file %d: DuckLake merges only files without deletes (RFC 0008); a plain merge would bring the deleted rows back",
				d.tableID, d.fileID, d.delID)
		}
		gone = append(gone, d)
	}
	// Data files that stop being live in this commit (ended or hard-deleted
	// while current): a live delete file must not outlive them.
	var endedFiles []int64
	if ft, err := tableOf(c, schema, "ducklake_data_file"); err == nil {
		fdef, ftypes := ft.Def(), ft.Types()
		fID, fEnd := fdef.ColumnIndex("data_file_id"), fdef.ColumnIndex("end_snapshot")
		for _, o := range ops {
			if o.Table != "ducklake_data_file" || o.Old == nil {
				continue
			}
			old, err := o.Old.Decode(ftypes, nil)
			if err != nil || !old[fEnd].IsNull() {
				continue
			}
			if o.Kind == catalog.OpUpdate {
				if nv, err := o.New.Decode(ftypes, nil); err != nil || nv[fEnd].IsNull() {
					continue
				}
			}
			endedFiles = append(endedFiles, old[fID].I)
		}
	}
	if len(gone) == 0 && len(endedFiles) == 0 {
		return nil
	}
	// Live data files and live delete files of the next version, by file.
	liveFile := map[int64]bool{}
	if ft, err := c.Next.Table(schema, "ducklake_data_file"); err == nil {
		fdef, ftypes := ft.Def(), ft.Types()
		fID, fEnd := fdef.ColumnIndex("data_file_id"), fdef.ColumnIndex("end_snapshot")
		ft.Scan(func(_ catalog.CTID, r datum.Row) bool {
			v, err := r.Decode(ftypes, nil)
			if err == nil && v[fEnd].IsNull() {
				liveFile[v[fID].I] = true
			}
			return true
		})
	}
	covered := map[int64]bool{}
	if nt, err := c.Next.Table(schema, "ducklake_delete_file"); err == nil {
		nt.Scan(func(_ catalog.CTID, r datum.Row) bool {
			v, err := r.Decode(types, nil)
			if err == nil && v[iEnd].IsNull() {
				covered[v[iFile].I] = true
			}
			return true
		})
	}
	for _, f := range endedFiles {
		if covered[f] && !liveFile[f] && guardOn("tombstone-outlives-file") {
			return shapeErr("data file %d stops being live while a live delete file still applies to it: a delete file must never outlive its data file", f)
		}
	}
	for _, d := range gone {
		if liveFile[d.fileID] && !covered[d.fileID] && guardOn("tombstone-dropped") {
			return shapeErr("delete file %d of data file %d stops being live while its data file stays live and no replacement delete file is registered: the deleted rows would come back (a tombstone must not be dropped while a snapshot references its data file)",
				d.delID, d.fileID)
		}
	}
	return nil
}
