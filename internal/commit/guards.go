package commit

import (
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// The lake guards: the invariants of RFC 0008 (compaction never allocates
// or renumbers a row id) and of the deletes/tombstones note (a tombstone
// outlives every file that could hold its row, and a row id is never
// reused), checked on every change set whatever else it carries, before a
// byte is written. They read only the commit's operations and the versions
// around it; the row-id hold (hold.go) is the one guard that reads files.
//
// Each guard has a name. docs/commit.md lists the test that fails without
// it, and scripts/guards proves that list by building with the
// moraine_guardsoff tag and switching each guard off in turn (guardOn).

// fileOps is what a commit does to one table's data or delete files: the
// rows it inserts, hard-deletes, ends and otherwise updates, decoded.
type fileOps struct {
	cols     fileCols
	inserted map[int64][]datum.Value // by file id
	deleted  [][]datum.Value         // hard-deleted rows (old values)
	ended    [][]datum.Value         // live rows the commit ends (old values)
	updates  []fileUpdate
}

type fileUpdate struct {
	old, new []datum.Value
}

// fileCols are the column positions a guard reads; -1 when absent.
type fileCols struct {
	id, table, file, begin, end, count int
}

func newFileOps(c *catalog.Commit, schema, table string, ops []*catalog.Op) (*fileOps, error) {
	t, err := tableOf(c, schema, table)
	if err != nil {
		return nil, nil // the catalog has no such table: nothing to guard
	}
	def, types := t.Def(), t.Types()
	idCol := "data_file_id"
	if table == "ducklake_delete_file" {
		idCol = "delete_file_id"
	}
	fo := &fileOps{
		cols: fileCols{
			id: def.ColumnIndex(idCol), table: def.ColumnIndex("table_id"), file: def.ColumnIndex("data_file_id"),
			begin: def.ColumnIndex("begin_snapshot"), end: def.ColumnIndex("end_snapshot"), count: def.ColumnIndex("delete_count"),
		},
		inserted: map[int64][]datum.Value{},
	}
	if fo.cols.id < 0 || fo.cols.table < 0 || fo.cols.begin < 0 || fo.cols.end < 0 {
		return nil, nil
	}
	decode := func(r datum.Row) ([]datum.Value, error) {
		v, err := r.Decode(types, nil)
		if err != nil {
			return nil, fmt.Errorf("commit: %s: %w", table, err)
		}
		return v, nil
	}
	for _, o := range ops {
		if o.Table != table {
			continue
		}
		switch o.Kind {
		case catalog.OpInsert:
			nv, err := decode(o.New)
			if err != nil {
				return nil, err
			}
			fo.inserted[nv[fo.cols.id].I] = nv
		case catalog.OpDelete:
			ov, err := decode(o.Old)
			if err != nil {
				return nil, err
			}
			fo.deleted = append(fo.deleted, ov)
		case catalog.OpUpdate:
			ov, err := decode(o.Old)
			if err != nil {
				return nil, err
			}
			nv, err := decode(o.New)
			if err != nil {
				return nil, err
			}
			fo.updates = append(fo.updates, fileUpdate{ov, nv})
			if ov[fo.cols.end].IsNull() && !nv[fo.cols.end].IsNull() {
				fo.ended = append(fo.ended, ov)
			}
		}
	}
	return fo, nil
}

func (fo *fileOps) live(v []datum.Value) bool { return v[fo.cols.end].IsNull() }

// span is a file row's visibility window for messages.
func (fo *fileOps) span(v []datum.Value) string {
	if v[fo.cols.end].IsNull() {
		return fmt.Sprintf("[%d, live)", v[fo.cols.begin].I)
	}
	return fmt.Sprintf("[%d, %d)", v[fo.cols.begin].I, v[fo.cols.end].I)
}

func integrityErr(format string, args ...any) error {
	return &Error{Kind: ErrIntegrity, Code: pgcode.IntegrityConstraintViolation, Message: fmt.Sprintf(format, args...)}
}

// checkLakeGuards runs every lake guard on a commit to one catalog: ops are
// its row operations there, mine its change set, minted the snapshot it
// mints (if any).
func checkLakeGuards(c *catalog.Commit, schema string, ops []*catalog.Op, mine changes.Set, minted []int64) error {
	data, err := newFileOps(c, schema, "ducklake_data_file", ops)
	if err != nil {
		return err
	}
	dels, err := newFileOps(c, schema, "ducklake_delete_file", ops)
	if err != nil {
		return err
	}
	compacting := map[int64]changes.Kind{}
	var others []string
	for _, e := range mine {
		switch e.Kind {
		case changes.MergeAdjacent, changes.RewriteDelete:
			compacting[e.ID] = e.Kind
		default:
			others = append(others, e.Kind.String())
		}
	}
	if guardOn("compaction-alone") && len(compacting) > 0 && len(others) > 0 {
		return shapeErr("a compaction commit (%s) also carries %s: DuckLake never mixes compaction with other changes, and a mixture would escape the row-id hold and the next_row_id check (RFC 0008)",
			compactionList(mine), strings.Join(others, ", "))
	}
	if data != nil {
		if err := guardDataFiles(c, schema, data, dels, mine, minted); err != nil {
			return err
		}
	}
	for _, fo := range []*fileOps{data, dels} {
		if err := guardFileTables(c, schema, fo); err != nil {
			return err
		}
	}
	if err := guardNextRowID(c, schema, ops); err != nil {
		return err
	}
	if dels != nil {
		if err := guardReplacements(c, schema, dels); err != nil {
			return err
		}
	}
	if err := guardHistory(c, schema, data, mine); err != nil {
		return err
	}
	return guardHistory(c, schema, dels, nil)
}

func compactionList(s changes.Set) string {
	var out []string
	for _, e := range s {
		if e.Kind == changes.MergeAdjacent || e.Kind == changes.RewriteDelete {
			out = append(out, fmt.Sprintf("%s:%d", e.Kind, e.ID))
		}
	}
	return strings.Join(out, ", ")
}

// guardDataFiles: a live data file is hard-deleted only by a merge of its
// table, and never with deletions still applying to it; begin_snapshot is
// rebased only on the file a rewrite of its table just inserted, to the
// rewrite's own snapshot; no hard-deleted data file leaves inlined
// deletions behind.
func guardDataFiles(c *catalog.Commit, schema string, data, dels *fileOps, mine changes.Set, minted []int64) error {
	cols := data.cols
	merging := map[int64]bool{}
	rewriting := map[int64]bool{}
	for _, e := range mine {
		switch e.Kind {
		case changes.MergeAdjacent:
			merging[e.ID] = true
		case changes.RewriteDelete:
			rewriting[e.ID] = true
		}
	}
	for _, v := range data.deleted {
		if !data.live(v) {
			continue // history rows go with expiry and merges
		}
		tid := v[cols.table].I
		if guardOn("merge-declared") && !merging[tid] {
			return shapeErr("data file %d of table %d is live and is hard-deleted, but the commit is no merge_adjacent of that table: only a merge may remove a live file's row (its rows must reappear in the merged file), anything else loses rows and their ids",
				v[cols.id].I, tid)
		}
		if guardOn("merge-inlined-deletes") {
			if n := inlinedDeletes(c.Base, schema, tid, v[cols.id].I); n > 0 {
				return shapeErr("merge_adjacent of table %d consumes data file %d, which carries %d inlined deletions: a plain merge would bring the deleted rows back (RFC 0008)",
					tid, v[cols.id].I, n)
			}
		}
	}
	for _, u := range data.updates {
		if datum.Equal(u.old[cols.begin], u.new[cols.begin]) {
			continue
		}
		id, tid := u.old[cols.id].I, u.old[cols.table].I
		if !guardOn("rebase") {
			continue
		}
		if _, mine := data.inserted[id]; !mine {
			return shapeErr("UPDATE ducklake_data_file SET begin_snapshot on data file %d, which this transaction did not insert: only the file a rewrite just registered may be rebased (RFC 0008), or time travel to the snapshots it leaves would change",
				id)
		}
		if !rewriting[tid] {
			return shapeErr("UPDATE ducklake_data_file SET begin_snapshot on data file %d outside a rewrite_delete of table %d: only a rewrite rebases its replacement file (RFC 0008)", id, tid)
		}
		if len(minted) != 1 || u.new[cols.begin].IsNull() || u.new[cols.begin].I != minted[0] {
			return shapeErr("UPDATE ducklake_data_file SET begin_snapshot = %s on data file %d: a rewrite rebases its replacement to its own snapshot%s",
				datum.FormatText(datum.Int8, u.new[cols.begin]), id, mintedSuffix(minted))
		}
	}
	if guardOn("inlined-deletes-orphaned") {
		for _, v := range data.deleted {
			tid, fid := v[cols.table].I, v[cols.id].I
			if _, reinserted := data.inserted[fid]; reinserted {
				continue
			}
			if n := inlinedDeletes(c.Next, schema, tid, fid); n > 0 {
				return integrityErr("data file %d of table %d %s is removed while %d inlined deletions of its rows remain: they must go with it, or be materialized first",
					fid, tid, data.span(v), n)
			}
		}
	}
	return nil
}

// guardFileTables: a file the commit registers belongs to a table the
// catalog holds, live, once the commit lands: DuckLake never registers a
// file of a table it does not have, and such a row would hide from every
// read and trip the maintenance that met it.
func guardFileTables(c *catalog.Commit, schema string, fo *fileOps) error {
	if fo == nil || len(fo.inserted) == 0 || fo.cols.table < 0 || !guardOn("file-table-live") {
		return nil
	}
	t, err := c.Next.Table(schema, "ducklake_table")
	if err != nil {
		return nil
	}
	tid, end := t.Def().ColumnIndex("table_id"), t.Def().ColumnIndex("end_snapshot")
	if tid < 0 || end < 0 {
		return nil
	}
	live := map[int64]bool{}
	isLive := func(id int64) bool {
		if v, ok := live[id]; ok {
			return v
		}
		found := false
		match := func(_ catalog.CTID, r datum.Row) bool {
			v, err := r.Decode(t.Types(), nil)
			found = err == nil && !v[tid].IsNull() && v[tid].I == id && v[end].IsNull()
			return !found
		}
		if !t.LookupPrefix([]datum.Value{datum.IntValue(id)}, match) {
			t.Scan(match)
		}
		live[id] = found
		return found
	}
	for id, v := range fo.inserted {
		if v[fo.cols.table].IsNull() || !isLive(v[fo.cols.table].I) {
			return &Error{Kind: ErrIntegrity, Code: pgcode.ForeignKeyViolation, Message: fmt.Sprintf(
				"%s row %d names table %s, which the catalog does not hold live: a file belongs to a table it has",
				tableNameOf(fo), id, datum.FormatText(datum.Int8, v[fo.cols.table]))}
		}
	}
	return nil
}

func mintedSuffix(minted []int64) string {
	if len(minted) == 1 {
		return fmt.Sprintf(" (%d)", minted[0])
	}
	return " (and this commit mints no snapshot)"
}

// inlinedDeletes counts the rows of ducklake_inlined_delete_<table> in v
// naming data file file.
func inlinedDeletes(v *catalog.Version, schema string, table, file int64) int {
	t, err := v.Table(schema, keyspace.InlinedDeleteTableName(table))
	if err != nil {
		return 0
	}
	i := t.Def().ColumnIndex("file_id")
	if i < 0 {
		return 0
	}
	n := 0
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if f, err := r.Column(t.Types(), i); err == nil && !f.IsNull() && f.I == file {
			n++
		}
		return true
	})
	return n
}

// guardNextRowID: next_row_id never goes down. Ids below it may be in use
// in files or inlined rows; handing them out again would let a tombstone
// of an old row hide a new one.
func guardNextRowID(c *catalog.Commit, schema string, ops []*catalog.Op) error {
	if !guardOn("next-row-id-monotonic") {
		return nil
	}
	for _, o := range ops {
		if o.Table != "ducklake_table_stats" || o.Kind != catalog.OpUpdate {
			continue
		}
		t, err := tableOf(c, schema, o.Table)
		if err != nil {
			return nil
		}
		i, it := t.Def().ColumnIndex("next_row_id"), t.Def().ColumnIndex("table_id")
		if i < 0 || it < 0 {
			return nil
		}
		a, err1 := o.Old.Column(t.Types(), i)
		b, err2 := o.New.Column(t.Types(), i)
		if err1 != nil || err2 != nil || a.IsNull() {
			continue
		}
		if b.IsNull() || b.I < a.I {
			tid, _ := o.Old.Column(t.Types(), it)
			return integrityErr("next_row_id of table %s would go from %d down to %s: row ids below it may be in use, and reusing one lets a tombstone of the old row hide the new one",
				datum.FormatText(datum.Int8, tid), a.I, datum.FormatText(datum.Int8, b))
		}
	}
	return nil
}

// guardReplacements: a delete file that stops being live while its data
// file stays live is replaced in the same commit by one that deletes at
// least as many rows; fewer would bring deleted rows back.
func guardReplacements(c *catalog.Commit, schema string, dels *fileOps) error {
	if !guardOn("replacement-covers") || dels.cols.count < 0 || dels.cols.file < 0 {
		return nil
	}
	cols := dels.cols
	gone := append(append([][]datum.Value(nil), dels.ended...), dels.deleted...)
	for _, old := range gone {
		if !dels.live(old) {
			continue
		}
		file := old[cols.file].I
		for _, nv := range dels.inserted {
			if nv[cols.file].I != file || !dels.live(nv) {
				continue
			}
			if nv[cols.count].IsNull() || old[cols.count].IsNull() {
				continue
			}
			if nv[cols.count].I < old[cols.count].I {
				return integrityErr("delete file %d replaces delete file %d of data file %d but deletes %d rows where the one it replaces deleted %d: the other deleted rows would come back",
					nv[cols.id].I, old[cols.id].I, file, nv[cols.count].I, old[cols.count].I)
			}
		}
	}
	return nil
}

// guardHistory: a file row hard-deleted by expiry must be visible at no
// snapshot that is still retained: a retained snapshot that could see it
// would lose the file (or its deletions) from its time travel. A merge's
// data files are exempt: its backdated output answers for their rows at
// every retained snapshot (RFC 0008).
func guardHistory(c *catalog.Commit, schema string, fo *fileOps, mine changes.Set) error {
	if fo == nil || !guardOn("history-needed") {
		return nil
	}
	merging := map[int64]bool{}
	for _, e := range mine {
		if e.Kind == changes.MergeAdjacent {
			merging[e.ID] = true
		}
	}
	var retained []int64
	loaded := false
	for _, v := range fo.deleted {
		if fo.live(v) || merging[v[fo.cols.table].I] {
			continue
		}
		if !loaded {
			retained, loaded = retainedSnapshots(c.Next, schema), true
		}
		b, e := v[fo.cols.begin].I, v[fo.cols.end].I
		for _, s := range retained {
			if s >= b && s < e {
				return integrityErr("%s row %d %s is removed while retained snapshot %d still sees it: expire that snapshot first, or its time travel loses the file",
					tableNameOf(fo), v[fo.cols.id].I, fo.span(v), s)
			}
		}
	}
	return nil
}

func tableNameOf(fo *fileOps) string {
	if fo.cols.count >= 0 {
		return "ducklake_delete_file"
	}
	return "ducklake_data_file"
}

// retainedSnapshots returns the snapshot ids v's ducklake_snapshot holds.
func retainedSnapshots(v *catalog.Version, schema string) []int64 {
	t, err := v.Table(schema, "ducklake_snapshot")
	if err != nil {
		return nil
	}
	var out []int64
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		if id, err := r.Column(t.Types(), 0); err == nil && !id.IsNull() {
			out = append(out, id.I)
		}
		return true
	})
	return out
}
