package keyspace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// Catalog versions whose table shapes moraine knows: every version DuckLake
// migrates from but the pre-release 0.1. DuckLake creates new catalogs at
// 1.1-dev1 (or 1.0 when pinned) and migrates older ones, with
// AUTOMATIC_MIGRATION, through the statements of its metadata manager,
// which moraine runs like PostgreSQL:
//
//   - 0.2 → 0.3 appends author, commit_message and commit_extra_info to
//     ducklake_snapshot_changes, is_partition to ducklake_name_mapping and
//     extra_stats to the column statistics tables, renames
//     ducklake_file_column_statistics to ducklake_file_column_stats and
//     creates ducklake_schema_versions from the snapshots;
//   - 0.3 → 0.4 adds the macro, sort and variant statistics tables, appends
//     default_value_type and default_value_dialect to ducklake_column,
//     table_id to ducklake_schema_versions and partial_max to the data and
//     delete file tables, and drops the data file table's
//     partial_file_info (its partial_max moves to the new column);
//   - 0.4 → 1.0 changes only the version string;
//   - 1.0 → 1.1-dev1 appends row_group_count to the data and delete file
//     tables, adds ducklake_view_column_tag and renames the inlined tables'
//     metadata columns.
const (
	Version02   = "0.2"
	Version03   = "0.3"
	Version04   = "0.4"
	Version10   = "1.0"
	Version11   = "1.1-dev1"
	VersionNext = Version11 // the newest version moraine knows
)

// Versions lists the catalog versions moraine serves, oldest first.
var Versions = []string{Version02, Version03, Version04, Version10, Version11}

// versionIndex returns v's position in Versions, or -1.
func versionIndex(v string) int {
	for i, k := range Versions {
		if k == v {
			return i
		}
	}
	return -1
}

// KnownVersion reports whether moraine serves catalogs at version v.
func KnownVersion(v string) bool { return versionIndex(v) >= 0 }

// ErrUnknownTable reports a table that is not one of DuckLake's.
var ErrUnknownTable = errors.New("not a DuckLake catalog table")

// ErrBadDef reports a table definition that DuckLake does not create.
var ErrBadDef = errors.New("table definition is not a DuckLake shape")

// TableSpec is moraine's static knowledge of one DuckLake table: where it is
// stored and which columns identify a row.
type TableSpec struct {
	Name string // the table name; for dynamic tables the concrete name
	Kind Kind   // the kind that stores its rows (the parent's kind if Embedded)

	// Columns is the newest known column list in physical order; nil for
	// ducklake_inlined_data_<t>_<v>, whose user columns vary (the first three
	// are always row id, begin and end snapshot).
	Columns []ColumnDef
	// MinColumns is the shortest column prefix a catalog may hold: the column
	// count at the oldest version the table exists in. A catalog whose table
	// has fewer columns than len(Columns) is served at that shorter set.
	MinColumns int
	// Legacy lists the column lists an older version held that are not a
	// prefix of Columns (0.3's data file table). The key, primary key,
	// begin and end columns sit at the same positions in each of them.
	Legacy     [][]ColumnDef
	PrimaryKey []int

	// Begin and End are the begin_snapshot/end_snapshot column indexes of a
	// temporally versioned table, -1 otherwise.
	Begin, End int
	// EntityKey lists the column indexes (after the name fields of dynamic
	// tables) whose values form the key of a row; Table.KeyColumns adds
	// begin_snapshot where it is a key field.
	EntityKey []int
	// Lookup lists the columns of a table without a primary key that
	// DuckLake finds rows by with `=` in its UPDATEs (ducklake_table_stats
	// by table_id, …): the resident catalog keeps a (non-unique) index on
	// them, so that a commit's statistics updates do not scan a table whose
	// rows grow with the number of tables and columns. Empty: no index.
	Lookup []int

	// Parent is set for embedded tables: the table whose value carries the
	// rows. ParentLink pairs (child column, parent column) that must be equal.
	Parent     string
	ParentLink [][2]int
	// Child is set for parent kinds: the embedded table they carry.
	Child string

	// Dynamic tables take identifiers from their name: TableID for
	// ducklake_inlined_data_<t>_<v> and ducklake_inlined_delete_<t>,
	// SchemaVersion for the former.
	Dynamic       bool
	TableID       int64
	SchemaVersion int64
}

// Versioned reports whether rows carry begin/end snapshots and live in the
// current or history subspace by end_snapshot.
func (s *TableSpec) Versioned() bool { return s.End >= 0 }

// Embedded reports whether rows live inside a parent row's value.
func (s *TableSpec) Embedded() bool { return s.Parent != "" }

// keyHasBegin reports whether begin_snapshot is a key field. It is for
// versioned tables without a primary key: DuckLake re-inserts the same
// entity id when it alters an entity (a rename is a new ducklake_table row
// with the same table_id), and the old and new rows may both be current
// while one commit is being translated.
func (s *TableSpec) keyHasBegin() bool { return s.Versioned() && len(s.PrimaryKey) == 0 }

// Column type shorthands for the fixed tables' DDL. DuckLake's templates use
// exactly these five types.
var (
	tBig  = datum.Int8
	tStr  = datum.Varchar
	tBool = datum.Bool
	tUUID = datum.UUID
	tTSTZ = datum.TimestampTZ
)

// cols parses "name:type" items; type is one of b s t u z (bigint, varchar,
// boolean, uuid, timestamptz), with "!" for NOT NULL.
func cols(spec string) []ColumnDef {
	var out []ColumnDef
	for _, item := range strings.Fields(spec) {
		name, typ, _ := strings.Cut(item, ":")
		c := ColumnDef{Name: name}
		if strings.HasSuffix(typ, "!") {
			c.NotNull, typ = true, strings.TrimSuffix(typ, "!")
		}
		switch typ {
		case "b":
			c.Type = tBig
		case "s":
			c.Type = tStr
		case "t":
			c.Type = tBool
		case "u":
			c.Type = tUUID
		case "z":
			c.Type = tTSTZ
		default:
			panic("keyspace: bad column shorthand " + item)
		}
		out = append(out, c)
	}
	return out
}

// fixedSpec describes a fixed table for the table below.
type fixedSpec struct {
	name    string
	kind    Kind
	columns string
	// The table's column history. at lists "version:n" steps: from that
	// version on the table holds the first n columns (0: all of them);
	// before the first step, all of them. legacy, when set, is its column
	// list before 0.4 where that is not a prefix of columns (the data
	// file table's partial_file_info). since is the first version the
	// table exists at ("" for the oldest); legacyName its name before 0.3.
	at         string
	legacy     string
	since      string
	legacyName string
	pk         string // primary key column, or ""
	key        string // entity key columns, space separated
	parent     string // embedded: parent table
	link       string // embedded: "childcol=parentcol ..."
	lookup     string // TableSpec.Lookup columns, space separated
}

// fixedTables is DuckLake's schema at catalog version 1.1-dev1, as created
// by DuckLakeMetadataManager::InitializeDuckLake through the postgres
// extension, with each table's history back to 0.2 (fixedSpec: when it
// appeared, the prefix or legacy column list it had, its older name).
// testdata/shapes/inventory.md holds the captured DDL and
// testdata/versions the older versions'; TestValidateDefInventory,
// TestValidateDefVersions and TestDefsMatchPostgres check them against
// this list.
//
// Key choices (the entity key, documented in docs/storage-format.md):
// tables with a primary key use it (table_id first for per-table files);
// versioned tables without one use their entity id and begin_snapshot;
// log tables use the fields DuckLake treats as unique (one stats row per
// file and column, one option per scope and key, …); the deletion schedule,
// which does hold repeated entries for one file, is keyed by its whole row.
var fixedTables = []fixedSpec{
	{name: "ducklake_metadata", kind: KindOption, columns: "key:s! value:s! scope:s scope_id:b", key: "scope scope_id key"},
	{name: "ducklake_snapshot", kind: KindSnapshot, columns: "snapshot_id:b snapshot_time:z schema_version:b next_catalog_id:b next_file_id:b", pk: "snapshot_id", key: "snapshot_id"},
	{name: "ducklake_snapshot_changes", kind: KindSnapshotChanges, at: "0.2:2 0.3:0", columns: "snapshot_id:b changes_made:s author:s commit_message:s commit_extra_info:s", pk: "snapshot_id", key: "snapshot_id"},
	{name: "ducklake_schema", kind: KindSchema, columns: "schema_id:b schema_uuid:u begin_snapshot:b end_snapshot:b schema_name:s path:s path_is_relative:t", pk: "schema_id", key: "schema_id"},
	{name: "ducklake_table", kind: KindTable, columns: "table_id:b table_uuid:u begin_snapshot:b end_snapshot:b schema_id:b table_name:s path:s path_is_relative:t", key: "table_id", lookup: "table_id"},
	{name: "ducklake_view", kind: KindView, columns: "view_id:b view_uuid:u begin_snapshot:b end_snapshot:b schema_id:b view_name:s dialect:s sql:s column_aliases:s", key: "view_id"},
	{name: "ducklake_tag", kind: KindTag, columns: "object_id:b begin_snapshot:b end_snapshot:b key:s value:s", key: "object_id key"},
	{name: "ducklake_column_tag", kind: KindColumnTag, columns: "table_id:b column_id:b begin_snapshot:b end_snapshot:b key:s value:s", key: "table_id column_id key"},
	{name: "ducklake_data_file", kind: KindDataFile, columns: "data_file_id:b table_id:b begin_snapshot:b end_snapshot:b file_order:b path:s path_is_relative:t file_format:s record_count:b file_size_bytes:b footer_size:b row_id_start:b partition_id:b encryption_key:s mapping_id:b partial_max:b row_group_count:b", at: "0.4:16 1.1-dev1:0", pk: "data_file_id", key: "table_id data_file_id",
		legacy: "data_file_id:b table_id:b begin_snapshot:b end_snapshot:b file_order:b path:s path_is_relative:t file_format:s record_count:b file_size_bytes:b footer_size:b row_id_start:b partition_id:b encryption_key:s partial_file_info:s mapping_id:b"},
	{name: "ducklake_file_column_stats", legacyName: "ducklake_file_column_statistics", at: "0.2:9 0.3:0", kind: KindFileColumnStats, columns: "data_file_id:b table_id:b column_id:b column_size_bytes:b value_count:b null_count:b min_value:s max_value:s contains_nan:t extra_stats:s", key: "table_id data_file_id column_id"},
	{name: "ducklake_file_variant_stats", since: Version04, kind: KindFileVariantStats, columns: "data_file_id:b table_id:b column_id:b variant_path:s shredded_type:s column_size_bytes:b value_count:b null_count:b min_value:s max_value:s contains_nan:t extra_stats:s", key: "table_id data_file_id column_id variant_path"},
	{name: "ducklake_delete_file", kind: KindDeleteFile, columns: "delete_file_id:b table_id:b begin_snapshot:b end_snapshot:b data_file_id:b path:s path_is_relative:t format:s delete_count:b file_size_bytes:b footer_size:b encryption_key:s partial_max:b row_group_count:b", at: "0.2:12 0.4:13 1.1-dev1:0", pk: "delete_file_id", key: "table_id delete_file_id"},
	{name: "ducklake_column", kind: KindColumn, columns: "column_id:b begin_snapshot:b end_snapshot:b table_id:b column_order:b column_name:s column_type:s initial_default:s default_value:s nulls_allowed:t parent_column:b default_value_type:s default_value_dialect:s", at: "0.2:11 0.4:0", key: "table_id column_id", lookup: "table_id column_id"},
	{name: "ducklake_table_stats", kind: KindTableStats, columns: "table_id:b record_count:b next_row_id:b file_size_bytes:b", key: "table_id", lookup: "table_id"},
	{name: "ducklake_table_column_stats", at: "0.2:6 0.3:0", kind: KindTableColumnStats, columns: "table_id:b column_id:b contains_null:t contains_nan:t min_value:s max_value:s extra_stats:s", key: "table_id column_id", lookup: "table_id column_id"},
	{name: "ducklake_partition_info", kind: KindPartition, columns: "partition_id:b table_id:b begin_snapshot:b end_snapshot:b", key: "table_id partition_id"},
	{name: "ducklake_partition_column", kind: KindPartition, columns: "partition_id:b table_id:b partition_key_index:b column_id:b transform:s", parent: "ducklake_partition_info", link: "partition_id=partition_id table_id=table_id"},
	{name: "ducklake_file_partition_value", kind: KindDataFile, columns: "data_file_id:b table_id:b partition_key_index:b partition_value:s", parent: "ducklake_data_file", link: "data_file_id=data_file_id table_id=table_id"},
	{name: "ducklake_files_scheduled_for_deletion", kind: KindScheduledDeletion, columns: "data_file_id:b path:s path_is_relative:t schedule_start:z", key: "data_file_id path path_is_relative schedule_start"},
	{name: "ducklake_inlined_data_tables", kind: KindInlinedTables, columns: "table_id:b table_name:s schema_version:b", key: "table_id schema_version"},
	{name: "ducklake_column_mapping", kind: KindColumnMapping, columns: "mapping_id:b table_id:b type:s", key: "table_id mapping_id"},
	{name: "ducklake_name_mapping", at: "0.2:5 0.3:0", kind: KindNameMapping, columns: "mapping_id:b column_id:b source_name:s target_field_id:b parent_column:b is_partition:t", key: "mapping_id column_id"},
	{name: "ducklake_schema_versions", kind: KindSchemaVersions, columns: "begin_snapshot:b schema_version:b table_id:b", since: Version03, at: "0.3:2 0.4:0", key: "table_id begin_snapshot schema_version"},
	{name: "ducklake_macro", since: Version04, kind: KindMacro, columns: "schema_id:b macro_id:b macro_name:s begin_snapshot:b end_snapshot:b", key: "macro_id"},
	{name: "ducklake_macro_impl", since: Version04, kind: KindMacroImpl, columns: "macro_id:b impl_id:b dialect:s sql:s type:s", key: "macro_id impl_id"},
	{name: "ducklake_macro_parameters", since: Version04, kind: KindMacroParameters, columns: "macro_id:b impl_id:b column_id:b parameter_name:s parameter_type:s default_value:s default_value_type:s", key: "macro_id impl_id column_id parameter_name"},
	{name: "ducklake_sort_info", since: Version04, kind: KindSort, columns: "sort_id:b table_id:b begin_snapshot:b end_snapshot:b", key: "table_id sort_id"},
	{name: "ducklake_sort_expression", since: Version04, kind: KindSort, columns: "sort_id:b table_id:b sort_key_index:b expression:s dialect:s sort_direction:s null_order:s", parent: "ducklake_sort_info", link: "sort_id=sort_id table_id=table_id"},
	{name: "ducklake_view_column_tag", kind: KindViewColumnTag, columns: "view_id:b column_name:s begin_snapshot:b end_snapshot:b key:s value:s", since: Version11, key: "view_id column_name key"},
}

// FixedTableCount is the number of fixed DuckLake tables at VersionNext.
const FixedTableCount = 29

// fixedByName indexes the fixed tables; fixedOrder keeps fixedTables' order
// for FixedDefs; fixedHistory holds each table's column history. They are
// package variables built by buildFixed, so that every init that reads them
// runs after them.
var fixedByName, fixedOrder, fixedHistory = buildFixed()

// legacyByName holds the fixed tables under their names before 0.3 (filled
// by buildFixed): the same kind, columns and keys as the renamed table.
var legacyByName = map[string]*TableSpec{}

// history is when a fixed table exists and which columns it has at each
// version moraine knows.
type history struct {
	since int           // index in Versions of the first version with the table
	at    [][]ColumnDef // the column list at each version, by index in Versions
	// legacyName is the table's name before 0.3 (the file column
	// statistics table was renamed then), "" if it kept its name.
	legacyName string
}

func buildFixed() (map[string]*TableSpec, []*TableSpec, map[string]*history) {
	fixedByName := map[string]*TableSpec{}
	var fixedOrder []*TableSpec
	fixedHistory := map[string]*history{}
	for _, f := range fixedTables {
		s := &TableSpec{Name: f.name, Kind: f.kind, Columns: cols(f.columns), Begin: -1, End: -1}
		idx := func(name string) int {
			for i, c := range s.Columns {
				if c.Name == name {
					return i
				}
			}
			panic("keyspace: " + f.name + " has no column " + name)
		}
		if f.pk != "" {
			s.PrimaryKey = []int{idx(f.pk)}
			s.Columns[s.PrimaryKey[0]].NotNull = true
		}
		h := &history{since: 0, legacyName: f.legacyName}
		if f.since != "" {
			h.since = versionIndex(f.since)
		}
		var legacy []ColumnDef
		if f.legacy != "" {
			legacy = cols(f.legacy)
			for _, pk := range s.PrimaryKey {
				legacy[pk].NotNull = true
			}
			s.Legacy = append(s.Legacy, legacy)
		}
		n := 0
		steps := strings.Fields(f.at)
		s.MinColumns = len(s.Columns)
		for v, version := range Versions {
			for len(steps) > 0 && strings.HasPrefix(steps[0], version+":") {
				n, _ = strconv.Atoi(strings.TrimPrefix(steps[0], version+":"))
				steps = steps[1:]
			}
			c := s.Columns
			switch {
			case legacy != nil && v < versionIndex(Version04):
				c = legacy
			case n > 0:
				c = s.Columns[:n:n]
			}
			h.at = append(h.at, c)
			if v >= h.since && (legacy == nil || v >= versionIndex(Version04)) {
				s.MinColumns = min(s.MinColumns, len(c))
			}
		}
		if len(steps) > 0 {
			panic("keyspace: " + f.name + ": bad column history " + f.at)
		}
		for _, k := range strings.Fields(f.key) {
			i := idx(k)
			switch s.Columns[i].Type.Kind() {
			case datum.KindInt, datum.KindText, datum.KindBool, datum.KindTimestampTZ:
			default:
				panic("keyspace: " + f.name + "." + k + " cannot be a key field")
			}
			s.EntityKey = append(s.EntityKey, i)
		}
		for _, k := range strings.Fields(f.lookup) {
			if f.pk != "" {
				panic("keyspace: " + f.name + " has a primary key and a lookup index")
			}
			s.Lookup = append(s.Lookup, idx(k))
		}
		for i, c := range s.Columns {
			switch c.Name {
			case "begin_snapshot":
				s.Begin = i
			case "end_snapshot":
				s.End = i
			}
		}
		if s.End < 0 {
			// Append-only tables with a begin_snapshot (schema_versions) are
			// not temporally versioned: they have no end.
			s.Begin = -1
		}
		for _, l := range s.Legacy {
			// A legacy layout must agree with Columns wherever the key, the
			// primary key and the snapshot columns are read by position.
			for _, i := range append(append([]int{s.Begin, s.End}, s.EntityKey...), s.PrimaryKey...) {
				if i >= 0 && (i >= len(l) || l[i] != s.Columns[i]) {
					panic("keyspace: " + f.name + ": legacy layout moves column " + s.Columns[i].Name)
				}
			}
		}
		if f.parent != "" {
			s.Parent = f.parent
			parent := fixedByName[f.parent]
			parent.Child = f.name
			for _, l := range strings.Fields(f.link) {
				c, p, _ := strings.Cut(l, "=")
				pi := -1
				for i, pc := range parent.Columns {
					if pc.Name == p {
						pi = i
					}
				}
				s.ParentLink = append(s.ParentLink, [2]int{idx(c), pi})
			}
		}
		fixedByName[f.name] = s
		fixedOrder = append(fixedOrder, s)
		fixedHistory[f.name] = h
		if f.legacyName != "" {
			old := *s
			old.Name = f.legacyName
			legacyByName[f.legacyName] = &old
		}
	}
	if len(fixedOrder) != FixedTableCount {
		panic("keyspace: fixed table list is incomplete")
	}
	return fixedByName, fixedOrder, fixedHistory
}

// Name prefixes of DuckLake's dynamic per-table tables.
const (
	InlinedDataPrefix   = "ducklake_inlined_data_"
	InlinedDeletePrefix = "ducklake_inlined_delete_"
)

// Metadata column names of inlined data tables, at 1.0 and from 1.1-dev1.
var (
	inlinedMeta10 = [3]string{"row_id", "begin_snapshot", "end_snapshot"}
	inlinedMeta11 = [3]string{"_ducklake_row_id", "_ducklake_begin_snapshot", "_ducklake_end_snapshot"}
)

// InlinedDataTableName is DuckLake's name for the inlined data of table t at
// schema version v.
func InlinedDataTableName(tableID, schemaVersion int64) string {
	return InlinedDataPrefix + strconv.FormatInt(tableID, 10) + "_" + strconv.FormatInt(schemaVersion, 10)
}

// InlinedDeleteTableName is DuckLake's name for the inlined deletes of table t.
func InlinedDeleteTableName(tableID int64) string {
	return InlinedDeletePrefix + strconv.FormatInt(tableID, 10)
}

// parseID parses a decimal id as DuckLake prints it (no sign, no leading
// zeros), so that a name maps to exactly one id and back.
func parseID(s string) (int64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Known returns moraine's knowledge of the DuckLake table called name: one of
// the 29 fixed tables, ducklake_inlined_data_<t>_<v> or
// ducklake_inlined_delete_<t>. The returned spec must not be modified.
func Known(name string) (*TableSpec, bool) {
	if s, ok := fixedByName[name]; ok {
		return s, true
	}
	if s, ok := legacyByName[name]; ok {
		return s, true
	}
	if rest, ok := strings.CutPrefix(name, InlinedDataPrefix); ok {
		ts, vs, ok := strings.Cut(rest, "_")
		t, ok1 := parseID(ts)
		v, ok2 := parseID(vs)
		if !ok || !ok1 || !ok2 {
			return nil, false
		}
		return &TableSpec{
			Name: name, Kind: KindInlinedRow, MinColumns: 3, Begin: 1, End: 2,
			EntityKey: []int{0}, Dynamic: true, TableID: t, SchemaVersion: v,
		}, true
	}
	if ts, ok := strings.CutPrefix(name, InlinedDeletePrefix); ok {
		t, ok := parseID(ts)
		if !ok {
			return nil, false
		}
		return &TableSpec{
			Name: name, Kind: KindInlinedDelete, Columns: inlinedDeleteColumns, MinColumns: 3,
			Begin: -1, End: -1, EntityKey: []int{0, 1, 2}, Dynamic: true, TableID: t,
		}, true
	}
	return nil, false
}

var inlinedDeleteColumns = cols("file_id:b row_id:b begin_snapshot:b")

// FixedDefs returns the definitions of the fixed tables of a fresh catalog at
// version (one of Versions) in schema, in DuckLake's creation order.
func FixedDefs(schema, version string) ([]TableDef, error) {
	vi := versionIndex(version)
	if vi < 0 {
		return nil, fmt.Errorf("keyspace: unknown DuckLake catalog version %q", version)
	}
	var out []TableDef
	for _, s := range fixedOrder {
		h := fixedHistory[s.Name]
		if vi < h.since {
			continue
		}
		name := s.Name
		if h.legacyName != "" && vi < versionIndex(Version03) {
			name = h.legacyName
		}
		d := TableDef{Schema: schema, Name: name, Columns: append([]ColumnDef(nil), h.at[vi]...),
			PrimaryKey: append([]int(nil), s.PrimaryKey...)}
		out = append(out, d)
	}
	return out, nil
}

// InlinedDataDef returns the definition DuckLake creates for the inlined data
// of table tableID at schemaVersion with the given user columns, at catalog
// version (which decides the metadata column names).
func InlinedDataDef(schema, version string, tableID, schemaVersion int64, user []ColumnDef) TableDef {
	meta := inlinedMeta11
	if versionIndex(version) < versionIndex(Version11) {
		meta = inlinedMeta10
	}
	d := TableDef{Schema: schema, Name: InlinedDataTableName(tableID, schemaVersion)}
	for _, n := range meta {
		d.Columns = append(d.Columns, ColumnDef{Name: n, Type: datum.Int8})
	}
	d.Columns = append(d.Columns, user...)
	return d
}

// InlinedDeleteDef returns the definition of ducklake_inlined_delete_<t>.
func InlinedDeleteDef(schema string, tableID int64) TableDef {
	return TableDef{Schema: schema, Name: InlinedDeleteTableName(tableID),
		Columns: append([]ColumnDef(nil), inlinedDeleteColumns...)}
}

// ValidateDef accepts exactly the table shapes DuckLake creates: a fixed
// table with a prefix (at least its columns at the oldest version moraine
// knows) of its known column list or one of its legacy layouts, in order,
// with the same types, NOT NULLs and primary key; an inlined data table
// with the three metadata columns (each under its 1.0 or 1.1 name, since the
// 1.1 migration renames them one by one) followed by user columns of types
// moraine supports; an inlined delete table. Anything else is refused with an
// error wrapping ErrUnknownTable or ErrBadDef that names the table and column:
// moraine holds a DuckLake catalog only.
func ValidateDef(def *TableDef) error {
	spec, ok := Known(def.Name)
	if !ok {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: %q (moraine stores only DuckLake's own tables)", ErrUnknownTable, def.Name)
	}
	if def.Schema == "" {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q has no schema", ErrBadDef, def.Name)
	}
	seen := map[string]bool{}
	for _, c := range def.Columns {
		if seen[c.Name] {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q appears twice", ErrBadDef, def.Name, c.Name)
		}
		seen[c.Name] = true
		if !c.Type.Known() {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q has unsupported type %s", ErrBadDef, def.Name, c.Name, c.Type)
		}
	}
	if spec.Kind == KindInlinedRow {
		return validateInlinedData(def)
	}
	err := validateFixed(def, spec, spec.Columns, spec.MinColumns)
	for _, l := range spec.Legacy {
		if err != nil && validateFixed(def, spec, l, len(l)) == nil {
			return nil
		}
	}
	return err
}

// validateFixed checks def against the column list want, of which it must
// hold at least the first min columns.
func validateFixed(def *TableDef, spec *TableSpec, want []ColumnDef, min int) error {
	if len(def.Columns) < min || len(def.Columns) > len(want) {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q has %d columns, DuckLake creates it with %d to %d",
			ErrBadDef, def.Name, len(def.Columns), min, len(want))
	}
	for i, c := range def.Columns {
		w := want[i]
		if c.Name != w.Name {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %d is %q, DuckLake's is %q", ErrBadDef, def.Name, i+1, c.Name, w.Name)
		}
		if c.Type != w.Type {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q has type %s, DuckLake's is %s", ErrBadDef, def.Name, c.Name, c.Type, w.Type)
		}
		isPK := len(spec.PrimaryKey) == 1 && spec.PrimaryKey[0] == i
		if c.NotNull != w.NotNull && !isPK {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q NOT NULL is %v, DuckLake's is %v", ErrBadDef, def.Name, c.Name, c.NotNull, w.NotNull)
		}
	}
	if !sameInts(def.PrimaryKey, spec.PrimaryKey) {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: primary key %s, DuckLake's is %s", ErrBadDef, def.Name,
			colNames(def, def.PrimaryKey), colNames(def, spec.PrimaryKey))
	}
	return nil
}

func validateInlinedData(def *TableDef) error {
	if len(def.Columns) < 3 {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q has %d columns, an inlined data table starts with 3 metadata columns",
			ErrBadDef, def.Name, len(def.Columns))
	}
	for i := 0; i < 3; i++ {
		c := def.Columns[i]
		if c.Name != inlinedMeta10[i] && c.Name != inlinedMeta11[i] {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %d is %q, DuckLake's is %q (or %q before 1.1)",
				ErrBadDef, def.Name, i+1, c.Name, inlinedMeta11[i], inlinedMeta10[i])
		}
		if c.Type != datum.Int8 || c.NotNull {
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q must be a nullable bigint", ErrBadDef, def.Name, c.Name)
		}
	}
	for _, c := range def.Columns[3:] {
		if c.NotNull {
			// DuckLake's inlined DDL carries types only: constraints stay in
			// ducklake_column.nulls_allowed.
			return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: column %q is NOT NULL; DuckLake's inlined tables have no constraints",
				ErrBadDef, def.Name, c.Name)
		}
	}
	if len(def.PrimaryKey) != 0 {
		return pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q: inlined data tables have no primary key", ErrBadDef, def.Name)
	}
	return nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func colNames(def *TableDef, idx []int) string {
	if len(idx) == 0 {
		return "(none)"
	}
	var names []string
	for _, i := range idx {
		if i >= 0 && i < len(def.Columns) {
			names = append(names, def.Columns[i].Name)
		} else {
			names = append(names, "#"+strconv.Itoa(i))
		}
	}
	return "(" + strings.Join(names, ", ") + ")"
}
