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
//     changes in conflict with the parent's; both sides deleted from, or
//     ended, the same data file (DuckLake's file-level check); the branch
//     ended a row the parent changed since the fork; or it dropped a table
//     the parent changed since: 40001;
//   - the branch did something a merge cannot carry over faithfully:
//     options, files registered by ducklake_add_files, compaction or
//     inlined-data flushes (their files embed row ids or snapshot ids,
//     which the parent may already use), files with embedded row ids where
//     the parent allocated row ids since the fork: 0A000.
//
// Otherwise the branch's rows are written on the parent with ids the
// parent has not used: its snapshots follow the parent's head in their
// order (snapshot s of the branch is the head plus s minus the fork
// snapshot); catalog ids (its new schemas, tables, views, macros,
// partitionings, sorts) move past the parent's next_catalog_id and schema
// versions past the parent's, in rows, inlined-table names and change
// sets; data and delete file ids move past the parent's next_file_id, row
// ids past what the parent allocated since the fork; and paths become
// absolute under the branch's data path, where the files are. Every begin_snapshot and end_snapshot the branch wrote moves with
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
			for _, n := range changedTables(fs, ds, m.Shared) {
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

// changedTables names the tables of two versions of a schema that differ
// (shared: diffRows).
func changedTables(a, b *catalog.Schema, shared bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range a.Tables() {
		seen[t.Name()] = true
		if u, ok := b.Table(t.Name()); !ok || !sameRows(t, u, shared) {
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
func sameRows(a, b *catalog.Table, shared bool) bool {
	if a == b {
		return true
	}
	rem, add := diffRows(a, b, shared)
	return len(rem) == 0 && len(add) == 0 && reflect.DeepEqual(a.Def().Columns, b.Def().Columns)
}

// diffRows returns the rows of a that b lacks and the rows of b that a
// lacks. When b descends from a in memory (shared), they share the B-tree
// leaves b did not change, which are skipped whole, and the rest is
// matched by ctid (a live row keeps its ctid): O(what changed). Otherwise
// (a read back from the store, its ctids laid out afresh) the rows are
// matched as multisets of their encodings: O(rows).
func diffRows(a, b *catalog.Table, shared bool) (removed, added []datum.Row) {
	if a == b {
		return nil, nil
	}
	if shared {
		if rem, add, ok := diffShared(a, b); ok {
			return rem, add
		}
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

// diffShared is diffRows over the B-tree leaves (catalog.Chunk) b does not
// share with a; ok is false when a table is not published (no chunks).
func diffShared(a, b *catalog.Table) (removed, added []datum.Row, ok bool) {
	type item struct {
		c catalog.CTID
		r datum.Row
	}
	inA := map[catalog.ChunkKey]bool{}
	if !a.Chunks(func(c catalog.Chunk) bool { inA[c.Key()] = true; return true }) {
		return nil, nil, false
	}
	common := map[catalog.ChunkKey]bool{}
	var as, bs []item
	if !b.Chunks(func(c catalog.Chunk) bool {
		if k := c.Key(); inA[k] {
			common[k] = true
			return true
		}
		for i := 0; i < c.Len(); i++ {
			ct, r := c.Row(i)
			bs = append(bs, item{ct, r})
		}
		return true
	}) {
		return nil, nil, false
	}
	a.Chunks(func(c catalog.Chunk) bool {
		if common[c.Key()] {
			return true
		}
		for i := 0; i < c.Len(); i++ {
			ct, r := c.Row(i)
			as = append(as, item{ct, r})
		}
		return true
	})
	// Both in ctid order: a row of a and a row of b at one ctid are the
	// same row unless their bytes differ (an update moves a row to a new
	// ctid; a freed ctid may be reused).
	for i, j := 0, 0; i < len(as) || j < len(bs); {
		switch {
		case j == len(bs) || i < len(as) && as[i].c < bs[j].c:
			removed = append(removed, as[i].r)
			i++
		case i == len(as) || bs[j].c < as[i].c:
			added = append(added, bs[j].r)
			j++
		default:
			if !bytes.Equal(as[i].r, bs[j].r) {
				removed, added = append(removed, as[i].r), append(added, bs[j].r)
			}
			i++
			j++
		}
	}
	return removed, added, true
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

	// The parent's counters past which the branch's new ids move: the
	// fork's next_catalog_id and schema_version, the parent's now.
	catFrom, catTo int64
	svFrom, svTo   int64

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
	if err := p.counters(); err != nil {
		return Result{}, err
	}
	p.classify()
	p.devDataPath, _ = p.m.Head.MetadataValue(p.schema, "data_path")
	if !strings.HasSuffix(p.devDataPath, "/") {
		p.devDataPath += "/"
	}
	p.devDirs = p.m.Head.TableDirs(p.schema, p.devDataPath)
	p.rowIDs()
	steps := []func() error{p.rows, p.stats}
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

// catalogOf is the parent's id for the branch's catalog id (a schema,
// table, view, macro, partition or sort id).
func (p *planner) catalogOf(id int64) int64 {
	if id < p.catFrom {
		return id
	}
	return id - p.catFrom + p.catTo
}

// versionOf is the parent's schema version for the branch's sv.
func (p *planner) versionOf(sv int64) int64 {
	if sv <= p.svFrom {
		return sv
	}
	return sv - p.svFrom + p.svTo
}

// counters reads the fork's and the parent's next_catalog_id and
// schema_version.
func (p *planner) counters() error {
	ft, ok := p.fork.Table("ducklake_snapshot")
	if !ok {
		return fmt.Errorf("merge: the fork of %s has no ducklake_snapshot", p.schema)
	}
	_, row, ok := ft.LookupKey([]datum.Value{datum.IntValue(p.c.Snapshot)})
	if !ok {
		return fmt.Errorf("merge: the fork of %s has no snapshot %d", p.schema, p.c.Snapshot)
	}
	fv, err := row.Decode(ft.Types(), nil)
	if err != nil {
		return err
	}
	def := ft.Def()
	si, ci := def.ColumnIndex("schema_version"), def.ColumnIndex("next_catalog_id")
	if si < 0 || ci < 0 {
		return fmt.Errorf("merge: %s.ducklake_snapshot lacks schema_version or next_catalog_id", p.schema)
	}
	p.svFrom, p.catFrom = fv[si].I, fv[ci].I
	p.svTo, p.catTo = p.lakeHead[si].I, p.lakeHead[ci].I
	return nil
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
		case changes.MergeAdjacent, changes.RewriteDelete, changes.CompactedTable, changes.InlineFlush:
			if s := e.String(); !seen[s] {
				seen[s] = true
				p.r.unsupported1("the branch's %s: %s", s, whyNot(e.Kind))
			}
		}
	}
	for _, c := range changes.ClassifyAll(p.mine, p.theirs, p.schemaNames()) {
		p.r.conflict("the branch's %s conflicts: %s", c.Mine, c.Against("the parent"))
	}
}

// schemaNames maps the fork's live schema ids to their names, for the
// matrix rows that compare a schema dropped by id with objects created in
// it by name.
func (p *planner) schemaNames() changes.SchemaNames {
	out := changes.SchemaNames{}
	t, ok := p.fork.Table("ducklake_schema")
	if !ok {
		return out
	}
	d := t.Def()
	ii, ni, ei := d.ColumnIndex("schema_id"), d.ColumnIndex("schema_name"), d.ColumnIndex("end_snapshot")
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if v, err := r.Decode(t.Types(), nil); err == nil && v[ei].IsNull() {
			out[v[ii].I] = v[ni].S
		}
		return true
	})
	return out
}

// whyNot says why a merge does not carry a change kind.
func whyNot(k changes.Kind) string {
	if k == changes.InlineFlush {
		return "flushed files embed row ids and snapshot ids, which a merge cannot renumber; merge before flushing inlined data"
	}
	return "compacted files embed the row ids of the rows they carry, which a merge cannot renumber; merge before compacting, or compact the parent after the merge"
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

// touchedBy reports how the parent deleted from, or ended, the pre-fork
// data file id since the fork, if it did: DuckLake's file-level conflict
// check. The parent's delete files and inlined deletions are read once,
// when the branch first deleted from a pre-fork file; its data file row by
// key.
func (p *planner) touchedBy(id int64) (string, bool) {
	if p.touched == nil {
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
	if why, ok := p.touched[id]; ok {
		return why, true
	}
	t, ok := p.lakeTable("ducklake_data_file")
	if !ok {
		return "", false
	}
	_, row, ok := t.LookupKey([]datum.Value{datum.IntValue(id)})
	if !ok {
		return "removed it", true
	}
	if end, err := row.Column(t.Types(), t.Def().ColumnIndex("end_snapshot")); err == nil && !end.IsNull() && end.I > p.c.Snapshot {
		return fmt.Sprintf("ended it in snapshot %d", end.I), true
	}
	return "", false
}

// deletesFrom records that the branch deleted from (or ended) the
// pre-fork data file id of table tid, which the parent must not have
// touched since the fork.
func (p *planner) deletesFrom(tid, id int64, what string) {
	if id >= p.c.NextFileID {
		return
	}
	if why, ok := p.touchedBy(id); ok {
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
	if spec, ok := keyspace.Known(name); ok && spec.Kind == keyspace.KindInlinedRow {
		d.begin, d.end = spec.Begin, spec.End // _ducklake_begin_snapshot from 1.1 on
	}
	var rem, add []datum.Row
	if ft == nil {
		dt.Scan(func(_ catalog.CTID, r datum.Row) bool { add = append(add, r); return true })
	} else {
		if !reflect.DeepEqual(ft.Def().Columns, dt.Def().Columns) {
			p.r.unsupported1("%s: its columns changed on the branch", name)
			return nil, nil
		}
		rem, add = diffRows(ft, dt, p.m.Shared)
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

// mint writes the branch's snapshots and their change sets on the
// parent. Their times are the merge's (one microsecond apart, in order):
// DuckLake's time travel by timestamp and expiry by age read snapshot
// times as the order of the parent's history. Their schema version and
// next catalog id are the parent's (a merge carries no schema change).
func (p *planner) mint() error {
	st, _ := p.lakeTable("ducklake_snapshot")
	def := st.Def()
	ti, fi := def.ColumnIndex("snapshot_time"), def.ColumnIndex("next_file_id")
	si, ci := def.ColumnIndex("schema_version"), def.ColumnIndex("next_catalog_id")
	for i, dv := range p.devSnaps {
		vals := append([]datum.Value(nil), p.lakeHead...)
		vals[0] = datum.IntValue(p.snapOf(dv[0].I))
		if ti >= 0 {
			vals[ti] = pgTime(p.now.Add(time.Duration(i) * time.Microsecond))
		}
		if fi >= 0 && !dv[fi].IsNull() {
			vals[fi] = datum.IntValue(p.fileOf(dv[fi].I))
		}
		// The parent's schema and catalog counters, moved on by what the
		// branch's schema changes had added by then.
		vals[si] = datum.IntValue(p.svTo + dv[si].I - p.svFrom)
		vals[ci] = datum.IntValue(p.catTo + dv[ci].I - p.catFrom)
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
	chi := dt.Def().ColumnIndex("changes_made")
	for _, v := range rows {
		v[0] = datum.IntValue(p.snapOf(v[0].I))
		if chi >= 0 && !v[chi].IsNull() {
			v[chi] = datum.TextValue(p.movedChanges(v[chi].S))
		}
		if _, err := p.lake().InsertRow(p.schema, "ducklake_snapshot_changes", v); err != nil {
			return err
		}
	}
	return nil
}

// movedChanges is a changes_made string with the catalog ids of the
// branch's new objects moved to the parent's; unchanged (byte for byte)
// when it names none.
func (p *planner) movedChanges(s string) string {
	set, err := changes.Parse(s)
	if err != nil {
		return s
	}
	moved := false
	for i, e := range set {
		if e.Kind.HasID() && e.ID >= p.catFrom {
			set[i].ID, moved = p.catalogOf(e.ID), true
		}
	}
	if !moved {
		return s
	}
	return set.String()
}

// pgTime is t as a timestamptz datum.
func pgTime(t time.Time) datum.Value {
	return datum.TimestampTZValue(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())
}
