package verify

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// IsDuckLake reports whether a stored catalog holds a DuckLake metadata
// schema (a plain PostgreSQL database created through moraine does not).
func IsDuckLake(c *commit.StoredCatalog) bool {
	_, ok := c.Defs["ducklake_snapshot"]
	return ok
}

// CheckStore reads every catalog of the store (one consistent view: pass a
// slate.Snapshot when the store has a live writer) and checks each DuckLake
// catalog, in id order; then each branch's catalogs, as the branch reads
// them, and the cross-branch file rule (CheckBranches).
func CheckStore(ctx context.Context, s commit.Scanner) ([]Violation, error) {
	cats, err := commit.ReadStore(ctx, s)
	if err != nil {
		return nil, err
	}
	branches, err := commit.ReadBranches(ctx, s)
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, 0, len(cats))
	for id := range cats {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	order := make([]*commit.StoredCatalog, 0, len(ids))
	for _, id := range ids {
		order = append(order, cats[id])
	}
	for _, b := range branches {
		order = append(order, b.Catalogs...)
	}
	var out []Violation
	for _, c := range order {
		if !IsDuckLake(c) {
			continue
		}
		st, err := FromStored(c)
		if err != nil {
			return nil, err
		}
		out = append(out, Check(st)...)
	}
	bvs, err := CheckBranches(branches, cats)
	if err != nil {
		return nil, err
	}
	return append(out, bvs...), nil
}

// columns resolves column names of one stored table to indexes.
type columns struct {
	table string
	idx   map[string]int
	types []datum.Type
}

func newColumns(def *keyspace.TableDef) *columns {
	c := &columns{table: def.Name, idx: map[string]int{}, types: def.Types()}
	for i, col := range def.Columns {
		c.idx[col.Name] = i
	}
	return c
}

// row is one decoded row with typed accessors that turn a missing column
// or a wrong type into an error naming the table.
type row struct {
	c    *columns
	vals []datum.Value
	err  error
}

func (r *row) value(name string) (datum.Value, bool) {
	if r.err != nil {
		return datum.Null, false
	}
	i, ok := r.c.idx[name]
	if !ok {
		r.err = fmt.Errorf("verify: %s has no column %s", r.c.table, name)
		return datum.Null, false
	}
	v := r.vals[i]
	if v.IsNull() {
		return v, false
	}
	if v.K != datum.KindInt {
		r.err = fmt.Errorf("verify: %s.%s is not an integer", r.c.table, name)
		return datum.Null, false
	}
	return v, true
}

// int reads a NOT NULL integer column; NULL is an error.
func (r *row) int(name string) int64 {
	v, ok := r.value(name)
	if !ok && r.err == nil {
		r.err = fmt.Errorf("verify: %s.%s is NULL", r.c.table, name)
	}
	return v.Int()
}

// str reads a text column; NULL reads as "".
func (r *row) str(name string) string {
	if r.err != nil {
		return ""
	}
	i, ok := r.c.idx[name]
	if !ok {
		r.err = fmt.Errorf("verify: %s has no column %s", r.c.table, name)
		return ""
	}
	return r.vals[i].S
}

// opt reads a nullable integer column.
func (r *row) opt(name string) *int64 {
	v, ok := r.value(name)
	if !ok {
		return nil
	}
	i := v.Int()
	return &i
}

// partialMax reads a data file's partial_max: its own column from catalog
// version 0.4, the "partial_max:N" of partial_file_info at 0.3 (any other
// partial_file_info records no maximum snapshot).
func (r *row) partialMax() *int64 {
	if _, ok := r.c.idx["partial_max"]; ok || r.err != nil {
		return r.opt("partial_max")
	}
	if _, ok := r.c.idx["partial_file_info"]; !ok {
		return nil
	}
	if n, ok := strings.CutPrefix(r.str("partial_file_info"), "partial_max:"); ok {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil {
			return &v
		}
	}
	return nil
}

// first returns the first of names the table has (catalog version 1.0
// names the inlined metadata columns without the _ducklake_ prefix).
func (c *columns) first(names ...string) string {
	for _, n := range names {
		if _, ok := c.idx[n]; ok {
			return n
		}
	}
	return names[0]
}

// FromStored decodes the tables verify reads from one stored DuckLake
// catalog. Tables the catalog lacks read as empty.
func FromStored(c *commit.StoredCatalog) (*State, error) {
	st := &State{Name: c.Database}
	if c.Schema != "" {
		st.Name = c.Database + "." + c.Schema
	}
	each := func(table string, fn func(r *row)) error {
		def, ok := c.Defs[table]
		if !ok {
			return nil
		}
		cols := newColumns(def)
		for _, raw := range c.Rows[table] {
			vals, err := raw.Decode(cols.types, nil)
			if err != nil {
				return fmt.Errorf("verify: %s: decode %s: %w", st.Name, table, err)
			}
			r := &row{c: cols, vals: vals}
			fn(r)
			if r.err != nil {
				return fmt.Errorf("verify: %s: %w", st.Name, r.err)
			}
		}
		return nil
	}
	steps := []struct {
		table string
		fn    func(r *row)
	}{
		{"ducklake_snapshot", func(r *row) { st.Snapshots = append(st.Snapshots, r.int("snapshot_id")) }},
		{"ducklake_snapshot_changes", func(r *row) {
			st.Changes = append(st.Changes, SnapshotChanges{Snapshot: r.int("snapshot_id"), Changes: r.str("changes_made")})
		}},
		{"ducklake_data_file", func(r *row) {
			st.DataFiles = append(st.DataFiles, DataFile{
				ID: r.int("data_file_id"), TableID: r.int("table_id"),
				Begin: r.int("begin_snapshot"), End: r.opt("end_snapshot"),
				RowIDStart: r.opt("row_id_start"), RecordCount: r.int("record_count"),
				PartialMax: r.partialMax(),
			})
		}},
		{"ducklake_delete_file", func(r *row) {
			st.DeleteFiles = append(st.DeleteFiles, DeleteFile{
				ID: r.int("delete_file_id"), TableID: r.int("table_id"),
				Begin: r.int("begin_snapshot"), End: r.opt("end_snapshot"),
				DataFileID: r.int("data_file_id"), DeleteCount: r.int("delete_count"),
			})
		}},
		{"ducklake_file_column_stats", fileRef(st, "ducklake_file_column_stats")},
		{"ducklake_file_column_statistics", fileRef(st, "ducklake_file_column_statistics")}, // its name before 0.3
		{"ducklake_file_variant_stats", fileRef(st, "ducklake_file_variant_stats")},
		{"ducklake_file_partition_value", fileRef(st, "ducklake_file_partition_value")},
		{"ducklake_files_scheduled_for_deletion", func(r *row) { st.Scheduled = append(st.Scheduled, r.int("data_file_id")) }},
		{"ducklake_table_stats", func(r *row) {
			st.TableStats = append(st.TableStats, TableStats{TableID: r.int("table_id"), NextRowID: r.int("next_row_id")})
		}},
	}
	for _, s := range steps {
		if err := each(s.table, s.fn); err != nil {
			return nil, err
		}
	}
	for _, name := range c.Order {
		if tid, ok := inlinedDataTable(name); ok {
			cols := newColumns(c.Defs[name])
			rid := cols.first("_ducklake_row_id", "row_id")
			beg := cols.first("_ducklake_begin_snapshot", "begin_snapshot")
			end := cols.first("_ducklake_end_snapshot", "end_snapshot")
			err := each(name, func(r *row) {
				st.InlinedRows = append(st.InlinedRows, InlinedRow{Table: name, TableID: tid, RowID: r.int(rid), Begin: r.int(beg), End: r.opt(end)})
			})
			if err != nil {
				return nil, err
			}
		}
		if tid, ok := inlinedDeleteTable(name); ok {
			err := each(name, func(r *row) {
				st.InlinedDeletes = append(st.InlinedDeletes, InlinedDelete{Table: name, TableID: tid, FileID: r.int("file_id"), RowID: r.int("row_id"), Begin: r.int("begin_snapshot")})
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return st, nil
}

func fileRef(st *State, table string) func(r *row) {
	return func(r *row) { st.FileRefs = append(st.FileRefs, FileRef{Table: table, FileID: r.int("data_file_id")}) }
}

// inlinedDataTable parses ducklake_inlined_data_<table_id>_<schema_version>.
func inlinedDataTable(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "ducklake_inlined_data_")
	if !ok || rest == "tables" {
		return 0, false
	}
	tid, ver, ok := strings.Cut(rest, "_")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(tid, 10, 64)
	if err != nil {
		return 0, false
	}
	if _, err := strconv.ParseInt(ver, 10, 64); err != nil {
		return 0, false
	}
	return id, true
}

// inlinedDeleteTable parses ducklake_inlined_delete_<table_id>.
func inlinedDeleteTable(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "ducklake_inlined_delete_")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}
