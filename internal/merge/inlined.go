package merge

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// inlined merges inlined data: the rows the branch inserted into
// ducklake_inlined_data_<t>_<v> (new row ids past the parent's, the merge
// snapshot as their begin), the rows it deleted there (ended at the merge
// snapshot), the deletions it recorded in ducklake_inlined_delete_<t>,
// and the inlined-data tables it created.
func (p *planner) inlined() error {
	if err := p.inlinedTables(); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, sc := range []*catalog.Schema{p.fork, p.dev} {
		for _, t := range sc.Tables() {
			if n := t.Name(); strings.HasPrefix(n, keyspace.InlinedDataPrefix) || strings.HasPrefix(n, keyspace.InlinedDeletePrefix) {
				names[n] = true
			}
		}
	}
	for _, name := range sortedKeys(names) {
		spec, ok := keyspace.Known(name)
		if !ok {
			p.r.unsupported1("%s: not a table DuckLake names", name)
			continue
		}
		d, err := p.decodeDiff(name)
		if err != nil {
			return err
		}
		if d == nil || len(d.added) == 0 && len(d.removed) == 0 {
			continue
		}
		if err := p.ensureTable(name); err != nil {
			return err
		}
		if spec.Kind == keyspace.KindInlinedDelete {
			err = p.inlinedDeletes(name, spec.TableID, d)
		} else {
			err = p.inlinedRows(name, spec, d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// inlinedTables registers on the parent the inlined-data tables the branch
// created.
func (p *planner) inlinedTables() error {
	d, err := p.decodeDiff("ducklake_inlined_data_tables")
	if err != nil || d == nil {
		return err
	}
	for range d.removed {
		p.r.unsupported1("ducklake_inlined_data_tables: a row was removed on the branch")
		return nil
	}
	lt, ok := p.lakeTable("ducklake_inlined_data_tables")
	if !ok {
		return fmt.Errorf("merge: %s has no ducklake_inlined_data_tables", p.schema)
	}
	ti, vi := d.col("table_id"), d.col("schema_version")
	for _, v := range d.added {
		have := false
		lt.Scan(func(_ catalog.CTID, r datum.Row) bool {
			lv, err := r.Decode(lt.Types(), nil)
			have = err == nil && lv[ti].I == v[ti].I && lv[vi].I == v[vi].I
			return !have
		})
		if have {
			continue
		}
		if _, err := p.lake().InsertRow(p.schema, "ducklake_inlined_data_tables", v); err != nil {
			return err
		}
	}
	return nil
}

// ensureTable creates on the parent the branch's table name, if the parent
// lacks it.
func (p *planner) ensureTable(name string) error {
	if _, ok := p.lakeTable(name); ok {
		return nil
	}
	dt, _ := p.dev.Table(name)
	def := *dt.Def()
	def.Schema = p.schema
	def.Columns = append([]keyspace.ColumnDef(nil), def.Columns...)
	def.PrimaryKey = append([]int(nil), def.PrimaryKey...)
	return p.lake().CreateTable(def)
}

// inlinedRows merges the rows of one inlined-data table.
func (p *planner) inlinedRows(name string, spec *keyspace.TableSpec, d *decoded) error {
	tid, begin, end := spec.TableID, spec.Begin, spec.End
	type ident struct{ row, begin int64 }
	removed := map[ident]int{}
	for i, v := range d.removed {
		removed[ident{v[0].I, v[begin].I}] = i
	}
	lt, _ := p.lakeTable(name)
	for _, v := range d.added {
		if i, ok := removed[ident{v[0].I, v[begin].I}]; ok && v[begin].I <= p.c.Snapshot {
			// A row the parent had at the fork, deleted on the branch.
			delete(removed, ident{v[0].I, v[begin].I})
			old := d.removed[i]
			if !endedOnly(old, v, end) {
				p.r.unsupported1("%s: inlined row %d changed on the branch other than by deleting it", name, v[0].I)
				continue
			}
			if err := p.endInlined(name, lt, tid, d.removedRaw[i], old, end, v[end]); err != nil {
				return err
			}
			continue
		}
		nv := append([]datum.Value(nil), v...)
		if shift := p.rowShift[tid]; shift != 0 {
			if v[0].I < p.forkNextRow[tid] {
				p.r.unsupported1("%s: inlined row %d keeps a row id the branch did not allocate (an update's), and the parent allocated row ids since the fork", name, v[0].I)
				continue
			}
			nv[0] = datum.IntValue(v[0].I + shift)
		}
		nv[begin], nv[end] = p.snapValue(v[begin]), p.snapValue(v[end])
		if _, err := p.lake().InsertRow(p.schema, name, nv); err != nil {
			return err
		}
	}
	for id := range removed {
		p.r.unsupported1("%s: inlined row %d of the parent was removed on the branch", name, id.row)
	}
	return nil
}

// endInlined ends on the parent the inlined row old (raw: its encoding),
// which the branch deleted; the parent must hold it unchanged.
func (p *planner) endInlined(name string, lt *catalog.Table, tid int64, raw datum.Row, old []datum.Value, end int, ended datum.Value) error {
	var at catalog.CTID
	found := false
	if lt != nil {
		lt.Scan(func(c catalog.CTID, r datum.Row) bool {
			if bytes.Equal(r, raw) {
				at, found = c, true
			}
			return !found
		})
	}
	if !found {
		p.r.conflict("%s: inlined row %d of table %d: the branch deleted it, and the parent changed or deleted it since the fork", name, old[0].I, tid)
		return nil
	}
	upd := append([]datum.Value(nil), old...)
	upd[end] = p.snapValue(ended)
	_, err := p.lake().UpdateRow(p.schema, name, at, upd)
	return err
}

// inlinedDeletes merges the deletions the branch recorded inline.
func (p *planner) inlinedDeletes(name string, tid int64, d *decoded) error {
	if len(d.removed) > 0 {
		p.r.unsupported1("%s: %d inlined deletions removed on the branch", name, len(d.removed))
		return nil
	}
	fi, bi := d.col("file_id"), d.col("begin_snapshot")
	for _, v := range d.added {
		nv := append([]datum.Value(nil), v...)
		if f := v[fi].I; f < p.c.NextFileID {
			p.deletesFrom(tid, f, "deleted rows of it (inlined)")
		}
		nv[fi] = datum.IntValue(p.fileOf(v[fi].I))
		nv[bi] = p.snapValue(v[bi])
		if _, err := p.lake().InsertRow(p.schema, name, nv); err != nil {
			return err
		}
	}
	return nil
}

// endedOnly reports whether nv is old with its end column (NULL in old)
// set, and nothing else changed.
func endedOnly(old, nv []datum.Value, end int) bool {
	for j := range old {
		if j != end && !datum.Equal(old[j], nv[j]) {
			return false
		}
	}
	return old[end].IsNull() && !nv[end].IsNull()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
