package catalog

import (
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// A writable branch forked at an earlier snapshot of its parent starts as
// the parent's catalog read as of that snapshot, made its present: the
// fork commit removes, on the branch, every row the parent wrote after it
// (snapshots, schema versions, rows that began later, the statistics and
// per-file rows of what they created) and reopens the rows it ended
// later. Its snapshot's next_file_id and next_catalog_id become the
// parent's newest, so that DuckLake allocates the branch's new files and
// catalog objects past every id the parent used (a file the parent
// compacted later but backdated to the snapshot has a later id, and the
// branch still reads it); its snapshot ids continue from the snapshot, and
// reuse the ids of parent snapshots the branch no longer holds. Row ids
// keep the parent's newest next_row_id, past every row id the parent used.
// The branch inherits, as any branch does, every file below the parent's
// newest next_file_id that it holds. The statistics of the tables kept are
// the parent's newest: row counts and bounds that cover the snapshot's,
// which only costs planning precision. Such a fork writes O(the rows the
// parent changed since the snapshot).
//
// A file the parent compacted since, whose rows carry their own snapshot
// ids (a merge_adjacent_files output, partial_max later than the
// snapshot), would show the branch the parent's later rows: such a fork is
// refused.

// materializeAt makes t, the fork commit of a writable branch, hold the
// catalog in schema as of snapshot at.
func materializeAt(t *Txn, schema string, at int64) error {
	sc, ok := t.View().Schema(schema)
	if !ok {
		return fmt.Errorf("catalog: fork at %d: no schema %s", at, schema)
	}
	st, ok := sc.Table("ducklake_snapshot")
	if !ok {
		return fmt.Errorf("catalog: fork at %d: %s has no ducklake_snapshot", at, schema)
	}
	_, row, ok := st.LookupKey([]datum.Value{datum.IntValue(at)})
	if !ok {
		return fmt.Errorf("catalog: fork at %d: no such snapshot", at)
	}
	snap, err := row.Decode(st.Types(), nil)
	if err != nil {
		return err
	}
	sdef := st.Def()
	si, ci, fi := sdef.ColumnIndex("schema_version"), sdef.ColumnIndex("next_catalog_id"), sdef.ColumnIndex("next_file_id")
	if si < 0 || ci < 0 || fi < 0 {
		return fmt.Errorf("catalog: fork at %d: ducklake_snapshot lacks its counters", at)
	}
	svAt, catAt := snap[si].I, snap[ci].I
	atCTID, _, _ := st.LookupKey([]datum.Value{datum.IntValue(at)})
	_, headRow, ok := st.EdgeKey(true)
	if !ok {
		return fmt.Errorf("catalog: fork at %d: no head snapshot", at)
	}
	head, err := headRow.Decode(st.Types(), nil)
	if err != nil {
		return err
	}

	type edit struct {
		table string
		ctid  CTID
		vals  []datum.Value // nil: delete
	}
	var edits []edit
	var drops []string
	later := map[int64]bool{} // files that began after at
	for _, name := range []string{"ducklake_data_file", "ducklake_delete_file"} {
		ft, ok := sc.Table(name)
		if !ok {
			continue
		}
		d := ft.Def()
		bi, ei, pi := d.ColumnIndex("begin_snapshot"), d.ColumnIndex("end_snapshot"), d.ColumnIndex("partial_max")
		var ferr error
		ft.Scan(func(_ CTID, r datum.Row) bool {
			v, err := r.Decode(ft.Types(), nil)
			if err != nil {
				ferr = err
				return false
			}
			switch {
			case v[bi].I > at:
				later[v[0].I] = true
			case (v[ei].IsNull() || v[ei].I > at) && pi >= 0 && !v[pi].IsNull() && v[pi].I > at:
				ferr = &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported, Message: fmt.Sprintf(
					"cannot fork a writable branch at snapshot %d: %s %d, live then, carries rows of snapshots up to %d (the lake compacted since); fork read-only at that snapshot, or writable at a later one",
					at, strings.TrimPrefix(name, "ducklake_"), v[0].I, v[pi].I)}
			}
			return ferr == nil
		})
		if ferr != nil {
			return ferr
		}
	}
	for _, t := range sc.Tables() {
		name, def := t.Name(), t.Def()
		col := def.ColumnIndex
		var drop func(v []datum.Value) bool // the row goes
		var reopen int = -1                 // the end column to clear where it is later than at
		switch name {
		case "ducklake_snapshot", "ducklake_snapshot_changes":
			drop = func(v []datum.Value) bool { return v[0].I > at }
		case "ducklake_schema_versions":
			bi := col("begin_snapshot")
			drop = func(v []datum.Value) bool { return v[bi].I > at }
		case "ducklake_inlined_data_tables":
			si, ni := col("schema_version"), col("table_name")
			drop = func(v []datum.Value) bool {
				if v[si].I > svAt {
					drops = append(drops, v[ni].S)
					return true
				}
				return false
			}
		case "ducklake_table_stats", "ducklake_table_column_stats":
			ti := col("table_id")
			drop = func(v []datum.Value) bool { return v[ti].I >= catAt }
		case "ducklake_macro_impl", "ducklake_macro_parameters":
			mi := col("macro_id")
			drop = func(v []datum.Value) bool { return v[mi].I >= catAt }
		case "ducklake_partition_column":
			pi := col("partition_id")
			drop = func(v []datum.Value) bool { return v[pi].I >= catAt }
		case "ducklake_sort_expression":
			si := col("sort_id")
			drop = func(v []datum.Value) bool { return v[si].I >= catAt }
		case "ducklake_file_column_stats", "ducklake_file_variant_stats", "ducklake_file_partition_value":
			fi := col("data_file_id")
			drop = func(v []datum.Value) bool { return later[v[fi].I] }
		case "ducklake_files_scheduled_for_deletion", "ducklake_metadata":
			continue // the fork drops the schedule; options are the parent's newest
		default:
			bi, ei := col("begin_snapshot"), col("end_snapshot")
			if spec, ok := keyspace.Known(name); ok && spec.Kind == keyspace.KindInlinedRow {
				bi, ei = spec.Begin, spec.End
			}
			if bi < 0 {
				continue
			}
			drop = func(v []datum.Value) bool { return !v[bi].IsNull() && v[bi].I > at }
			reopen = ei
		}
		var serr error
		t.Scan(func(c CTID, r datum.Row) bool {
			v, err := r.Decode(t.Types(), nil)
			if err != nil {
				serr = err
				return false
			}
			switch {
			case drop(v):
				edits = append(edits, edit{name, c, nil})
			case reopen >= 0 && !v[reopen].IsNull() && v[reopen].I > at:
				v[reopen] = datum.Null
				edits = append(edits, edit{name, c, v})
			}
			return true
		})
		if serr != nil {
			return fmt.Errorf("catalog: fork at %d: %s: %w", at, name, serr)
		}
	}
	dropped := map[string]bool{}
	for _, n := range drops {
		dropped[n] = true
	}
	for _, e := range edits {
		if dropped[e.table] {
			continue // the table goes as a whole
		}
		var err error
		if e.vals == nil {
			err = t.DeleteRow(schema, e.table, e.ctid)
		} else {
			_, err = t.UpdateRow(schema, e.table, e.ctid, e.vals)
		}
		if err != nil {
			return fmt.Errorf("catalog: fork at %d: %s: %w", at, e.table, err)
		}
	}
	for _, n := range drops {
		if err := t.DropTable(schema, n); err != nil {
			return fmt.Errorf("catalog: fork at %d: %w", at, err)
		}
	}
	snap[fi], snap[ci] = head[fi], head[ci]
	if _, err := t.UpdateRow(schema, "ducklake_snapshot", atCTID, snap); err != nil {
		return fmt.Errorf("catalog: fork at %d: %w", at, err)
	}
	return nil
}
