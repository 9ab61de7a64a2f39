package keyspace

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/replay"
)

func TestKnownFixedTables(t *testing.T) {
	for _, v := range []struct {
		version string
		n       int
	}{{Version02, FixedTableCount - 8}, {Version03, FixedTableCount - 7}, {Version04, FixedTableCount - 1}, {Version10, FixedTableCount - 1}, {Version11, FixedTableCount}} {
		defs, err := FixedDefs("public", v.version)
		if err != nil {
			t.Fatal(err)
		}
		if len(defs) != v.n {
			t.Errorf("%s: %d fixed tables, want %d", v.version, len(defs), v.n)
		}
		for i := range defs {
			if err := ValidateDef(&defs[i]); err != nil {
				t.Errorf("%s: %v", v.version, err)
			}
		}
	}
	for _, v := range []string{"0.1", "0.4-dev1", "1.1"} {
		if _, err := FixedDefs("public", v); err == nil {
			t.Errorf("FixedDefs accepted version %s", v)
		}
	}
	for _, c := range []struct {
		name  string
		kind  Kind
		ok    bool
		table int64
		sv    int64
	}{
		{"ducklake_data_file", KindDataFile, true, 0, 0},
		{"ducklake_file_partition_value", KindDataFile, true, 0, 0},
		{"ducklake_inlined_data_12_7", KindInlinedRow, true, 12, 7},
		{"ducklake_inlined_data_0_0", KindInlinedRow, true, 0, 0},
		{"ducklake_inlined_delete_3", KindInlinedDelete, true, 3, 0},
		{"ducklake_inlined_data_12", 0, false, 0, 0},
		{"ducklake_inlined_data_01_7", 0, false, 0, 0},
		{"ducklake_inlined_data_1_-7", 0, false, 0, 0},
		{"ducklake_inlined_data_1_2_3", 0, false, 0, 0},
		{"ducklake_inlined_delete_", 0, false, 0, 0},
		{"ducklake_inlined_delete_99999999999999999999", 0, false, 0, 0},
		{"ducklake_file_column_statistics", KindFileColumnStats, true, 0, 0},
		{"ducklake_file_column_statistic", 0, false, 0, 0},
		{"pg_class", 0, false, 0, 0},
	} {
		s, ok := Known(c.name)
		if ok != c.ok {
			t.Errorf("Known(%q) = %v, want %v", c.name, ok, c.ok)
			continue
		}
		if ok && (s.Kind != c.kind || s.TableID != c.table || s.SchemaVersion != c.sv) {
			t.Errorf("Known(%q) = kind %v table %d sv %d", c.name, s.Kind, s.TableID, s.SchemaVersion)
		}
	}
}

// inventoryDDL returns every DuckLake CREATE TABLE and ALTER TABLE in the
// statement inventory, in inventory order.
func inventoryDDL(t *testing.T) (creates, alters []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "shapes", "shapes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var shapes []struct{ Example string }
	if err := json.Unmarshal(raw, &shapes); err != nil {
		t.Fatal(err)
	}
	for _, s := range shapes {
		switch {
		case isDuckLakeDDL(s.Example, "CREATE TABLE"):
			creates = append(creates, s.Example)
		case isDuckLakeDDL(s.Example, "ALTER TABLE"):
			alters = append(alters, s.Example)
		}
	}
	return creates, alters
}

// versionDDL returns the CREATE TABLE statements of DuckLake's fixed tables
// at the older catalog versions, from the lake scripts in testdata/versions
// (DuckLake's InitializeDuckLake at 0.3 and 0.4 as the postgres extension
// sends it).
func versionDDL(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, v := range []string{Version02, Version03, Version04} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "versions", "lake-"+v+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if isDuckLakeDDL(line, "CREATE TABLE") && !strings.Contains(line, InlinedDataPrefix) {
				out = append(out, strings.TrimSuffix(line, ";"))
			}
		}
	}
	if len(out) < 3*(FixedTableCount-8) {
		t.Fatalf("only %d CREATE TABLE statements in testdata/versions", len(out))
	}
	return out
}

// TestValidateDefVersions accepts the tables of every catalog version,
// including 0.3's data file table (partial_file_info where partial_max and
// row_group_count come later), and refuses what no version holds: the
// 0.3 → 0.4 migration's transient shapes, which exist only inside its
// transaction, and columns out of order.
func TestValidateDefVersions(t *testing.T) {
	for _, sql := range versionDDL(t) {
		def, err := parseCreate(sql)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateDef(&def); err != nil {
			t.Errorf("refused %s: %v", sql, err)
		}
	}
	defs, _ := FixedDefs("public", Version03)
	var df TableDef
	for _, d := range defs {
		if d.Name == "ducklake_data_file" {
			df = d
		}
	}
	if got := df.Columns[14].Name; got != "partial_file_info" {
		t.Fatalf("0.3 data file column 15 is %q", got)
	}
	transient := df.Clone()
	transient.Columns = append(transient.Columns, ColumnDef{Name: "partial_max", Type: tBig})
	swapped := df.Clone()
	swapped.Columns[14], swapped.Columns[15] = swapped.Columns[15], swapped.Columns[14]
	short := df.Clone()
	short.Columns = short.Columns[:15]
	for name, d := range map[string]TableDef{"transient": transient, "swapped": swapped, "short": short} {
		if err := ValidateDef(&d); !errors.Is(err, ErrBadDef) {
			t.Errorf("%s 0.3 data file table %s: %v", name, d.String(), err)
		}
	}
	// 0.3's schema_versions has no table_id, a key field: its rows key as
	// the same rows with a NULL table_id at 0.4.
	sv03, err := NewTable(TableDef{Schema: "public", Name: "ducklake_schema_versions", Columns: cols("begin_snapshot:b schema_version:b")})
	if err != nil {
		t.Fatal(err)
	}
	sv04, _ := NewTable(TableDef{Schema: "public", Name: "ducklake_schema_versions", Columns: cols("begin_snapshot:b schema_version:b table_id:b")})
	k03, err := sv03.Key(1, datum.EncodeRow(nil, sv03.Types(), []datum.Value{datum.IntValue(5), datum.IntValue(2)}))
	if err != nil {
		t.Fatal(err)
	}
	k04, _ := sv04.Key(1, datum.EncodeRow(nil, sv04.Types(), []datum.Value{datum.IntValue(5), datum.IntValue(2), datum.Null}))
	if string(k03) != string(k04) {
		t.Fatalf("0.3 key %s, 0.4 key with NULL table_id %s", FormatKey(k03), FormatKey(k04))
	}
}

// TestValidateDefInventory accepts every CREATE TABLE DuckLake sent in the
// captured conversations, and every intermediate shape its migrations
// produce.
func TestValidateDefInventory(t *testing.T) {
	creates, alters := inventoryDDL(t)
	if len(creates) < FixedTableCount+3 {
		t.Fatalf("only %d CREATE TABLE statements in the inventory", len(creates))
	}
	byName := map[string]*TableDef{}
	for _, sql := range creates {
		def, err := parseCreate(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if err := ValidateDef(&def); err != nil {
			t.Errorf("refused DuckLake's DDL %s: %v", sql, err)
		}
		if def.Name == "ducklake_data_file" && len(def.Columns) == 16 ||
			def.Name == "ducklake_delete_file" && len(def.Columns) == 13 ||
			strings.HasPrefix(def.Name, InlinedDataPrefix) && def.Columns[0].Name == "row_id" ||
			byName[def.Name] == nil {
			byName[def.Name] = &def // keep the 1.0 shapes for the migration below
		}
	}
	// The 1.0 → 1.1 migration: each ALTER leaves a shape that must validate.
	if len(alters) == 0 {
		t.Fatal("no ALTER TABLE statements in the inventory")
	}
	for _, sql := range alters {
		name, err := applyAlter(byName, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if err := ValidateDef(byName[name]); err != nil {
			t.Errorf("refused the shape after %s: %v", sql, err)
		}
	}
}

// TestValidateDefFixtures runs every DuckLake CREATE TABLE of every captured
// conversation (the inventory keeps one example per shape) through ValidateDef.
func TestValidateDefFixtures(t *testing.T) {
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s: %v", dir, err)
	}
	n := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			// One captured wire message per line; only the client's
			// simple-protocol Query messages carry DDL.
			var m struct {
				Dir, Type string
				Msg       struct{ String string }
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if m.Dir != "F" || m.Type != "Query" {
				continue
			}
			stmts, err := pg_query.SplitWithParser(m.Msg.String, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range stmts {
				st = strings.TrimSpace(st)
				if !isDuckLakeDDL(st, "CREATE TABLE") {
					continue
				}
				def, err := parseCreate(st)
				if err != nil {
					t.Fatalf("%s: %s: %v", file, st, err)
				}
				n++
				if err := ValidateDef(&def); err != nil {
					t.Errorf("%s: refused %s: %v", filepath.Base(file), st, err)
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if n < 100 {
		t.Errorf("only %d DuckLake CREATE TABLE statements found in the fixtures", n)
	}
	t.Logf("%d CREATE TABLE statements accepted", n)
}

func TestValidateDefRefuses(t *testing.T) {
	base := func(name string) TableDef {
		defs, _ := FixedDefs("public", Version11)
		for _, d := range defs {
			if d.Name == name {
				return d
			}
		}
		t.Fatalf("no %s", name)
		return TableDef{}
	}
	inl := func(user ...ColumnDef) TableDef {
		return InlinedDataDef("public", Version11, 1, 2, user)
	}
	cases := []struct {
		name    string
		def     func() TableDef
		wantErr error
		mention string
	}{
		{"unknown table", func() TableDef {
			return TableDef{Schema: "public", Name: "users", Columns: []ColumnDef{{Name: "id", Type: datum.Int8}}}
		}, ErrUnknownTable, "users"},
		{"renamed column", func() TableDef { d := base("ducklake_snapshot"); d.Columns[2].Name = "schema_ver"; return d }, ErrBadDef, "schema_ver"},
		{"wrong type", func() TableDef { d := base("ducklake_snapshot"); d.Columns[1].Type = datum.Timestamp; return d }, ErrBadDef, "snapshot_time"},
		{"missing pk", func() TableDef { d := base("ducklake_snapshot"); d.PrimaryKey = nil; return d }, ErrBadDef, "primary key"},
		{"extra pk", func() TableDef { d := base("ducklake_table"); d.PrimaryKey = []int{0}; return d }, ErrBadDef, "primary key"},
		{"dropped not null", func() TableDef { d := base("ducklake_metadata"); d.Columns[1].NotNull = false; return d }, ErrBadDef, "value"},
		{"added not null", func() TableDef { d := base("ducklake_metadata"); d.Columns[2].NotNull = true; return d }, ErrBadDef, "scope"},
		{"too few columns", func() TableDef { d := base("ducklake_data_file"); d.Columns = d.Columns[:15]; return d }, ErrBadDef, "15 columns"},
		{"extra column", func() TableDef {
			d := base("ducklake_data_file")
			d.Columns = append(d.Columns, ColumnDef{Name: "bogus", Type: datum.Int8})
			return d
		}, ErrBadDef, "18 columns"},
		{"swapped columns", func() TableDef {
			d := base("ducklake_tag")
			d.Columns[3], d.Columns[4] = d.Columns[4], d.Columns[3]
			return d
		}, ErrBadDef, "value"},
		{"view_column_tag short", func() TableDef { d := base("ducklake_view_column_tag"); d.Columns = d.Columns[:5]; return d }, ErrBadDef, "ducklake_view_column_tag"},
		{"no schema", func() TableDef { d := base("ducklake_tag"); d.Schema = ""; return d }, ErrBadDef, "schema"},
		{"duplicate column", func() TableDef {
			return inl(ColumnDef{Name: "a", Type: datum.Int4}, ColumnDef{Name: "a", Type: datum.Int8})
		}, ErrBadDef, `"a"`},
		{"inlined bad meta", func() TableDef { d := inl(); d.Columns[1].Name = "begin"; return d }, ErrBadDef, "begin"},
		{"inlined meta type", func() TableDef { d := inl(); d.Columns[0].Type = datum.Int4; return d }, ErrBadDef, "_ducklake_row_id"},
		{"inlined short", func() TableDef { d := inl(); d.Columns = d.Columns[:2]; return d }, ErrBadDef, "2 columns"},
		{"inlined unsupported type", func() TableDef { return inl(ColumnDef{Name: "g", Type: datum.Type{OID: 600 /* point */, Mod: -1}}) }, ErrBadDef, "g"},
		{"inlined not null", func() TableDef { return inl(ColumnDef{Name: "x", Type: datum.Int4, NotNull: true}) }, ErrBadDef, "x"},
		{"inlined pk", func() TableDef { d := inl(ColumnDef{Name: "x", Type: datum.Int4}); d.PrimaryKey = []int{3}; return d }, ErrBadDef, "primary key"},
		{"inlined delete wrong", func() TableDef { d := InlinedDeleteDef("public", 4); d.Columns[2].Name = "end_snapshot"; return d }, ErrBadDef, "end_snapshot"},
		{"inlined delete extra", func() TableDef {
			d := InlinedDeleteDef("public", 4)
			d.Columns = append(d.Columns, ColumnDef{Name: "x", Type: datum.Int8})
			return d
		}, ErrBadDef, "4 columns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.def()
			err := ValidateDef(&d)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("ValidateDef(%s) = %v, want %v", d.String(), err, c.wantErr)
			}
			if !strings.Contains(err.Error(), d.Name) || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not name the table %q and %q", err, d.Name, c.mention)
			}
		})
	}
}

func TestValidateDefAccepts(t *testing.T) {
	user := []ColumnDef{
		{Name: "id", Type: datum.Int8}, {Name: "s", Type: datum.Bytea}, {Name: "n", Type: datum.NumericType(18, 3)},
		{Name: "f", Type: datum.Float4}, {Name: "d", Type: datum.Float8}, {Name: "ok", Type: datum.Bool},
		{Name: "u", Type: datum.UUID}, {Name: "iv", Type: datum.Interval}, {Name: "t", Type: datum.Time},
		{Name: "v", Type: datum.Varchar}, {Name: "i2", Type: datum.Int2}, {Name: "row_id", Type: datum.Int4},
	}
	for _, d := range []TableDef{
		InlinedDataDef("public", Version11, 1, 1, user),
		InlinedDataDef("lake_meta", Version10, 5, 13, user[:3]),
		InlinedDataDef("public", Version11, 9, 9, nil),
		InlinedDeleteDef("public", 1),
	} {
		if err := ValidateDef(&d); err != nil {
			t.Errorf("refused %s: %v", d.String(), err)
		}
	}
	// A primary key column may or may not carry NOT NULL (PostgreSQL implies it).
	defs, _ := FixedDefs("public", Version11)
	for _, d := range defs {
		if len(d.PrimaryKey) == 1 {
			d := d.Clone()
			d.Columns[d.PrimaryKey[0]].NotNull = false
			if err := ValidateDef(&d); err != nil {
				t.Errorf("refused %s: %v", d.String(), err)
			}
		}
	}
}
