package keyspace

import "fmt"

// Kind is the byte after the catalog id in every key: which record family
// the key belongs to. The values are part of the storage format and must not
// change; a retired kind keeps its number reserved.
type Kind byte

// Kinds of the catalog's own metadata. They sort before the DuckLake kinds, so
// one scan of a catalog's prefix meets its head and table definitions before
// any row.
const (
	KindRegistry Kind = 0x01 // store-global (catalog id 0): (database, schema) → catalog id
	KindMeta     Kind = 0x02 // named records: the catalog's head, the store's next catalog id
	KindTableDef Kind = 0x03 // one TableDef per table of the catalog
	KindBranch   Kind = 0x04 // store-global: branch database name → parent and catalogs (branch.go)
)

// Kinds of DuckLake rows. Comments name the table(s) stored.
const (
	KindSnapshot          Kind = 0x10 // ducklake_snapshot
	KindSnapshotChanges   Kind = 0x11 // ducklake_snapshot_changes
	KindOption            Kind = 0x12 // ducklake_metadata
	KindSchema            Kind = 0x13 // ducklake_schema (versioned)
	KindTable             Kind = 0x14 // ducklake_table (versioned)
	KindView              Kind = 0x15 // ducklake_view (versioned)
	KindTag               Kind = 0x16 // ducklake_tag (versioned)
	KindColumnTag         Kind = 0x17 // ducklake_column_tag (versioned)
	KindViewColumnTag     Kind = 0x18 // ducklake_view_column_tag (versioned, 1.1)
	KindColumn            Kind = 0x19 // ducklake_column (versioned)
	KindDataFile          Kind = 0x1A // ducklake_data_file (versioned) + embedded ducklake_file_partition_value
	KindFileColumnStats   Kind = 0x1B // ducklake_file_column_stats
	KindFileVariantStats  Kind = 0x1C // ducklake_file_variant_stats
	KindDeleteFile        Kind = 0x1D // ducklake_delete_file (versioned)
	KindPartition         Kind = 0x1E // ducklake_partition_info (versioned) + embedded ducklake_partition_column
	KindSort              Kind = 0x1F // ducklake_sort_info (versioned) + embedded ducklake_sort_expression
	KindTableStats        Kind = 0x20 // ducklake_table_stats
	KindTableColumnStats  Kind = 0x21 // ducklake_table_column_stats
	KindScheduledDeletion Kind = 0x22 // ducklake_files_scheduled_for_deletion
	KindInlinedTables     Kind = 0x23 // ducklake_inlined_data_tables
	KindInlinedRow        Kind = 0x24 // ducklake_inlined_data_<t>_<v> (versioned)
	KindInlinedDelete     Kind = 0x25 // ducklake_inlined_delete_<t>
	KindColumnMapping     Kind = 0x26 // ducklake_column_mapping
	KindNameMapping       Kind = 0x27 // ducklake_name_mapping
	KindSchemaVersions    Kind = 0x28 // ducklake_schema_versions
	KindMacro             Kind = 0x29 // ducklake_macro (versioned)
	KindMacroImpl         Kind = 0x2A // ducklake_macro_impl
	KindMacroParameters   Kind = 0x2B // ducklake_macro_parameters
)

// Subspace splits a versioned kind: a row with end_snapshot NULL lives under
// a current key; a row with end_snapshot set lives under a history key that
// also carries end_snapshot.
type Subspace byte

const (
	SubNone    Subspace = 0 // unversioned kinds have no subspace byte
	SubCurrent Subspace = 0x01
	SubHistory Subspace = 0x02
)

var kindNames = map[Kind]string{
	KindRegistry: "registry", KindMeta: "meta", KindTableDef: "tabledef", KindBranch: "branch",
	KindSnapshot: "snapshot", KindSnapshotChanges: "snapchanges", KindOption: "option",
	KindSchema: "schema", KindTable: "table", KindView: "view", KindTag: "tag",
	KindColumnTag: "coltag", KindViewColumnTag: "viewcoltag", KindColumn: "column",
	KindDataFile: "file", KindFileColumnStats: "fstat", KindFileVariantStats: "fvstat",
	KindDeleteFile: "delfile", KindPartition: "partition", KindSort: "sort",
	KindTableStats: "tstat", KindTableColumnStats: "tcstat", KindScheduledDeletion: "gcfile",
	KindInlinedTables: "inltab", KindInlinedRow: "inlrow", KindInlinedDelete: "inldel",
	KindColumnMapping: "mapping", KindNameMapping: "namemap", KindSchemaVersions: "schemaver",
	KindMacro: "macro", KindMacroImpl: "macroimpl", KindMacroParameters: "macroparam",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(0x%02x)", byte(k))
}

// kindInfo is what the decoder needs to know about a kind, indexed by kind
// byte so that the load path does no map lookups.
type kindInfo struct {
	row       bool   // the kind stores DuckLake rows
	versioned bool   // it has current/history subspaces
	table     string // the table whose rows own its keys ("" for dynamic kinds)
	legacy    string // the table's name before catalog version 0.3, if another
}

var kinds = buildKinds()

func buildKinds() (out [256]kindInfo) {
	out[KindInlinedRow] = kindInfo{row: true, versioned: true}
	out[KindInlinedDelete] = kindInfo{row: true}
	for _, s := range fixedOrder {
		if !s.Embedded() {
			out[s.Kind] = kindInfo{row: true, versioned: s.Versioned(), table: s.Name, legacy: fixedHistory[s.Name].legacyName}
		}
	}
	return out
}

// KindTables returns the names a fixed table whose rows own kind k's keys
// has had: its name and, if DuckLake renamed it, its older name.
func KindTables(k Kind) []string {
	if kinds[k].legacy != "" {
		return []string{kinds[k].table, kinds[k].legacy}
	}
	return []string{kinds[k].table}
}

// IsRowKind reports whether k stores DuckLake rows.
func (k Kind) IsRowKind() bool { return kinds[k].row }

// Versioned reports whether k has current and history subspaces.
func (k Kind) Versioned() bool { return kinds[k].versioned }
