// Package merge publishes a writable branch's work on its parent: each
// commit the branch made since its fork becomes a new snapshot of the
// parent, after the parent's newest, and the branch is consumed in the
// same store batch (catalog.Server.MergeBranch). docs/branches.md states
// the rules.
//
// What the branch changed is read as the difference between its newest
// version and its fork (read back from the store at the branch record's
// seq), table by table. What the parent committed since the fork is read
// from its ducklake_snapshot_changes. A merge is refused, naming every
// reason, when
//
//   - DuckLake's conflict matrix (changes.ClassifyAll) finds the branch's
//     changes in conflict with the parent's, or both sides deleted from,
//     or ended, the same data file (DuckLake's file-level check): 40001;
//   - the branch did something a merge cannot carry over faithfully:
//     schema changes, options, compaction or inlined-data flushes (their
//     files embed row ids or snapshot ids, which the parent may already
//     use), files with embedded row ids where the parent allocated row ids
//     since the fork: 0A000.
//
// Otherwise the branch's rows are written on the parent with ids the
// parent has not used: its snapshots follow the parent's head in their
// order (snapshot s of the branch is the head plus s minus the fork
// snapshot), data and delete file ids move past the parent's
// next_file_id, row ids past what the parent allocated since the fork,
// and paths become absolute under the branch's data path, where the files
// are. Every begin_snapshot and end_snapshot the branch wrote moves with
// its snapshot, so time travel to each merged snapshot reads what the
// branch read there. Table statistics add the branch's deltas to the
// parent's. Files the branch scheduled for deletion go to the parent's
// schedule, as a dropped branch's do.
//
// A merge also refuses a branch or parent that expired snapshots since the
// fork: their change sets are gone, and the conflict matrix would not see
// them.
package merge

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// Result says what a merge published.
type Result struct {
	// From and To are the range of the branch's snapshots merged; First
	// and Last the parent's snapshots they became.
	From, To, First, Last int64
	// Files counts the data and delete files the parent now names.
	Files int
}

// Branch merges the writable branch name into into, its parent.
func Branch(ctx context.Context, srv *catalog.Server, name, into string) (Result, error) {
	var res Result
	err := srv.MergeBranch(ctx, name, into, func(m *catalog.Merge) error {
		var err error
		res, err = plan(m, into, time.Now())
		return err
	})
	return res, err
}

// refusal collects why a merge cannot go ahead.
type refusal struct {
	conflicts   []string
	unsupported []string
}

func (r *refusal) conflict(format string, args ...any) {
	r.conflicts = append(r.conflicts, fmt.Sprintf(format, args...))
}

func (r *refusal) unsupported1(format string, args ...any) {
	r.unsupported = append(r.unsupported, fmt.Sprintf(format, args...))
}

func (r *refusal) err(name, into string) error {
	if len(r.conflicts) == 0 && len(r.unsupported) == 0 {
		return nil
	}
	lines := append(append([]string(nil), r.conflicts...), r.unsupported...)
	e := &catalog.Error{Kind: catalog.ErrNotMergeable, Detail: strings.Join(lines, "\n")}
	switch {
	case len(r.conflicts) > 0:
		e.Code = pgcode.SerializationFailure
		e.Message = fmt.Sprintf("cannot merge %q into %q: %d conflicting changes", name, into, len(r.conflicts))
		if len(r.unsupported) > 0 {
			e.Message += fmt.Sprintf(", and %d changes a merge cannot carry", len(r.unsupported))
		}
	default:
		e.Code = pgcode.FeatureNotSupported
		e.Message = fmt.Sprintf("cannot merge %q into %q: %d changes a merge cannot carry", name, into, len(r.unsupported))
	}
	return e
}

// plan writes the merge of m's branch into m.Txn.
func plan(m *catalog.Merge, into string, now time.Time) (Result, error) {
	var res Result
	r := &refusal{}
	lakes := 0
	for _, c := range m.Branch.Catalogs {
		fs, ok1 := m.Fork.Schema(c.Schema)
		ds, ok2 := m.Head.Schema(c.Schema)
		if !ok1 || !ok2 {
			r.unsupported1("schema %s: dropped on the branch", c.Schema)
			continue
		}
		if _, ok := fs.Table("ducklake_snapshot"); !ok {
			for _, n := range changedTables(fs, ds) {
				r.unsupported1("%s.%s: changed on the branch, and it is no DuckLake table", c.Schema, n)
			}
			continue
		}
		lakes++
		p := &planner{m: m, c: c, r: r, schema: c.Schema, now: now, fork: fs, dev: ds}
		var err error
		if res, err = p.run(); err != nil {
			return res, err
		}
	}
	if err := r.err(m.Name, into); err != nil {
		return res, err
	}
	if lakes != 1 {
		return res, &catalog.Error{Kind: catalog.ErrNotMergeable, Code: pgcode.FeatureNotSupported,
			Message: fmt.Sprintf("cannot merge %q: it holds %d DuckLake catalogs", m.Name, lakes)}
	}
	return res, nil
}

// changedTables names the tables of two versions of a schema that differ.
func changedTables(a, b *catalog.Schema) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range a.Tables() {
		seen[t.Name()] = true
		if u, ok := b.Table(t.Name()); !ok || !sameRows(t, u) {
			out = append(out, t.Name())
		}
	}
	for _, t := range b.Tables() {
		if !seen[t.Name()] {
			out = append(out, t.Name())
		}
	}
	sort.Strings(out)
	return out
}

// sameRows reports whether two tables hold the same definition and rows.
func sameRows(a, b *catalog.Table) bool {
	if a == b {
		return true
	}
	rem, add := diffRows(a, b)
	return len(rem) == 0 && len(add) == 0 && reflect.DeepEqual(a.Def().Columns, b.Def().Columns)
}

// diffRows returns the rows of a that b lacks and the rows of b that a
// lacks, as multisets of encoded rows (ctids differ between a version read
// from the store and one built in memory).
func diffRows(a, b *catalog.Table) (removed, added []datum.Row) {
	if a == b {
		return nil, nil
	}
	count := map[string]int{}
	a.Scan(func(_ catalog.CTID, r datum.Row) bool {
		count[string(r)]++
		return true
	})
	b.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if count[string(r)] > 0 {
			count[string(r)]--
			return true
		}
		added = append(added, r)
		return true
	})
	a.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if count[string(r)] > 0 {
			count[string(r)]--
			removed = append(removed, r)
		}
		return true
	})
	return removed, added
}

// planner merges one DuckLake catalog.
type planner struct {
	m      *catalog.Merge
	c      keyspace.BranchCatalog
	r      *refusal
	schema string
	now    time.Time

	fork, dev *catalog.Schema

	from, to     int64           // the branch's snapshots merged
	offset       int64           // what their ids move by
	devSnaps     [][]datum.Value // the branch's ducklake_snapshot rows merged, in order
	lakeHead     []datum.Value
	mine, theirs changes.Set

	devDataPath string
	devDirs     map[int64]string
	nextFile    int64           // the parent's next_file_id
	rowShift    map[int64]int64 // table id → what the branch's new row ids move by
	forkNextRow map[int64]int64
	touched     map[int64]string // pre-fork data files the parent deleted from since the fork
	released    []releasedFile
	files       int
}

type releasedFile struct {
	id   int64
	path string
}

func (p *planner) lake() *catalog.Txn { return p.m.Txn }

func (p *planner) lakeTable(name string) (*catalog.Table, bool) {
	t, err := p.lake().Table(p.schema, name)
	return t, err == nil
}

func (p *planner) run() (Result, error) {
	if err := p.snapshots(); err != nil {
		return Result{}, err
	}
	if len(p.devSnaps) == 0 {
		return Result{}, nil // nothing since the fork
	}
	p.classify()
	p.devDataPath, _ = p.m.Head.MetadataValue(p.schema, "data_path")
	if !strings.HasSuffix(p.devDataPath, "/") {
		p.devDataPath += "/"
	}
	p.devDirs = p.m.Head.TableDirs(p.schema, p.devDataPath)
	p.rowIDs()
	p.lakeTouched()
	steps := []func() error{p.files_, p.fileChildren, p.inlined, p.stats, p.schedule, p.others}
	for _, step := range steps {
		if err := step(); err != nil {
			return Result{}, err
		}
	}
	if len(p.r.conflicts) > 0 || len(p.r.unsupported) > 0 {
		return Result{}, nil
	}
	if err := p.release(); err != nil {
		return Result{}, err
	}
	if err := p.mint(); err != nil {
		return Result{}, err
	}
	return Result{From: p.from, To: p.to, First: p.snapOf(p.from), Last: p.snapOf(p.to), Files: p.files}, nil
}

// snapshots finds the branch's snapshots since the fork and the parent's
// head.
func (p *planner) snapshots() error {
	st, ok := p.dev.Table("ducklake_snapshot")
	if !ok {
		return fmt.Errorf("merge: branch catalog %s has no ducklake_snapshot", p.schema)
	}
	fork := p.c.Snapshot
	var err error
	st.Scan(func(_ catalog.CTID, r datum.Row) bool {
		var v []datum.Value
		if v, err = r.Decode(st.Types(), nil); err != nil {
			return false
		}
		if !v[0].IsNull() && v[0].I > fork {
			p.devSnaps = append(p.devSnaps, v)
		}
		return true
	})
	if err != nil {
		return err
	}
	sort.Slice(p.devSnaps, func(i, j int) bool { return p.devSnaps[i][0].I < p.devSnaps[j][0].I })
	if len(p.devSnaps) > 0 {
		p.from, p.to = p.devSnaps[0][0].I, p.devSnaps[len(p.devSnaps)-1][0].I
	}
	if gaps := holes(p.devSnaps, fork); gaps != "" {
		p.r.unsupported1("the branch expired its snapshots %s since the fork: their changes are gone, and the conflict check cannot see them", gaps)
	}
	lt, ok := p.lakeTable("ducklake_snapshot")
	if !ok {
		return fmt.Errorf("merge: %s has no ducklake_snapshot", p.schema)
	}
	var lake [][]datum.Value
	lt.Scan(func(_ catalog.CTID, r datum.Row) bool {
		var v []datum.Value
		if v, err = r.Decode(lt.Types(), nil); err != nil {
			return false
		}
		if !v[0].IsNull() && v[0].I >= fork {
			lake = append(lake, v)
		}
		return true
	})
	if err != nil {
		return err
	}
	if len(lake) == 0 {
		return fmt.Errorf("merge: %s no longer holds the fork snapshot %d", p.schema, fork)
	}
	sort.Slice(lake, func(i, j int) bool { return lake[i][0].I < lake[j][0].I })
	if gaps := holes(lake[1:], fork); gaps != "" {
		p.r.unsupported1("the parent expired its snapshots %s since the fork: their changes are gone, and the conflict check cannot see them", gaps)
	}
	p.lakeHead = lake[len(lake)-1]
	p.offset = p.lakeHead[0].I - fork
	if i := lt.Def().ColumnIndex("next_file_id"); i >= 0 && !p.lakeHead[i].IsNull() {
		p.nextFile = p.lakeHead[i].I
	}
	return nil
}

// holes lists the snapshot ids missing from rows (sorted by id), which
// should follow after one by one.
func holes(rows [][]datum.Value, after int64) string {
	var out []string
	next := after + 1
	for _, v := range rows {
		for ; next < v[0].I && len(out) < 5; next++ {
			out = append(out, fmt.Sprint(next))
		}
		next = v[0].I + 1
	}
	return strings.Join(out, ", ")
}

// snapOf is the parent's snapshot id for the branch's snapshot id s: the
// same below the fork, moved past the parent's head after it.
func (p *planner) snapOf(s int64) int64 {
	if s <= p.c.Snapshot {
		return s
	}
	return s + p.offset
}

// snapValue is snapOf over a begin_snapshot or end_snapshot value.
func (p *planner) snapValue(v datum.Value) datum.Value {
	if v.IsNull() {
		return v
	}
	return datum.IntValue(p.snapOf(v.I))
}

// fileOf is the parent's id for the branch's file id.
func (p *planner) fileOf(id int64) int64 {
	if id < p.c.NextFileID {
		return id
	}
	return id - p.c.NextFileID + p.nextFile
}

// changesAfter is the union of the change sets of a catalog's snapshots
// after the fork.
func changesAfter(t *catalog.Table, after int64) (changes.Set, error) {
	var strs []string
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		id, err1 := r.Column(t.Types(), 0)
		s, err2 := r.Column(t.Types(), 1)
		if err1 == nil && err2 == nil && !id.IsNull() && id.I > after && !s.IsNull() {
			strs = append(strs, s.S)
		}
		return true
	})
	return changes.ParseUnion(strs...)
}

// classify applies DuckLake's matrix to the branch's changes against the
// parent's since the fork, and refuses what a merge cannot carry.
func (p *planner) classify() {
	dt, _ := p.dev.Table("ducklake_snapshot_changes")
	lt, ok := p.lakeTable("ducklake_snapshot_changes")
	if dt == nil || !ok {
		p.r.unsupported1("%s: no ducklake_snapshot_changes to classify the changes by", p.schema)
		return
	}
	var err error
	if p.mine, err = changesAfter(dt, p.c.Snapshot); err != nil {
		p.r.unsupported1("the branch's changes_made do not parse: %v", err)
		return
	}
	if p.theirs, err = changesAfter(lt, p.c.Snapshot); err != nil {
		p.r.unsupported1("the parent's changes_made do not parse: %v", err)
		return
	}
	seen := map[string]bool{}
	for _, e := range p.mine {
		switch e.Kind {
		case changes.InsertedIntoTable, changes.DeletedFromTable, changes.InlinedInsert, changes.InlinedDelete:
			continue
		}
		if s := e.String(); !seen[s] {
			seen[s] = true
			p.r.unsupported1("the branch's %s: %s", s, whyNot(e.Kind))
		}
	}
	for _, c := range changes.ClassifyAll(p.mine, p.theirs, nil) {
		p.r.conflict("the branch's %s conflicts: %s", c.Mine, c.Against("the parent"))
	}
}

// whyNot says why a merge does not carry a change kind.
func whyNot(k changes.Kind) string {
	switch k {
	case changes.MergeAdjacent, changes.RewriteDelete, changes.CompactedTable:
		return "compacted files embed the row ids of the rows they carry, which a merge cannot renumber; merge before compacting, or compact the parent after the merge"
	case changes.InlineFlush:
		return "flushed files embed row ids and snapshot ids, which a merge cannot renumber; merge before flushing inlined data"
	}
	return "a merge carries data changes only (inserts and deletes), not schema changes"
}

// rowIDs finds, per table, how far the branch's new row ids move: past
// the ids the parent allocated since the fork.
func (p *planner) rowIDs() {
	p.rowShift, p.forkNextRow = map[int64]int64{}, map[int64]int64{}
	next := func(t *catalog.Table) map[int64]int64 {
		out := map[int64]int64{}
		ti, ni := t.Def().ColumnIndex("table_id"), t.Def().ColumnIndex("next_row_id")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			v, err := r.Decode(t.Types(), nil)
			if err == nil && !v[ti].IsNull() && !v[ni].IsNull() {
				out[v[ti].I] = v[ni].I
			}
			return true
		})
		return out
	}
	ft, ok1 := p.fork.Table("ducklake_table_stats")
	lt, ok2 := p.lakeTable("ducklake_table_stats")
	if !ok1 || !ok2 {
		return
	}
	p.forkNextRow = next(ft)
	for tid, n := range next(lt) {
		if d := n - p.forkNextRow[tid]; d != 0 {
			p.rowShift[tid] = d
		}
	}
}

// lakeTouched finds the pre-fork data files the parent deleted from or
// ended since the fork: DuckLake's file-level conflict check.
func (p *planner) lakeTouched() {
	p.touched = map[int64]string{}
	fork := p.c.Snapshot
	if t, ok := p.lakeTable("ducklake_delete_file"); ok {
		d := t.Def()
		fi, bi := d.ColumnIndex("data_file_id"), d.ColumnIndex("begin_snapshot")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			if v, err := r.Decode(t.Types(), nil); err == nil && v[bi].I > fork && v[fi].I < p.c.NextFileID {
				p.touched[v[fi].I] = fmt.Sprintf("deleted rows of it in snapshot %d", v[bi].I)
			}
			return true
		})
	}
	if t, ok := p.lakeTable("ducklake_data_file"); ok {
		d := t.Def()
		ii, ei := d.ColumnIndex("data_file_id"), d.ColumnIndex("end_snapshot")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			if v, err := r.Decode(t.Types(), nil); err == nil && v[ii].I < p.c.NextFileID && !v[ei].IsNull() && v[ei].I > fork {
				p.touched[v[ii].I] = fmt.Sprintf("ended it in snapshot %d", v[ei].I)
			}
			return true
		})
	}
	sc, _ := p.lake().View().Schema(p.schema)
	for _, t := range sc.Tables() {
		if !strings.HasPrefix(t.Name(), keyspace.InlinedDeletePrefix) {
			continue
		}
		d := t.Def()
		fi, bi := d.ColumnIndex("file_id"), d.ColumnIndex("begin_snapshot")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			if v, err := r.Decode(t.Types(), nil); err == nil && v[bi].I > fork && v[fi].I < p.c.NextFileID {
				p.touched[v[fi].I] = fmt.Sprintf("deleted rows of it in snapshot %d", v[bi].I)
			}
			return true
		})
	}
}

// deletesFrom records that the branch deleted from (or ended) the
// pre-fork data file id of table tid, which the parent must not have
// touched since the fork.
func (p *planner) deletesFrom(tid, id int64, what string) {
	if id >= p.c.NextFileID {
		return
	}
	if why, ok := p.touched[id]; ok {
		p.r.conflict("data file %d of table %d: the branch %s, and the parent %s", id, tid, what, why)
	}
}

// decoded is a table's changed rows, decoded.
type decoded struct {
	t                 *catalog.Table
	removed, added    [][]datum.Value
	removedRaw        []datum.Row
	col               func(string) int
	begin, end, ident int
}

func (p *planner) decodeDiff(name string) (*decoded, error) {
	ft, ok1 := p.fork.Table(name)
	dt, ok2 := p.dev.Table(name)
	if !ok2 {
		if ok1 {
			p.r.unsupported1("%s: dropped on the branch", name)
		}
		return nil, nil
	}
	if !ok1 {
		ft = nil
	}
	d := &decoded{t: dt}
	d.col = dt.Def().ColumnIndex
	d.begin, d.end = d.col("begin_snapshot"), d.col("end_snapshot")
	var rem, add []datum.Row
	if ft == nil {
		dt.Scan(func(_ catalog.CTID, r datum.Row) bool { add = append(add, r); return true })
	} else {
		if !reflect.DeepEqual(ft.Def().Columns, dt.Def().Columns) {
			p.r.unsupported1("%s: its columns changed on the branch", name)
			return nil, nil
		}
		rem, add = diffRows(ft, dt)
	}
	for _, r := range rem {
		v, err := r.Decode(dt.Types(), nil)
		if err != nil {
			return nil, fmt.Errorf("merge: %s: %w", name, err)
		}
		d.removed = append(d.removed, v)
		d.removedRaw = append(d.removedRaw, r)
	}
	for _, r := range add {
		v, err := r.Decode(dt.Types(), nil)
		if err != nil {
			return nil, fmt.Errorf("merge: %s: %w", name, err)
		}
		d.added = append(d.added, v)
	}
	return d, nil
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

// files_ merges data and delete files: the branch's new files are
// registered on the parent under new ids, the pre-fork files it ended are
// ended there.
func (p *planner) files_() error {
	type change struct {
		table string
		d     *decoded
	}
	var all []change
	for _, name := range []string{"ducklake_data_file", "ducklake_delete_file"} {
		d, err := p.decodeDiff(name)
		if err != nil {
			return err
		}
		if d != nil {
			all = append(all, change{name, d})
		}
	}
	for _, ch := range all {
		for _, v := range ch.d.added {
			if v[0].I >= p.c.NextFileID {
				p.files++
			}
		}
	}
	for _, ch := range all {
		d, table := ch.d, ch.table
		ti := d.col("table_id")
		removed := map[int64]int{}
		for i, v := range d.removed {
			removed[v[0].I] = i
		}
		for _, v := range d.added {
			id, tid := v[0].I, v[ti].I
			if id < p.c.NextFileID {
				i, ok := removed[id]
				if !ok {
					return fmt.Errorf("merge: %s: the branch holds file %d twice", table, id)
				}
				delete(removed, id)
				if err := p.endInherited(table, d, d.removed[i], d.removedRaw[i], v); err != nil {
					return err
				}
				continue
			}
			if err := p.registerFile(table, d, v); err != nil {
				return err
			}
			if table == "ducklake_delete_file" {
				if fi := d.col("data_file_id"); fi >= 0 {
					p.deletesFrom(tid, v[fi].I, fmt.Sprintf("deleted rows of it (delete file %d)", id))
				}
			}
		}
		for id := range removed {
			p.r.unsupported1("%s: file %d of the parent was removed on the branch", table, id)
		}
	}
	return nil
}

// endInherited ends on the parent a pre-fork file the branch ended (old:
// its row at the fork, nv: the branch's).
func (p *planner) endInherited(table string, d *decoded, old []datum.Value, oldRaw datum.Row, nv []datum.Value) error {
	id, tid := old[0].I, old[d.col("table_id")].I
	if !endedOnly(old, nv, d.end) {
		p.r.unsupported1("%s: file %d changed on the branch other than by ending it", table, id)
		return nil
	}
	if table == "ducklake_data_file" {
		p.deletesFrom(tid, id, "ended it")
	} else if fi := d.col("data_file_id"); fi >= 0 {
		p.deletesFrom(tid, old[fi].I, fmt.Sprintf("replaced its delete file %d", id))
	}
	lt, ok := p.lakeTable(table)
	if !ok {
		return fmt.Errorf("merge: %s is gone from the parent", table)
	}
	ctid, cur, ok := lt.LookupKey([]datum.Value{datum.IntValue(id)})
	if !ok {
		p.r.conflict("%s: file %d of table %d: the branch ended it, and the parent removed it", table, id, tid)
		return nil
	}
	if !bytes.Equal(cur, oldRaw) {
		p.r.conflict("%s: file %d of table %d: the branch ended it, and the parent changed it since the fork", table, id, tid)
		return nil
	}
	upd := append([]datum.Value(nil), old...)
	upd[d.end] = p.snapValue(nv[d.end])
	_, err := p.lake().UpdateRow(p.schema, table, ctid, upd)
	return err
}

// registerFile writes a new file of the branch on the parent.
func (p *planner) registerFile(table string, d *decoded, v []datum.Value) error {
	id, tid := v[0].I, v[d.col("table_id")].I
	nv := append([]datum.Value(nil), v...)
	nv[0] = datum.IntValue(p.fileOf(id))
	nv[d.begin], nv[d.end] = p.snapValue(v[d.begin]), p.snapValue(v[d.end])
	if i := d.col("partial_max"); i >= 0 && !v[i].IsNull() {
		p.r.unsupported1("%s: file %d of table %d embeds snapshot ids (partial_max), which a merge cannot renumber", table, id, tid)
		return nil
	}
	if table == "ducklake_data_file" {
		if i := d.col("row_id_start"); i >= 0 && !v[i].IsNull() {
			if shift := p.rowShift[tid]; shift != 0 {
				if v[i].I < p.forkNextRow[tid] {
					p.r.unsupported1("%s: file %d of table %d carries row ids the branch did not allocate (an update's), and the parent allocated row ids since the fork", table, id, tid)
					return nil
				}
				nv[i] = datum.IntValue(v[i].I + shift)
			}
		}
	} else if fi := d.col("data_file_id"); fi >= 0 {
		nv[fi] = datum.IntValue(p.fileOf(v[fi].I))
	}
	path, ok := p.absolute(v, d.col, table)
	if !ok {
		return nil
	}
	nv[d.col("path")] = datum.TextValue(path)
	if ri := d.col("path_is_relative"); ri >= 0 {
		nv[ri] = datum.BoolValue(false)
	}
	_, err := p.lake().InsertRow(p.schema, table, nv)
	return err
}

// fileChildren merges the per-file tables of the branch's new files.
func (p *planner) fileChildren() error {
	for _, name := range []string{"ducklake_file_column_stats", "ducklake_file_variant_stats", "ducklake_file_partition_value"} {
		d, err := p.decodeDiff(name)
		if err != nil || d == nil {
			if err == nil {
				continue
			}
			return err
		}
		fi := d.col("data_file_id")
		for _, v := range d.removed {
			if v[fi].I < p.c.NextFileID {
				p.r.unsupported1("%s: a row of the parent's data file %d changed on the branch", name, v[fi].I)
			}
		}
		for _, v := range d.added {
			if v[fi].I < p.c.NextFileID {
				p.r.unsupported1("%s: a row of the parent's data file %d changed on the branch", name, v[fi].I)
				continue
			}
			nv := append([]datum.Value(nil), v...)
			nv[fi] = datum.IntValue(p.fileOf(v[fi].I))
			if _, err := p.lake().InsertRow(p.schema, name, nv); err != nil {
				return err
			}
		}
	}
	return nil
}

// release hands the files the branch wrote and gave up to the parent's
// deletion schedule.
func (p *planner) release() error {
	if len(p.released) == 0 {
		return nil
	}
	if _, ok := p.lakeTable("ducklake_files_scheduled_for_deletion"); !ok {
		return nil
	}
	now := pgTime(p.now)
	seen := map[string]bool{}
	for _, f := range p.released {
		if seen[f.path] {
			continue
		}
		seen[f.path] = true
		vals := []datum.Value{datum.IntValue(catalog.ReleasedID(p.c.OwnID, f.id)), datum.TextValue(f.path), datum.BoolValue(false), now}
		if _, err := p.lake().InsertRow(p.schema, "ducklake_files_scheduled_for_deletion", vals); err != nil {
			return err
		}
	}
	return nil
}

// schedule releases what the branch scheduled for deletion itself: files
// it wrote (it may not schedule the parent's).
func (p *planner) schedule() error {
	d, err := p.decodeDiff("ducklake_files_scheduled_for_deletion")
	if err != nil || d == nil {
		return err
	}
	// Rows removed: the parent's schedule, dropped from the branch at the
	// fork, and what the branch's cleanup deleted.
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
	return nil
}

// others refuses a change to any table the steps above do not merge.
func (p *planner) others() error {
	handled := map[string]bool{
		"ducklake_snapshot": true, "ducklake_snapshot_changes": true,
		"ducklake_data_file": true, "ducklake_delete_file": true,
		"ducklake_file_column_stats": true, "ducklake_file_variant_stats": true, "ducklake_file_partition_value": true,
		"ducklake_table_stats": true, "ducklake_table_column_stats": true,
		"ducklake_files_scheduled_for_deletion": true, "ducklake_inlined_data_tables": true,
	}
	for _, name := range changedTables(p.fork, p.dev) {
		if handled[name] || strings.HasPrefix(name, keyspace.InlinedDataPrefix) || strings.HasPrefix(name, keyspace.InlinedDeletePrefix) {
			continue
		}
		if name == "ducklake_metadata" {
			p.metadata()
			continue
		}
		p.r.unsupported1("%s: changed on the branch (a merge carries data changes only, not schema changes)", name)
	}
	return nil
}

// metadata refuses an option the branch changed; its data_path is its own.
func (p *planner) metadata() {
	d, err := p.decodeDiff("ducklake_metadata")
	if err != nil || d == nil {
		return
	}
	ki := d.col("key")
	seen := map[string]bool{}
	for _, v := range append(d.removed, d.added...) {
		if k := v[ki].S; k != "data_path" && !seen[k] {
			seen[k] = true
			p.r.unsupported1("ducklake_metadata: option %q changed on the branch", k)
		}
	}
}

// mint writes the branch's snapshots and their change sets on the
// parent. Their times are the merge's (one microsecond apart, in order):
// DuckLake's time travel by timestamp and expiry by age read snapshot
// times as the order of the parent's history. Their schema version and
// next catalog id are the parent's (a merge carries no schema change).
func (p *planner) mint() error {
	st, _ := p.lakeTable("ducklake_snapshot")
	def := st.Def()
	ti, fi := def.ColumnIndex("snapshot_time"), def.ColumnIndex("next_file_id")
	for i, dv := range p.devSnaps {
		vals := append([]datum.Value(nil), p.lakeHead...)
		vals[0] = datum.IntValue(p.snapOf(dv[0].I))
		if ti >= 0 {
			vals[ti] = pgTime(p.now.Add(time.Duration(i) * time.Microsecond))
		}
		if fi >= 0 && !dv[fi].IsNull() {
			vals[fi] = datum.IntValue(p.fileOf(dv[fi].I))
		}
		if _, err := p.lake().InsertRow(p.schema, "ducklake_snapshot", vals); err != nil {
			return err
		}
	}
	dt, _ := p.dev.Table("ducklake_snapshot_changes")
	if dt == nil {
		return nil
	}
	var rows [][]datum.Value
	var err error
	dt.Scan(func(_ catalog.CTID, r datum.Row) bool {
		var v []datum.Value
		if v, err = r.Decode(dt.Types(), nil); err != nil {
			return false
		}
		if v[0].I > p.c.Snapshot {
			rows = append(rows, v)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, v := range rows {
		v[0] = datum.IntValue(p.snapOf(v[0].I))
		if _, err := p.lake().InsertRow(p.schema, "ducklake_snapshot_changes", v); err != nil {
			return err
		}
	}
	return nil
}

// pgTime is t as a timestamptz datum.
func pgTime(t time.Time) datum.Value {
	return datum.TimestampTZValue(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())
}
