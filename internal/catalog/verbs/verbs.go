// Package verbs authors DuckLake commits against the resident catalog
// without SQL: the rows DuckLake's metadata manager would write for create
// schema/table, register data files (with column stats and partition
// values), end or hard-delete files, set or clear partitioning and sorting,
// each commit minting one snapshot. Tests and tools (moraine bench catalog)
// use it to build catalogs.
//
// Classification follows DuckLake (RFC 0013): creating tables and setting or
// clearing partitioning change the schema (schema_version + 1, a
// ducklake_schema_versions row); setting or clearing sorting does not.
package verbs

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Lake is a DuckLake catalog in one (database, metadata schema) of a
// catalog.Database, with the counters of its latest snapshot.
type Lake struct {
	db            *catalog.Database
	schema        string
	snapshot      int64
	schemaVersion int64
	nextCatalogID int64
	nextFileID    int64
	nextRowID     map[int64]int64 // per table: ducklake_table_stats.next_row_id
	// Now gives snapshot times; tests fix it for reproducible rows.
	Now func() time.Time
}

var (
	I = datum.IntValue
	S = datum.TextValue
	N = datum.Null
	B = datum.BoolValue
)

// Init creates the DuckLake tables (catalog version 1.1-dev1) in schema and
// writes the seed rows of snapshot 0, as DuckLake's initialisation does.
func Init(ctx context.Context, db *catalog.Database, schema, dataPath string) (*Lake, error) {
	l := &Lake{db: db, schema: schema, nextCatalogID: 1, nextRowID: map[int64]int64{}, Now: time.Now}
	tx := db.Begin()
	if _, ok := tx.Schema(schema); !ok {
		if err := tx.CreateSchema(schema); err != nil {
			return nil, err
		}
	}
	defs, err := keyspace.FixedDefs(schema, keyspace.Version11)
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if err := tx.CreateTable(d); err != nil {
			return nil, fmt.Errorf("init: %w", err)
		}
	}
	ins := func(table string, vals ...datum.Value) {
		if err == nil {
			_, err = tx.InsertRow(schema, table, vals)
		}
	}
	ins("ducklake_snapshot", I(0), l.now(), I(0), I(1), I(0))
	ins("ducklake_snapshot_changes", I(0), S(`created_schema:"main"`), N, N, N)
	ins("ducklake_metadata", S("version"), S(keyspace.Version11), N, N)
	ins("ducklake_metadata", S("created_by"), S("moraine verbs"), N, N)
	ins("ducklake_metadata", S("data_path"), S(dataPath), N, N)
	ins("ducklake_metadata", S("encrypted"), S("false"), N, N)
	ins("ducklake_schema", I(0), uuid(), I(0), N, S("main"), S("main/"), B(true))
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	return l, nil
}

func (l *Lake) now() datum.Value {
	t := l.Now()
	return datum.TimestampTZValue(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())
}

func uuid() datum.Value {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return datum.UUIDValue(u)
}

// Snapshot is the id of the latest snapshot the Lake committed.
func (l *Lake) Snapshot() int64 { return l.snapshot }

// SchemaVersion is the schema_version of the latest snapshot.
func (l *Lake) SchemaVersion() int64 { return l.schemaVersion }

// Database returns the catalog database.
func (l *Lake) Database() *catalog.Database { return l.db }

type row struct {
	table string
	vals  []datum.Value
}

type update struct {
	table string
	match func([]datum.Value) bool
	set   func([]datum.Value)
	// pk, when set, is the row's primary key: found in O(log n).
	pk *int64
}

// Commit is one DuckLake commit being authored; Commit mints its snapshot.
type Commit struct {
	l             *Lake
	snap          int64
	nextCatalogID int64
	nextFileID    int64
	schemaChanged map[int64]bool
	changes       []string
	inserts       []row
	updates       []update
	deletes       []update
	statsDelta    map[int64][3]int64 // table → record_count, rows, file_size
}

// Begin starts a commit on top of the latest snapshot.
func (l *Lake) Begin() *Commit {
	return &Commit{l: l, snap: l.snapshot + 1, nextCatalogID: l.nextCatalogID, nextFileID: l.nextFileID,
		schemaChanged: map[int64]bool{}, statsDelta: map[int64][3]int64{}}
}

func (c *Commit) insert(table string, vals ...datum.Value) {
	c.inserts = append(c.inserts, row{table, vals})
}

// Column is a user column of a DuckLake table.
type Column struct {
	Name string
	Type string // DuckLake type name: int64, varchar, timestamp, …
}

// CreateTable registers a table with its columns and returns its table_id
// and column ids (allocated from next_catalog_id as DuckLake does).
func (c *Commit) CreateTable(schemaID int64, schemaName, name string, cols []Column) (int64, []int64) {
	id := c.nextCatalogID
	c.nextCatalogID++
	c.insert("ducklake_table", I(id), uuid(), I(c.snap), N, I(schemaID), S(name), S(name+"/"), B(true))
	ids := make([]int64, len(cols))
	for i, col := range cols {
		ids[i] = int64(i + 1)
		c.insert("ducklake_column", I(ids[i]), I(c.snap), N, I(id), I(int64(i)), S(col.Name), S(col.Type), N, N, B(true), N, N, N)
	}
	c.changes = append(c.changes, "created_table:"+quoteIdent(schemaName)+"."+quoteIdent(name))
	c.schemaChanged[id] = true
	return id, ids
}

// ColumnStats are one file's statistics for one column.
type ColumnStats struct {
	ColumnID, SizeBytes, ValueCount, NullCount int64
	Min, Max                                   string
}

// DataFile is a Parquet file to register.
type DataFile struct {
	TableID, RecordCount, FileSize, FooterSize int64
	Path                                       string
	PartitionID                                *int64   // the partition spec it was written under
	PartitionValues                            []string // one per partition key, in key order
	Stats                                      []ColumnStats
}

// AddDataFile registers f and returns its data_file_id. Row ids continue
// the table's next_row_id.
func (c *Commit) AddDataFile(f DataFile) int64 {
	id := c.nextFileID
	c.nextFileID++
	d := c.statsDelta[f.TableID]
	rowStart := c.l.nextRowID[f.TableID] + d[1]
	part := N
	if f.PartitionID != nil {
		part = I(*f.PartitionID)
	}
	c.insert("ducklake_data_file", I(id), I(f.TableID), I(c.snap), N, N, S(f.Path), B(true), S("parquet"),
		I(f.RecordCount), I(f.FileSize), I(f.FooterSize), I(rowStart), part, N, N, N, I(1))
	for _, s := range f.Stats {
		c.insert("ducklake_file_column_stats", I(id), I(f.TableID), I(s.ColumnID), I(s.SizeBytes), I(s.ValueCount),
			I(s.NullCount), S(s.Min), S(s.Max), N, N)
	}
	for i, v := range f.PartitionValues {
		c.insert("ducklake_file_partition_value", I(id), I(f.TableID), I(int64(i)), S(v))
	}
	c.statsDelta[f.TableID] = [3]int64{d[0] + f.RecordCount, d[1] + f.RecordCount, d[2] + f.FileSize}
	c.changes = append(c.changes, fmt.Sprintf("inserted_into_table:%d", f.TableID))
	return id
}

// DeleteFile is a delete file (positional deletes against one data file).
type DeleteFile struct {
	TableID, DataFileID, DeleteCount, FileSize, FooterSize int64
	Path                                                   string
	Format                                                 string // "parquet" or "puffin"; "" means parquet
}

// AddDeleteFile registers f and returns its delete_file_id (allocated from
// next_file_id, as DuckLake does).
func (c *Commit) AddDeleteFile(f DeleteFile) int64 {
	id := c.nextFileID
	c.nextFileID++
	format := f.Format
	if format == "" {
		format = "parquet"
	}
	c.insert("ducklake_delete_file", I(id), I(f.TableID), I(c.snap), N, I(f.DataFileID), S(f.Path), B(true), S(format),
		I(f.DeleteCount), I(f.FileSize), I(f.FooterSize), N, N, I(1))
	c.changes = append(c.changes, fmt.Sprintf("deleted_from_table:%d", f.TableID))
	return id
}

// EndDeleteFile ends a delete file at this snapshot (a replaced or
// compacted-away delete file moves to history).
func (c *Commit) EndDeleteFile(tableID, deleteFileID int64) {
	snap := c.snap
	c.updates = append(c.updates, update{table: "ducklake_delete_file", match: current(0, 3, deleteFileID),
		set: func(v []datum.Value) { v[3] = I(snap) }, pk: &deleteFileID})
	c.changes = append(c.changes, fmt.Sprintf("deleted_from_table:%d", tableID))
}

func colIs(i int, v int64) func([]datum.Value) bool {
	return func(vals []datum.Value) bool { return !vals[i].IsNull() && vals[i].Int() == v }
}

func current(i, end int, v int64) func([]datum.Value) bool {
	return func(vals []datum.Value) bool { return vals[end].IsNull() && !vals[i].IsNull() && vals[i].Int() == v }
}

// EndDataFile ends a data file at this snapshot (UPDATE … SET end_snapshot).
func (c *Commit) EndDataFile(tableID, fileID int64) {
	snap := c.snap
	c.updates = append(c.updates, update{table: "ducklake_data_file", match: current(0, 3, fileID),
		set: func(v []datum.Value) { v[3] = I(snap) }, pk: &fileID})
	c.changes = append(c.changes, fmt.Sprintf("deleted_from_table:%d", tableID))
}

// DeleteDataFile hard-deletes a data file with its stats and partition
// values (expire/cleanup and compaction merges do this).
func (c *Commit) DeleteDataFile(fileID int64) {
	c.deletes = append(c.deletes, update{table: "ducklake_data_file", match: colIs(0, fileID), pk: &fileID})
	for _, t := range []string{"ducklake_file_column_stats", "ducklake_file_partition_value"} {
		c.deletes = append(c.deletes, update{table: t, match: colIs(0, fileID)})
	}
}

// PartitionColumn is one key of a partition spec.
type PartitionColumn struct {
	ColumnID  int64
	Transform string // verbatim: identity, year, bucket(16), …
}

// SetPartitioning replaces the table's partition spec (ending the current
// one) and returns the new partition_id. It changes the schema.
func (c *Commit) SetPartitioning(tableID int64, cols []PartitionColumn) int64 {
	c.endSpec("ducklake_partition_info", tableID)
	id := c.nextCatalogID
	c.nextCatalogID++
	c.insert("ducklake_partition_info", I(id), I(tableID), I(c.snap), N)
	for i, pc := range cols {
		c.insert("ducklake_partition_column", I(id), I(tableID), I(int64(i)), I(pc.ColumnID), S(pc.Transform))
	}
	c.changes = append(c.changes, fmt.Sprintf("altered_table:%d", tableID))
	c.schemaChanged[tableID] = true
	return id
}

// ClearPartitioning is RESET PARTITIONED BY, which DuckLake issues as a
// set-to-empty (RFC 0013): the current spec ends and a spec with no columns
// becomes live. It returns that spec's partition_id; it changes the schema.
func (c *Commit) ClearPartitioning(tableID int64) int64 {
	return c.SetPartitioning(tableID, nil)
}

// SortExpression is one key of a sort spec, stored verbatim.
type SortExpression struct {
	Expression, Direction, NullOrder string
}

// SetSorting replaces the table's sort spec and returns its sort_id. It
// does not change the schema (RFC 0013).
func (c *Commit) SetSorting(tableID int64, exprs []SortExpression) int64 {
	c.endSpec("ducklake_sort_info", tableID)
	id := c.nextCatalogID
	c.nextCatalogID++
	c.insert("ducklake_sort_info", I(id), I(tableID), I(c.snap), N)
	for i, e := range exprs {
		c.insert("ducklake_sort_expression", I(id), I(tableID), I(int64(i)), S(e.Expression), S("duckdb"), S(e.Direction), S(e.NullOrder))
	}
	c.changes = append(c.changes, fmt.Sprintf("altered_table:%d", tableID))
	return id
}

// ClearSorting ends the table's sort spec; no schema change.
func (c *Commit) ClearSorting(tableID int64) {
	c.endSpec("ducklake_sort_info", tableID)
	c.changes = append(c.changes, fmt.Sprintf("altered_table:%d", tableID))
}

func (c *Commit) endSpec(table string, tableID int64) {
	snap := c.snap
	c.updates = append(c.updates, update{table: table, match: current(1, 3, tableID), set: func(v []datum.Value) { v[3] = I(snap) }})
}

// Commit mints the snapshot: the ducklake_snapshot row first (as DuckLake
// sends it), then the changes, the ends and hard deletes, the staged rows,
// the table stats and schema version rows; then commits the transaction.
func (c *Commit) Commit(ctx context.Context) (int64, error) {
	l := c.l
	tx := l.db.Begin()
	sv := l.schemaVersion
	if len(c.schemaChanged) > 0 {
		sv++
	}
	var err error
	ins := func(table string, vals ...datum.Value) {
		if err == nil {
			_, err = tx.InsertRow(l.schema, table, vals)
		}
	}
	ins("ducklake_snapshot", I(c.snap), l.now(), I(sv), I(c.nextCatalogID), I(c.nextFileID))
	ins("ducklake_snapshot_changes", I(c.snap), changesMade(c.changes), N, N, N)
	// Ends and hard deletes apply to rows of earlier snapshots, so they run
	// before this commit's inserts (a new spec must not end itself).
	for _, u := range c.updates {
		if err == nil {
			err = c.apply(tx, u, false)
		}
	}
	for _, u := range c.deletes {
		if err == nil {
			err = c.apply(tx, u, true)
		}
	}
	for _, r := range c.inserts {
		ins(r.table, r.vals...)
	}
	if len(c.statsDelta) > 0 && err == nil {
		err = c.bumpStats(tx)
	}
	if len(c.schemaChanged) > 0 {
		for tid := range c.schemaChanged {
			if tid >= 0 {
				ins("ducklake_schema_versions", I(c.snap), I(sv), I(tid))
			}
		}
	}
	if err != nil {
		tx.Rollback()
		return 0, fmt.Errorf("verbs: snapshot %d: %w", c.snap, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("verbs: snapshot %d: %w", c.snap, err)
	}
	l.snapshot, l.schemaVersion, l.nextCatalogID, l.nextFileID = c.snap, sv, c.nextCatalogID, c.nextFileID
	for tid, d := range c.statsDelta {
		l.nextRowID[tid] += d[1]
	}
	return c.snap, nil
}

// changeOrder is the order DuckLake writes changes_made entries in.
var changeOrder = []string{"dropped_schema", "dropped_table", "dropped_view", "created_schema",
	"created_table", "created_view", "created_scalar_macro", "created_table_macro",
	"dropped_scalar_macro", "dropped_table_macro", "inserted_into_table", "deleted_from_table",
	"altered_table", "altered_view"}

// changesMade renders the changes_made value: distinct entries in DuckLake's
// order (stable within a type), NULL when there are none.
func changesMade(cs []string) datum.Value {
	rank := func(e string) int {
		typ, _, _ := strings.Cut(e, ":")
		for i, t := range changeOrder {
			if t == typ {
				return i
			}
		}
		return len(changeOrder)
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range cs {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return N
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return S(strings.Join(out, ","))
}

// quoteIdent quotes a name as changes_made does: double quotes, embedded
// quotes doubled.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// apply runs an UPDATE (or DELETE) over the rows u matches.
func (c *Commit) apply(tx *catalog.Txn, u update, del bool) error {
	t, err := tx.Table(c.l.schema, u.table)
	if err != nil {
		return err
	}
	type hit struct {
		c    catalog.CTID
		vals []datum.Value
	}
	var hits []hit
	scan := t.Scan
	if u.pk != nil && t.HasPrimaryKey() {
		// Found through the primary key index.
		scan = func(fn func(catalog.CTID, datum.Row) bool) {
			if ct, r, ok := t.LookupKey([]datum.Value{I(*u.pk)}); ok {
				fn(ct, r)
			}
		}
	}
	scan(func(ct catalog.CTID, r datum.Row) bool {
		vals, e := r.Decode(t.Types(), nil)
		if e != nil {
			err = e
			return false
		}
		if u.match(vals) {
			hits = append(hits, hit{ct, vals})
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, h := range hits {
		if del {
			err = tx.DeleteRow(c.l.schema, u.table, h.c)
		} else {
			u.set(h.vals)
			_, err = tx.UpdateRow(c.l.schema, u.table, h.c, h.vals)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// bumpStats inserts or updates the ducklake_table_stats row of every table
// the commit touched, finding the existing rows in one scan (a scan per
// table made commits O(tables × touched) on catalogs of many tables).
func (c *Commit) bumpStats(tx *catalog.Txn) error {
	t, err := tx.Table(c.l.schema, "ducklake_table_stats")
	if err != nil {
		return err
	}
	type at struct {
		c    catalog.CTID
		vals []datum.Value
	}
	found := make(map[int64]at, len(c.statsDelta))
	t.Scan(func(ct catalog.CTID, r datum.Row) bool {
		v, e := r.Column(t.Types(), 0)
		if e != nil {
			err = e
			return false
		}
		if _, ok := c.statsDelta[v.Int()]; ok {
			vals, e := r.Decode(t.Types(), nil)
			if e != nil {
				err = e
				return false
			}
			found[v.Int()] = at{ct, vals}
		}
		return len(found) < len(c.statsDelta)
	})
	if err != nil {
		return err
	}
	// Map order would make the heap layout (and so the ctids) differ from
	// run to run: go by table id.
	ids := make([]int64, 0, len(c.statsDelta))
	for tid := range c.statsDelta {
		ids = append(ids, tid)
	}
	slices.Sort(ids)
	for _, tid := range ids {
		d := c.statsDelta[tid]
		f, ok := found[tid]
		if !ok {
			if _, err := tx.InsertRow(c.l.schema, "ducklake_table_stats", []datum.Value{I(tid), I(d[0]), I(c.l.nextRowID[tid] + d[1]), I(d[2])}); err != nil {
				return err
			}
			continue
		}
		vals := f.vals
		vals[1], vals[2], vals[3] = I(vals[1].Int()+d[0]), I(vals[2].Int()+d[1]), I(vals[3].Int()+d[2])
		if _, err := tx.UpdateRow(c.l.schema, "ducklake_table_stats", f.c, vals); err != nil {
			return err
		}
	}
	return nil
}
