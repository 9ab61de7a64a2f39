package merge

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// role is what a column holds that moves when a branch's row lands on its
// parent.
type role uint8

const (
	catalogID     role = iota + 1 // a schema, table, view, macro, partition or sort id (next_catalog_id)
	fileID                        // a data or delete file id (next_file_id)
	snapshotID                    // a snapshot id
	schemaVersion                 // a schema version
)

// roles lists, per DuckLake table, the columns that move. Column ids are
// per table (field ids) and stay; row ids move per table (rowShift).
var roles = map[string]map[string]role{
	"ducklake_schema":               {"schema_id": catalogID},
	"ducklake_table":                {"table_id": catalogID, "schema_id": catalogID},
	"ducklake_view":                 {"view_id": catalogID, "schema_id": catalogID},
	"ducklake_tag":                  {"object_id": catalogID},
	"ducklake_column_tag":           {"table_id": catalogID},
	"ducklake_view_column_tag":      {"view_id": catalogID},
	"ducklake_column":               {"table_id": catalogID},
	"ducklake_data_file":            {"data_file_id": fileID, "table_id": catalogID, "partition_id": catalogID},
	"ducklake_delete_file":          {"delete_file_id": fileID, "table_id": catalogID, "data_file_id": fileID},
	"ducklake_file_column_stats":    {"data_file_id": fileID, "table_id": catalogID},
	"ducklake_file_variant_stats":   {"data_file_id": fileID, "table_id": catalogID},
	"ducklake_file_partition_value": {"data_file_id": fileID, "table_id": catalogID},
	"ducklake_partition_info":       {"partition_id": catalogID, "table_id": catalogID},
	"ducklake_partition_column":     {"partition_id": catalogID, "table_id": catalogID},
	"ducklake_sort_info":            {"sort_id": catalogID, "table_id": catalogID},
	"ducklake_sort_expression":      {"sort_id": catalogID, "table_id": catalogID},
	"ducklake_schema_versions":      {"begin_snapshot": snapshotID, "schema_version": schemaVersion, "table_id": catalogID},
	"ducklake_inlined_data_tables":  {"table_id": catalogID, "schema_version": schemaVersion},
	"ducklake_macro":                {"schema_id": catalogID, "macro_id": catalogID},
	"ducklake_macro_impl":           {"macro_id": catalogID},
	"ducklake_macro_parameters":     {"macro_id": catalogID},
}

// notRows are the tables rows does not merge: the snapshots (mint), the
// statistics (stats), and what it refuses or hands on as a whole.
var notRows = map[string]bool{
	"ducklake_snapshot": true, "ducklake_snapshot_changes": true,
	"ducklake_table_stats": true, "ducklake_table_column_stats": true,
}

// rows merges every other table the branch changed: its new rows are
// written on the parent with their ids moved (roles, snapOf, row ids),
// the rows it ended are ended there (the parent must hold them as the
// fork did), and anything else it changed is refused.
func (p *planner) rows() error {
	names := map[string]bool{}
	for _, sc := range []*catalog.Schema{p.fork, p.dev} {
		for _, t := range sc.Tables() {
			names[t.Name()] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	// Tables before the rows that name them: DuckLake's fixed tables
	// first, then the inlined-data tables the branch created.
	sort.Slice(sorted, func(i, j int) bool {
		di, dj := isDynamic(sorted[i]), isDynamic(sorted[j])
		if di != dj {
			return !di
		}
		return sorted[i] < sorted[j]
	})
	for _, name := range sorted {
		if notRows[name] {
			continue
		}
		d, err := p.decodeDiff(name)
		if err != nil {
			return err
		}
		if d == nil || len(d.added) == 0 && len(d.removed) == 0 {
			continue
		}
		switch name {
		case "ducklake_metadata":
			p.metadata(d)
		case "ducklake_files_scheduled_for_deletion":
			p.schedule(d)
		case "ducklake_column_mapping", "ducklake_name_mapping":
			p.r.unsupported1("%s: changed on the branch (ducklake_add_files registers files a merge does not carry)", name)
		default:
			if err := p.table(name, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func isDynamic(name string) bool {
	return strings.HasPrefix(name, keyspace.InlinedDataPrefix) || strings.HasPrefix(name, keyspace.InlinedDeletePrefix)
}

// lakeName is the parent's name for the branch's table name: an inlined
// table's name carries its table id and schema version.
func (p *planner) lakeName(name string) string {
	spec, ok := keyspace.Known(name)
	if !ok || !spec.Dynamic {
		return name
	}
	if spec.Kind == keyspace.KindInlinedDelete {
		return keyspace.InlinedDeleteTableName(p.catalogOf(spec.TableID))
	}
	return keyspace.InlinedDataTableName(p.catalogOf(spec.TableID), p.versionOf(spec.SchemaVersion))
}

// table merges one table's changed rows.
func (p *planner) table(name string, d *decoded) error {
	lname := p.lakeName(name)
	if _, ok := p.fork.Table(name); !ok {
		if !isDynamic(name) {
			p.r.unsupported1("%s: a DuckLake table the fork did not have", name)
			return nil
		}
		if err := p.ensureTable(name, lname); err != nil {
			return err
		}
	}
	spec, _ := keyspace.Known(name)
	// A row the branch ended is a row of the fork removed and the same row
	// with end_snapshot set added.
	ended := map[string]int{}
	if d.end >= 0 {
		for i, v := range d.removed {
			if v[d.end].IsNull() {
				ended[identity(v, d.end)] = i
			}
		}
	}
	consumed := map[int]bool{}
	var lake *lakeRows
	for _, v := range d.added {
		if d.end >= 0 && !v[d.end].IsNull() {
			if i, ok := ended[identity(v, d.end)]; ok && !consumed[i] {
				consumed[i] = true
				if lake == nil {
					if lake = p.lakeRowsOf(lname); lake == nil {
						return fmt.Errorf("merge: %s is gone from the parent", lname)
					}
				}
				if err := p.end(name, lname, d, lake, d.removedRaw[i], d.removed[i], v[d.end]); err != nil {
					return err
				}
				continue
			}
		}
		if err := p.insert(name, lname, spec, d, v); err != nil {
			return err
		}
	}
	if gone := len(d.removed) - len(consumed); gone > 0 {
		p.r.unsupported1("%s: %d rows the parent had at the fork were removed or rewritten on the branch", name, gone)
	}
	return nil
}

// identity is a row's values but its end_snapshot (column end; -1 for
// all), as a key.
func identity(v []datum.Value, end int) string {
	var b strings.Builder
	for i, x := range v {
		if i != end {
			fmt.Fprintf(&b, "%#v", x)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// ensureTable creates on the parent, as lname, the branch's table name
// (an inlined-data or inlined-delete table it created), unless the parent
// has it.
func (p *planner) ensureTable(name, lname string) error {
	if _, ok := p.lakeTable(lname); ok {
		return nil
	}
	dt, _ := p.dev.Table(name)
	def := *dt.Def()
	def.Schema, def.Name = p.schema, lname
	def.Columns = append([]keyspace.ColumnDef(nil), def.Columns...)
	def.PrimaryKey = append([]int(nil), def.PrimaryKey...)
	return p.lake().CreateTable(def)
}

// insert writes the branch's new row v of table name on the parent.
func (p *planner) insert(name, lname string, spec *keyspace.TableSpec, d *decoded, v []datum.Value) error {
	nv := append([]datum.Value(nil), v...)
	for col, r := range roles[name] {
		i := d.col(col)
		if i < 0 || nv[i].IsNull() {
			continue
		}
		switch r {
		case catalogID:
			nv[i] = datum.IntValue(p.catalogOf(nv[i].I))
		case fileID:
			nv[i] = datum.IntValue(p.fileOf(nv[i].I))
		case snapshotID:
			nv[i] = datum.IntValue(p.snapOf(nv[i].I))
		case schemaVersion:
			nv[i] = datum.IntValue(p.versionOf(nv[i].I))
		}
	}
	if d.begin >= 0 {
		nv[d.begin] = p.snapValue(v[d.begin])
	}
	if d.end >= 0 {
		nv[d.end] = p.snapValue(v[d.end])
	}
	switch {
	case name == "ducklake_data_file" || name == "ducklake_delete_file":
		if !p.file(name, d, v, nv) {
			return nil
		}
	case name == "ducklake_inlined_data_tables":
		// Its table_name names the table under its moved ids.
		if i := d.col("table_name"); i >= 0 && !nv[i].IsNull() {
			nv[i] = datum.TextValue(p.lakeName(v[i].S))
			if p.holds(lname, nv) {
				return nil // the parent created the same table too
			}
		}
	case spec != nil && spec.Kind == keyspace.KindInlinedRow:
		tid := p.catalogOf(spec.TableID)
		if shift := p.rowShift[tid]; shift != 0 && !v[0].IsNull() {
			if v[0].I < p.forkNextRow[tid] {
				p.r.unsupported1("%s: inlined row %d keeps a row id the branch did not allocate (an update's), and the parent allocated row ids since the fork", name, v[0].I)
				return nil
			}
			nv[0] = datum.IntValue(v[0].I + shift)
		}
	case spec != nil && spec.Kind == keyspace.KindInlinedDelete:
		if fi := d.col("file_id"); fi >= 0 && !v[fi].IsNull() {
			p.deletesFrom(spec.TableID, v[fi].I, "deleted rows of it (inlined)")
			nv[fi] = datum.IntValue(p.fileOf(v[fi].I))
		}
		if bi := d.col("begin_snapshot"); bi >= 0 {
			nv[bi] = p.snapValue(v[bi])
		}
	}
	_, err := p.lake().InsertRow(p.schema, lname, nv)
	return err
}

// holds reports whether the parent's table lname has a row equal to vals.
func (p *planner) holds(lname string, vals []datum.Value) bool {
	t, ok := p.lakeTable(lname)
	if !ok {
		return false
	}
	found := false
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		lv, err := r.Decode(t.Types(), nil)
		if err != nil {
			return true
		}
		found = identity(lv, -1) == identity(vals, -1)
		return !found
	})
	return found
}

// file finishes a new data or delete file row nv (the branch's v): its
// path made absolute, its row ids moved, what it cannot carry refused.
// It reports whether nv is to be written.
func (p *planner) file(name string, d *decoded, v, nv []datum.Value) bool {
	id, tid := v[0].I, v[d.col("table_id")].I
	if i := d.col("partial_max"); i >= 0 && !v[i].IsNull() {
		p.r.unsupported1("%s: file %d of table %d embeds snapshot ids (partial_max), which a merge cannot renumber", name, id, tid)
		return false
	}
	if name == "ducklake_data_file" {
		if i := d.col("row_id_start"); i >= 0 && !v[i].IsNull() {
			ltid := p.catalogOf(tid)
			if shift := p.rowShift[ltid]; shift != 0 {
				if v[i].I < p.forkNextRow[ltid] {
					p.r.unsupported1("%s: file %d of table %d carries row ids the branch did not allocate (an update's), and the parent allocated row ids since the fork", name, id, tid)
					return false
				}
				nv[i] = datum.IntValue(v[i].I + shift)
			}
		}
	} else if fi := d.col("data_file_id"); fi >= 0 && !v[fi].IsNull() {
		p.deletesFrom(tid, v[fi].I, fmt.Sprintf("deleted rows of it (delete file %d)", id))
	}
	path, ok := p.absolute(v, d.col, name)
	if !ok {
		return false
	}
	nv[d.col("path")] = datum.TextValue(path)
	if ri := d.col("path_is_relative"); ri >= 0 {
		nv[ri] = datum.BoolValue(false)
	}
	p.files++
	return true
}

// absolute is a branch file's path, absolute.
func (p *planner) absolute(v []datum.Value, col func(string) int, table string) (string, bool) {
	pi, ri, ti := col("path"), col("path_is_relative"), col("table_id")
	if pi < 0 || v[pi].IsNull() {
		return "", false
	}
	path := v[pi].S
	if ri >= 0 && !v[ri].IsNull() && v[ri].I != 0 {
		if ti < 0 {
			return p.devDataPath + path, true
		}
		dir, ok := p.devDirs[v[ti].I]
		if !ok {
			p.r.unsupported1("%s: a file of table %d, whose directory the branch no longer names", table, v[ti].I)
			return "", false
		}
		path = catalog.JoinPath(dir, path, true)
	}
	return path, true
}

// lakeRows finds the parent's rows of a table: by primary key where the
// table has one (data and delete files), else by encoding, indexing the
// table once.
type lakeRows struct {
	t  *catalog.Table
	at map[string]catalog.CTID // nil until needed
}

func (p *planner) lakeRowsOf(lname string) *lakeRows {
	t, ok := p.lakeTable(lname)
	if !ok {
		return nil
	}
	return &lakeRows{t: t}
}

// find returns the ctid of the parent's row equal to raw (vals decoded).
func (l *lakeRows) find(raw datum.Row, vals []datum.Value) (catalog.CTID, bool) {
	if l.t.HasPrimaryKey() {
		key := make([]datum.Value, 0, len(l.t.PrimaryKey()))
		for _, i := range l.t.PrimaryKey() {
			key = append(key, vals[i])
		}
		c, r, ok := l.t.LookupKey(key)
		return c, ok && bytes.Equal(r, raw)
	}
	if l.at == nil {
		l.at = map[string]catalog.CTID{}
		l.t.Scan(func(c catalog.CTID, r datum.Row) bool {
			l.at[string(r)] = c
			return true
		})
	}
	c, ok := l.at[string(raw)]
	return c, ok
}

// end ends on the parent the row old (raw: its encoding at the fork),
// which the branch ended at snapshot ended; the parent must hold it as the
// fork did.
func (p *planner) end(name, lname string, d *decoded, lake *lakeRows, raw datum.Row, old []datum.Value, ended datum.Value) error {
	what := describe(name, d, old)
	switch name {
	case "ducklake_data_file":
		p.deletesFrom(old[d.col("table_id")].I, old[0].I, "ended it")
	case "ducklake_delete_file":
		p.deletesFrom(old[d.col("table_id")].I, old[d.col("data_file_id")].I, fmt.Sprintf("replaced its delete file %d", old[0].I))
	case "ducklake_table":
		p.droppedTable(old[d.col("table_id")].I)
	}
	at, ok := lake.find(raw, old)
	if !ok {
		p.r.conflict("%s: the branch ended %s, and the parent changed or removed it since the fork", name, what)
		return nil
	}
	upd := append([]datum.Value(nil), old...)
	upd[d.end] = p.snapValue(ended)
	_, err := p.lake().UpdateRow(p.schema, lname, at, upd)
	return err
}

// droppedTable refuses the drop of a table the parent changed since the
// fork: the parent's new rows of it would outlive it.
func (p *planner) droppedTable(id int64) {
	for _, e := range p.theirs {
		if e.Kind.HasID() && e.ID == id && e.Kind != changes.DroppedTable { // that one the matrix names
			p.r.conflict("table %d: the branch dropped it, and the parent's %s since the fork would outlive it", id, e)
			return
		}
	}
}

// describe names a row in a refusal: its first column's value.
func describe(name string, d *decoded, v []datum.Value) string {
	cols := d.t.Def().Columns
	return fmt.Sprintf("%s %s", cols[0].Name, datum.FormatText(datum.Text, v[0]))
}

// schedule takes what the branch scheduled for deletion: files it wrote
// (it may not schedule the parent's), which the parent's cleanup will
// delete. Rows removed are the parent's schedule, dropped from the branch
// at the fork, and what the branch's cleanup deleted.
func (p *planner) schedule(d *decoded) {
	for _, v := range d.added {
		id := v[0].I
		if id < p.c.NextFileID {
			p.r.unsupported1("ducklake_files_scheduled_for_deletion: the branch scheduled the parent's file %d", id)
			continue
		}
		if path, ok := p.absolute(v, d.col, "ducklake_files_scheduled_for_deletion"); ok {
			p.released = append(p.released, releasedFile{id, path})
		}
	}
}

// release hands the files the branch scheduled to the parent's deletion
// schedule, as a dropped branch's are (once nothing refused the merge).
func (p *planner) release() error {
	if len(p.released) == 0 {
		return nil
	}
	if _, ok := p.lakeTable("ducklake_files_scheduled_for_deletion"); !ok {
		return nil
	}
	now := pgTime(p.now)
	for _, f := range p.released {
		vals := []datum.Value{datum.IntValue(catalog.ReleasedID(p.c.OwnID, f.id)), datum.TextValue(f.path), datum.BoolValue(false), now}
		if _, err := p.lake().InsertRow(p.schema, "ducklake_files_scheduled_for_deletion", vals); err != nil {
			return err
		}
	}
	return nil
}

// metadata refuses an option the branch changed; its data_path is its own.
func (p *planner) metadata(d *decoded) {
	ki := d.col("key")
	seen := map[string]bool{}
	for _, v := range append(d.removed, d.added...) {
		if k := v[ki].S; k != "data_path" && !seen[k] {
			seen[k] = true
			p.r.unsupported1("ducklake_metadata: option %q changed on the branch", k)
		}
	}
}
