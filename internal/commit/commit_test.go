package commit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/slate"
)

const schema = "public"

// harness is a catalog whose commits go through a Pipeline into a slate
// store on an in-memory object store.
type harness struct {
	t     *testing.T
	ctx   context.Context
	store objstore.Store
	kv    *slate.DB
	pipe  *Pipeline
	srv   *catalog.Server
	db    *catalog.Database
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	ctx := context.Background()
	store := objstore.NewMem()
	kv, err := slate.Open(ctx, store, slate.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close(context.Background()) })
	h := &harness{t: t, ctx: ctx, store: store, kv: kv}
	h.pipe = New(kv, opts)
	h.srv = catalog.NewServer(catalog.Options{Committer: h.pipe})
	h.db = h.srv.Database("lake")
	return h
}

// row parses one row of table from text values ("NULL" is NULL).
func (h *harness) row(tx *catalog.Txn, table string, cells ...string) []datum.Value {
	h.t.Helper()
	tb, err := tx.Table(schema, table)
	if err != nil {
		h.t.Fatal(err)
	}
	types := tb.Types()
	if len(cells) != len(types) {
		h.t.Fatalf("%s: %d values for %d columns", table, len(cells), len(types))
	}
	vals := make([]datum.Value, len(cells))
	for i, c := range cells {
		if c == "NULL" {
			continue
		}
		v, err := datum.ParseText(types[i], c)
		if err != nil {
			h.t.Fatalf("%s column %d %q: %v", table, i, c, err)
		}
		vals[i] = v
	}
	return vals
}

func (h *harness) insert(tx *catalog.Txn, table string, cells ...string) {
	h.t.Helper()
	if _, err := tx.InsertRow(schema, table, h.row(tx, table, cells...)); err != nil {
		h.t.Fatalf("insert %s: %v", table, err)
	}
}

// where returns the ctids and values of the rows of table whose column col
// has the text value val.
func (h *harness) where(tx *catalog.Txn, table, col, val string) ([]catalog.CTID, [][]datum.Value) {
	h.t.Helper()
	tb, err := tx.Table(schema, table)
	if err != nil {
		h.t.Fatal(err)
	}
	i := tb.Def().ColumnIndex(col)
	var cs []catalog.CTID
	var vs [][]datum.Value
	tb.Scan(func(c catalog.CTID, r datum.Row) bool {
		v, _ := r.Decode(tb.Types(), nil)
		if (v[i].IsNull() && val == "NULL") || (!v[i].IsNull() && datum.FormatText(tb.Types()[i], v[i]) == val) {
			cs = append(cs, c)
			vs = append(vs, v)
		}
		return true
	})
	return cs, vs
}

// set updates column col of the rows where match=val.
func (h *harness) set(tx *catalog.Txn, table, matchCol, val, col, to string) {
	h.t.Helper()
	cs, vs := h.where(tx, table, matchCol, val)
	if len(cs) == 0 {
		h.t.Fatalf("no %s row with %s=%s", table, matchCol, val)
	}
	tb, _ := tx.Table(schema, table)
	i := tb.Def().ColumnIndex(col)
	for k, c := range cs {
		nv := append([]datum.Value(nil), vs[k]...)
		v, err := datum.ParseText(tb.Types()[i], to)
		if to == "NULL" {
			v, err = datum.Null, nil
		}
		if err != nil {
			h.t.Fatal(err)
		}
		nv[i] = v
		if _, err := tx.UpdateRow(schema, table, c, nv); err != nil {
			h.t.Fatalf("update %s: %v", table, err)
		}
	}
}

func (h *harness) del(tx *catalog.Txn, table, col, val string) {
	h.t.Helper()
	cs, _ := h.where(tx, table, col, val)
	for _, c := range cs {
		if err := tx.DeleteRow(schema, table, c); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) commit(fn func(tx *catalog.Txn)) error {
	h.t.Helper()
	tx := h.db.Begin()
	fn(tx)
	return tx.Commit(h.ctx)
}

func (h *harness) mustCommit(fn func(tx *catalog.Txn)) {
	h.t.Helper()
	if err := h.commit(fn); err != nil {
		h.t.Fatalf("commit: %v", err)
	}
	h.checkStore()
}

// initLake creates DuckLake's tables and seed rows as DuckLake's
// initialisation does, and a table t (id 1) with two columns.
func (h *harness) initLake() { h.initLakeAt("/lake/") }

func (h *harness) initLakeAt(dataPath string) {
	h.t.Helper()
	defs, err := keyspace.FixedDefs(schema, keyspace.Version11)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mustCommit(func(tx *catalog.Txn) {
		for _, d := range defs {
			if err := tx.CreateTable(d); err != nil {
				h.t.Fatal(err)
			}
		}
		h.insert(tx, "ducklake_snapshot", "0", "2026-01-01 00:00:00+00", "0", "1", "0")
		h.insert(tx, "ducklake_snapshot_changes", "0", `created_schema:"main"`, "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_metadata", "version", "1.1-dev1", "NULL", "NULL")
		h.insert(tx, "ducklake_metadata", "data_path", dataPath, "NULL", "NULL")
		h.insert(tx, "ducklake_schema", "0", "01a228fa-c981-73bd-bd75-de9b66b06eb9", "0", "NULL", "main", "main/", "true")
	})
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "1", "2026-01-01 00:00:01+00", "1", "2", "0")
		h.insert(tx, "ducklake_snapshot_changes", "1", `created_table:"main"."t"`, "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_table", "1", "01a228fa-c981-73bd-bd75-de9b66b06eb8", "1", "NULL", "0", "t", "t/", "true")
		h.insert(tx, "ducklake_column", "1", "1", "NULL", "1", "1", "id", "int64", "NULL", "NULL", "true", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_column", "2", "1", "NULL", "1", "2", "v", "varchar", "NULL", "NULL", "true", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_table_stats", "1", "0", "0", "0")
	})
}

// addFile registers a data file of table 1 in a snapshot-minting commit,
// with two stats rows and one partition value.
func (h *harness) addFile(snap, file, rowStart, count int64) {
	h.t.Helper()
	h.mustCommit(func(tx *catalog.Txn) {
		s := fmt.Sprint
		h.insert(tx, "ducklake_snapshot", s(snap), "2026-01-01 00:00:02+00", "1", "2", s(file+1))
		h.insert(tx, "ducklake_snapshot_changes", s(snap), "inserted_into_table:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_data_file", s(file), "1", s(snap), "NULL", "NULL", fmt.Sprintf("f%d.parquet", file), "true", "parquet",
			s(count), "1000", "100", s(rowStart), "NULL", "NULL", "NULL", "NULL", "1")
		h.insert(tx, "ducklake_file_column_stats", s(file), "1", "1", "10", s(count), "0", "1", "9", "NULL", "NULL")
		h.insert(tx, "ducklake_file_column_stats", s(file), "1", "2", "10", s(count), "0", "a", "z", "NULL", "NULL")
		h.insert(tx, "ducklake_file_partition_value", s(file), "1", "0", s(2020+file))
		h.set(tx, "ducklake_table_stats", "table_id", "1", "next_row_id", s(rowStart+count))
	})
}

// checkStore reads the whole store back and compares every table of the
// catalog with the database's current version, row for row (as multisets:
// the store keeps rows in key order, the catalog in ctid order).
func (h *harness) checkStore() {
	h.t.Helper()
	cats, err := ReadStore(h.ctx, h.kv)
	if err != nil {
		h.t.Fatalf("read store: %v", err)
	}
	sc, ok := h.db.Current().Schema(schema)
	if !ok {
		h.t.Fatal("no schema")
	}
	stored := cats[uint32(sc.CatalogID)]
	if stored == nil {
		if len(sc.Tables()) == 0 {
			return
		}
		h.t.Fatalf("catalog %d not in the store", sc.CatalogID)
	}
	if stored.Database != "lake" || stored.Schema != schema {
		h.t.Fatalf("registry names %s.%s", stored.Database, stored.Schema)
	}
	seen := map[string]bool{}
	for _, tb := range sc.Tables() {
		name := tb.Name()
		seen[name] = true
		def := stored.Defs[name]
		if def == nil {
			h.t.Fatalf("table %s has no stored definition", name)
		}
		if def.String() != tb.Def().String() {
			h.t.Fatalf("stored definition %s, catalog %s", def, tb.Def())
		}
		var want []string
		tb.Scan(func(_ catalog.CTID, r datum.Row) bool { want = append(want, string(r)); return true })
		var got []string
		for _, r := range stored.Rows[name] {
			got = append(got, string(r))
		}
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(want, "\x00|") != strings.Join(got, "\x00|") {
			h.t.Fatalf("table %s: store has %d rows, catalog %d (or different bytes)", name, len(got), len(want))
		}
	}
	for name := range stored.Defs {
		if !seen[name] {
			h.t.Fatalf("store has a definition of %s, which the catalog does not", name)
		}
	}
}

// keys returns the store's keys of a kind in the catalog, by subspace.
func (h *harness) keys(k keyspace.Kind) (current, history int) {
	sc, _ := h.db.Current().Schema(schema)
	it := h.kv.ScanPrefix(h.ctx, keyspace.KindPrefix(uint32(sc.CatalogID), k))
	defer it.Close()
	for it.Next() {
		switch keyspace.Subspace(it.Key()[5]) {
		case keyspace.SubCurrent:
			current++
		case keyspace.SubHistory:
			history++
		}
	}
	return
}

func TestCommitsRoundTripThroughTheStore(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	h.addFile(3, 1, 10, 5)
	// End a file: it moves from the current to the history subspace with
	// its embedded partition value.
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:03+00", "1", "2", "2")
		h.insert(tx, "ducklake_snapshot_changes", "4", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
	})
	if cur, hist := h.keys(keyspace.KindDataFile); cur != 1 || hist != 1 {
		t.Fatalf("data file keys: %d current, %d history; want 1 and 1", cur, hist)
	}
	// A rolled-back transaction leaves nothing behind.
	tx := h.db.Begin()
	h.insert(tx, "ducklake_snapshot", "5", "2026-01-01 00:00:04+00", "1", "2", "2")
	tx.Rollback()
	h.checkStore()
}

func TestMergeShapedCommit(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	for i := int64(0); i < 3; i++ {
		h.addFile(2+i, i, i*10, 10)
	}
	// End file 2 first so a history row of a source exists too.
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "5", "2026-01-01 00:00:03+00", "1", "2", "3")
		h.insert(tx, "ducklake_snapshot_changes", "5", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_data_file", "data_file_id", "2", "end_snapshot", "5")
	})
	nextRowID := func() string {
		_, vs := h.where(h.db.Begin(), "ducklake_table_stats", "table_id", "1")
		return datum.FormatText(datum.Int8, vs[0][2])
	}
	before := nextRowID()
	// The merge: new file backdated to the first source's begin_snapshot;
	// source rows and stats hard-deleted (current and history alike);
	// sources scheduled; next_row_id untouched.
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "6", "2026-01-01 00:00:05+00", "1", "2", "4")
		h.insert(tx, "ducklake_snapshot_changes", "6", "merge_adjacent:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_data_file", "3", "1", "2", "NULL", "NULL", "merged.parquet", "true", "parquet",
			"30", "3000", "100", "0", "NULL", "NULL", "NULL", "2", "1")
		h.insert(tx, "ducklake_file_partition_value", "3", "1", "0", "2020")
		for _, f := range []string{"0", "1", "2"} {
			h.del(tx, "ducklake_data_file", "data_file_id", f)
			h.del(tx, "ducklake_file_column_stats", "data_file_id", f)
			h.del(tx, "ducklake_file_partition_value", "data_file_id", f)
			h.insert(tx, "ducklake_files_scheduled_for_deletion", f, "f"+f+".parquet", "true", "2026-01-01 00:00:05+00")
		}
	})
	if cur, hist := h.keys(keyspace.KindDataFile); cur != 1 || hist != 0 {
		t.Fatalf("after merge: %d current and %d history data-file keys; want 1 and 0", cur, hist)
	}
	cats, _ := ReadStore(h.ctx, h.kv)
	var st *StoredCatalog
	for _, c := range cats {
		st = c
	}
	if got := len(st.Rows["ducklake_files_scheduled_for_deletion"]); got != 3 {
		t.Fatalf("%d scheduled files, want 3", got)
	}
	if got := len(st.Rows["ducklake_file_column_stats"]); got != 0 {
		t.Fatalf("%d stats rows left, want 0", got)
	}
	if got := len(st.Rows["ducklake_file_partition_value"]); got != 1 {
		t.Fatalf("%d partition values, want the merged file's 1", got)
	}
	if !st.HasHead || st.Head.Snapshot != 6 {
		t.Fatalf("head %+v, want snapshot 6", st.Head)
	}
	if after := nextRowID(); after != before {
		t.Fatalf("next_row_id moved from %s to %s", before, after)
	}
	set, err := changes.Parse("merge_adjacent:1")
	if err != nil || !set.CompactionOnly() {
		t.Fatalf("merge change set: %v %v", set, err)
	}
}

func TestRewriteShapedCommit(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "2")
		h.insert(tx, "ducklake_snapshot_changes", "3", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_delete_file", "1", "1", "3", "NULL", "0", "d1.parquet", "true", "parquet", "2", "100", "50", "NULL", "NULL", "NULL")
	})
	nextRowID := func() int64 {
		_, vs := h.where(h.db.Begin(), "ducklake_table_stats", "table_id", "1")
		return vs[0][2].I
	}
	before := nextRowID()
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:04+00", "1", "2", "3")
		h.insert(tx, "ducklake_snapshot_changes", "4", "rewrite_delete:1", "NULL", "NULL", "NULL")
		h.insert(tx, "ducklake_data_file", "2", "1", "3", "NULL", "NULL", "rewritten.parquet", "true", "parquet",
			"8", "800", "100", "0", "NULL", "NULL", "NULL", "NULL", "1")
		h.insert(tx, "ducklake_file_partition_value", "2", "1", "0", "2020")
		h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
		h.set(tx, "ducklake_delete_file", "delete_file_id", "1", "end_snapshot", "4")
		h.set(tx, "ducklake_data_file", "data_file_id", "2", "begin_snapshot", "4")
	})
	if cur, hist := h.keys(keyspace.KindDataFile); cur != 1 || hist != 1 {
		t.Fatalf("data files: %d current, %d history; want 1 and 1", cur, hist)
	}
	if cur, hist := h.keys(keyspace.KindDeleteFile); cur != 0 || hist != 1 {
		t.Fatalf("delete files: %d current, %d history; want 0 and 1", cur, hist)
	}
	_, vs := h.where(h.db.Begin(), "ducklake_data_file", "data_file_id", "2")
	if vs[0][2].I != 4 {
		t.Fatalf("replacement begin_snapshot %d, want the rebased 4", vs[0][2].I)
	}
	_, sched := h.where(h.db.Begin(), "ducklake_files_scheduled_for_deletion", "path_is_relative", "true")
	if len(sched) != 0 {
		t.Fatalf("a rewrite scheduled %d files", len(sched))
	}
	if after := nextRowID(); after != before {
		t.Fatalf("the rewrite moved next_row_id from %d to %d", before, after)
	}
}

// refused runs a commit that must be refused with kind, and checks that
// neither the store nor the catalog changed.
func (h *harness) refused(kind error, fn func(tx *catalog.Txn)) error {
	h.t.Helper()
	beforeObjs, _ := h.store.List(h.ctx, "")
	beforeVer := h.db.Current()
	err := h.commit(fn)
	if !errors.Is(err, kind) {
		h.t.Fatalf("commit error %v, want %v", err, kind)
	}
	if h.db.Current() != beforeVer {
		h.t.Fatal("a refused commit changed the catalog")
	}
	afterObjs, _ := h.store.List(h.ctx, "")
	if len(afterObjs) != len(beforeObjs) {
		h.t.Fatalf("a refused commit wrote %d objects", len(afterObjs)-len(beforeObjs))
	}
	h.checkStore()
	return err
}

func TestShapeErrors(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "1")
		h.insert(tx, "ducklake_snapshot_changes", "3", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "3")
	})
	cases := []struct {
		name string
		fn   func(tx *catalog.Txn)
		want string
	}{
		{"rebase of an ended file", func(tx *catalog.Txn) {
			h.set(tx, "ducklake_data_file", "data_file_id", "0", "begin_snapshot", "1")
		}, "not current"},
		{"re-ending a history row", func(tx *catalog.Txn) {
			h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "2")
		}, "already ended"},
		{"begin_snapshot of a table row", func(tx *catalog.Txn) {
			h.set(tx, "ducklake_table", "table_id", "1", "begin_snapshot", "0")
		}, "begin_snapshot"},
		{"renaming through UPDATE", func(tx *catalog.Txn) {
			h.set(tx, "ducklake_table", "table_id", "1", "table_name", "u")
		}, "only ends rows"},
		{"updating the snapshot log", func(tx *catalog.Txn) {
			h.set(tx, "ducklake_snapshot", "snapshot_id", "1", "schema_version", "7")
		}, "never updated"},
		{"orphan partition value", func(tx *catalog.Txn) {
			h.insert(tx, "ducklake_file_partition_value", "99", "1", "0", "x")
		}, "belong to no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := h.refused(ErrShape, c.fn)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestHeadAdvancesByOne(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	err := h.refused(ErrHead, func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "0")
		h.insert(tx, "ducklake_snapshot_changes", "3", "inserted_into_table:1", "NULL", "NULL", "NULL")
	})
	// DuckLake retries on these words; a gap means its base was stale.
	if !strings.Contains(strings.ToLower(err.Error()), "conflict") && !strings.Contains(err.Error(), "concurrent") {
		t.Fatalf("head error %q lacks the words DuckLake's retry loop scans for", err)
	}
	h.refused(ErrShape, func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "2", "2026-01-01 00:00:03+00", "1", "2", "0")
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "0")
	})
}

func TestCompactionMustNotMoveNextRowID(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	h.refused(ErrHold, func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "1")
		h.insert(tx, "ducklake_snapshot_changes", "3", "merge_adjacent:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_table_stats", "table_id", "1", "next_row_id", "20")
	})
}

func TestConflictAgainstUnseenCommits(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	// A transaction pinned before snapshot 3 …
	tx := h.db.Begin()
	// … while another drops the table.
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "2", "2", "1")
		h.insert(tx, "ducklake_snapshot_changes", "3", "dropped_table:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_table", "table_id", "1", "end_snapshot", "3")
	})
	// The first transaction inserts with the correct next id (as after a
	// retry that skipped the conflict check): the matrix must refuse it.
	h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:04+00", "2", "2", "2")
	h.insert(tx, "ducklake_snapshot_changes", "4", "inserted_into_table:1", "NULL", "NULL", "NULL")
	err := tx.Commit(h.ctx)
	if !errors.Is(err, ErrConflict) || !strings.Contains(strings.ToLower(err.Error()), "conflict") {
		t.Fatalf("commit = %v, want a conflict", err)
	}
	h.checkStore()
	// An insert racing an insert is not a conflict.
	tx = h.db.Begin()
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "4", "2026-01-01 00:00:04+00", "2", "2", "2")
		h.insert(tx, "ducklake_snapshot_changes", "4", "created_table:\"main\".\"u\"", "NULL", "NULL", "NULL")
	})
	h.insert(tx, "ducklake_snapshot", "5", "2026-01-01 00:00:05+00", "2", "2", "2")
	h.insert(tx, "ducklake_snapshot_changes", "5", "created_table:\"main\".\"v\"", "NULL", "NULL", "NULL")
	if err := tx.Commit(h.ctx); err != nil {
		t.Fatalf("disjoint commit refused: %v", err)
	}
	h.checkStore()
}

// failingStore fails every write after the first n.
type failingStore struct {
	Store
	n int
}

func (f *failingStore) Submit(ctx context.Context, b *slate.Batch) (*slate.Pending, error) {
	if f.n <= 0 {
		return nil, errors.New("injected write failure")
	}
	f.n--
	return f.Store.Submit(ctx, b)
}

func TestStoreFailureStopsEveryLaterCommit(t *testing.T) {
	h := newHarness(t, Options{})
	fs := &failingStore{Store: h.kv, n: 2}
	h.pipe.store = fs
	h.initLake()
	err := h.commit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "2", "2026-01-01 00:00:02+00", "1", "2", "0")
	})
	if !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("first failing commit: %v", err)
	}
	fs.n = 100 // the store works again, but the pipeline must not trust it
	err = h.commit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "2", "2026-01-01 00:00:02+00", "1", "2", "0")
	})
	if !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("commit after a failed write: %v", err)
	}
	if h.pipe.Failed() == nil {
		t.Fatal("pipeline does not report its failure")
	}
}

func TestPrimeRestoresChildren(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	// A fresh pipeline primed as a restart primes it — from the catalog
	// loaded from the store — re-encodes the file with its partition value
	// when the file is ended, and counts on from the stored head.
	it := h.kv.ScanPrefix(h.ctx, nil)
	loaded, err := catalog.Load(h.ctx, it, catalog.Options{})
	it.Close()
	if err != nil {
		t.Fatal(err)
	}
	p2 := New(h.kv, Options{})
	if err := p2.PrimeLoaded(h.ctx, loaded, h.kv); err != nil {
		t.Fatal(err)
	}
	if len(p2.heads) != 1 {
		t.Fatalf("primed %d heads, want the lake's 1", len(p2.heads))
	}
	h.pipe.children, h.pipe.heads = p2.children, p2.heads
	h.mustCommit(func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_snapshot", "3", "2026-01-01 00:00:03+00", "1", "2", "1")
		h.insert(tx, "ducklake_snapshot_changes", "3", "deleted_from_table:1", "NULL", "NULL", "NULL")
		h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "3")
	})
	cats, _ := ReadStore(h.ctx, h.kv)
	for _, c := range cats {
		if n := len(c.Rows["ducklake_file_partition_value"]); n != 1 {
			t.Fatalf("%d partition values after re-encoding, want 1", n)
		}
		if c.Head.Commits != 4 {
			t.Fatalf("head commits %d, want 4", c.Head.Commits)
		}
	}
}

// A table without a primary key may hold two equal rows in PostgreSQL, but
// the keyspace stores one row per identity: a second row with a stored or
// staged identity is refused, never silently merged.
func TestDuplicateIdentityIsRefused(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	stats := []string{"0", "1", "1", "10", "10", "0", "1", "9", "NULL", "NULL"}
	err := h.refused(ErrShape, func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_file_column_stats", stats...)
	})
	if !strings.Contains(err.Error(), "already stored") {
		t.Fatalf("error %q", err)
	}
	h.refused(ErrShape, func(tx *catalog.Txn) {
		h.insert(tx, "ducklake_files_scheduled_for_deletion", "7", "x.parquet", "true", "2026-01-01 00:00:05+00")
		h.insert(tx, "ducklake_files_scheduled_for_deletion", "7", "x.parquet", "true", "2026-01-01 00:00:05+00")
	})
}
