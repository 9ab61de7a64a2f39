package changes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	. "github.com/moraine-db/moraine/internal/commit/changes"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Set
		out  string // formatted form, when it differs from in
	}{
		{in: "", want: nil},
		{in: `created_schema:"main"`, want: Set{{Kind: CreatedSchema, Name: "main"}}},
		{in: `created_table:"main"."t"`, want: Set{{Kind: CreatedTable, Schema: "main", Name: "t"}}},
		{in: `created_view:"s"."v"`, want: Set{{Kind: CreatedView, Schema: "s", Name: "v"}}},
		{in: `created_scalar_macro:"s"."f",created_table_macro:"s"."g"`, want: Set{
			{Kind: CreatedScalarMacro, Schema: "s", Name: "f"}, {Kind: CreatedTableMacro, Schema: "s", Name: "g"}}},
		{in: "inserted_into_table:1,deleted_from_table:1", want: Set{
			{Kind: InsertedIntoTable, ID: 1}, {Kind: DeletedFromTable, ID: 1}}},
		{in: "dropped_schema:1,dropped_table:2,dropped_view:3,dropped_scalar_macro:4,dropped_table_macro:5", want: Set{
			{Kind: DroppedSchema, ID: 1}, {Kind: DroppedTable, ID: 2}, {Kind: DroppedView, ID: 3},
			{Kind: DroppedScalarMacro, ID: 4}, {Kind: DroppedTableMacro, ID: 5}}},
		{in: "altered_table:7,altered_view:8", want: Set{{Kind: AlteredTable, ID: 7}, {Kind: AlteredView, ID: 8}}},
		{in: "inlined_insert:1,inlined_delete:2,inline_flush:3", want: Set{
			{Kind: InlinedInsert, ID: 1}, {Kind: InlinedDelete, ID: 2}, {Kind: InlineFlush, ID: 3}}},
		{in: "flushed_inlined:3", want: Set{{Kind: InlineFlush, ID: 3}}, out: "inline_flush:3"},
		{in: "merge_adjacent:1,rewrite_delete:2", want: Set{{Kind: MergeAdjacent, ID: 1}, {Kind: RewriteDelete, ID: 2}}},
		{in: "compacted_table:4", want: Set{{Kind: CompactedTable, ID: 4}}},
		{in: `created_table:"we""ird"."a,b.c"`, want: Set{{Kind: CreatedTable, Schema: `we"ird`, Name: "a,b.c"}}},
		{in: `created_table:"a"."""",inserted_into_table:0`, want: Set{
			{Kind: CreatedTable, Schema: "a", Name: `"`}, {Kind: InsertedIntoTable, ID: 0}}},
		{in: `created_table:main.t`, want: Set{{Kind: CreatedTable, Schema: "main", Name: "t"}}, out: `created_table:"main"."t"`},
		{in: `created_schema:""`, want: Set{{Kind: CreatedSchema, Name: ""}}},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
		}
		wantOut := tc.in
		if tc.out != "" {
			wantOut = tc.out
		}
		if s := got.String(); s != wantOut {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, s, wantOut)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		unknown bool
	}{
		{in: "bogus:1", unknown: true},
		{in: "inserted_into_table:1,made_up:2", unknown: true},
		{in: "inserted_into_table"},
		{in: "inserted_into_table:"},
		{in: "inserted_into_table:-1"},
		{in: "inserted_into_table:x"},
		{in: "inserted_into_table:1x"},
		{in: "inserted_into_table:99999999999999999999"},
		{in: "inserted_into_table:1,"},
		{in: ",inserted_into_table:1", unknown: true},
		{in: `created_schema:"main`},
		{in: `created_schema:`},
		{in: `created_table:"main"`},
		{in: `created_table:"main".`},
		{in: `created_table:"main"x"t"`},
		{in: `created_schema:"a""`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error", tc.in)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", tc.in, err)
		}
		if got := errors.Is(err, ErrUnknownKind); got != tc.unknown {
			t.Errorf("Parse(%q): errors.Is(ErrUnknownKind) = %v, want %v (%v)", tc.in, got, tc.unknown, err)
		}
	}
}

func TestParseUnion(t *testing.T) {
	got, err := ParseUnion("inserted_into_table:1", "", `created_table:"main"."x"`)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != `inserted_into_table:1,created_table:"main"."x"` {
		t.Fatalf("ParseUnion = %q", got.String())
	}
	if _, err := ParseUnion("inserted_into_table:1", "nope:1"); err == nil {
		t.Fatal("ParseUnion accepted an unknown entry")
	}
}

func TestCompactionOnly(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"merge_adjacent:1", true},
		{"rewrite_delete:1", true},
		{"merge_adjacent:1,rewrite_delete:2,merge_adjacent:3", true},
		{"merge_adjacent:1,inserted_into_table:1", false},
		{"compacted_table:1", false},
		{"inline_flush:1", false},
	}
	for _, tc := range tests {
		s, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CompactionOnly(); got != tc.want {
			t.Errorf("CompactionOnly(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// genEntry draws any well-formed entry, including names with quotes, commas
// and dots.
func genEntry() *rapid.Generator[Entry] {
	kinds := []Kind{DroppedSchema, DroppedTable, DroppedView, CreatedSchema, CreatedTable, CreatedView,
		CreatedScalarMacro, CreatedTableMacro, DroppedScalarMacro, DroppedTableMacro, InsertedIntoTable,
		DeletedFromTable, AlteredTable, AlteredView, InlinedInsert, InlinedDelete, InlineFlush,
		MergeAdjacent, RewriteDelete, CompactedTable}
	name := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"main", `"`, `a"b`, "x,y", "a.b", `""`, ""}))
	return rapid.Custom(func(t *rapid.T) Entry {
		k := rapid.SampledFrom(kinds).Draw(t, "kind")
		e := Entry{Kind: k}
		switch {
		case k.HasID():
			e.ID = rapid.Int64Min(0).Draw(t, "id")
		case k == CreatedSchema:
			e.Name = name.Draw(t, "name")
		default:
			e.Schema = name.Draw(t, "schema")
			e.Name = name.Draw(t, "name")
		}
		return e
	})
}

func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := Set(rapid.SliceOf(genEntry()).Draw(t, "set"))
		s := set.String()
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if len(set) == 0 {
			set = nil
		}
		if diff := cmp.Diff(set, got); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", s, diff)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrSyntax", s, err)
			}
			return
		}
		// Whatever parsed must format to a string that parses to the same set.
		again, err := Parse(set.String())
		if err != nil {
			t.Fatalf("reparse of %q (from %q): %v", set.String(), s, err)
		}
		if diff := cmp.Diff(set, again); diff != "" {
			t.Fatalf("reparse differs (-first +second):\n%s", diff)
		}
		_ = Classify(set, set, nil)
	})
}

func TestClassifyMatrix(t *testing.T) {
	schemas := SchemaNames{0: "main", 5: "sales"}
	tests := []struct {
		name         string
		mine, theirs string
		conflict     bool
		msg          string // substring of the message when conflict
	}{
		// drop table T | dropped T
		{"drop table vs dropped same", "dropped_table:3", "dropped_table:3", true, "attempting to drop table 3 but another transaction has dropped it"},
		{"drop table vs dropped other", "dropped_table:3", "dropped_table:4", false, ""},
		{"drop table vs insert", "dropped_table:3", "inserted_into_table:3", false, ""},
		// drop view V | dropped V
		{"drop view vs dropped same", "dropped_view:7", "dropped_view:7", true, "drop view 7"},
		{"drop view vs dropped other", "dropped_view:7", "dropped_view:8,altered_view:7", false, ""},
		// drop macro M | dropped M (same kind)
		{"drop scalar macro vs dropped same", "dropped_scalar_macro:4", "dropped_scalar_macro:4", true, "drop scalar macro 4"},
		{"drop scalar macro vs table macro same id", "dropped_scalar_macro:4", "dropped_table_macro:4", false, ""},
		{"drop table macro vs dropped same", "dropped_table_macro:4", "dropped_table_macro:4", true, "drop table macro 4"},
		{"drop table macro vs other", "dropped_table_macro:4", "dropped_table_macro:5", false, ""},
		// drop schema S | dropped S; created a table/view in S
		{"drop schema vs dropped same", "dropped_schema:5", "dropped_schema:5", true, "drop schema 5 but another transaction has dropped it"},
		{"drop schema vs table created in it", "dropped_schema:5", `created_table:"sales"."t"`, true, `created "t" in it`},
		{"drop schema vs view created in it", "dropped_schema:5", `created_view:"sales"."v"`, true, "drop schema 5"},
		{"drop schema vs table created elsewhere", "dropped_schema:5", `created_table:"main"."t",dropped_schema:6`, false, ""},
		{"drop schema vs macro created in it", "dropped_schema:5", `created_scalar_macro:"sales"."f"`, false, ""},
		// create schema N | created schema N
		{"create schema vs same name", `created_schema:"s2"`, `created_schema:"s2"`, true, `create schema "s2"`},
		{"create schema vs other name", `created_schema:"s2"`, `created_schema:"s3"`, false, ""},
		// create table/view N in S | dropped S; created table or view N in S
		{"create table vs schema dropped", `created_table:"sales"."t"`, "dropped_schema:5", true, "dropped schema 5"},
		{"create table vs same table", `created_table:"main"."t"`, `created_table:"main"."t"`, true, "created a table or view with the same name"},
		{"create table vs same-named view", `created_table:"main"."t"`, `created_view:"main"."t"`, true, "same name"},
		{"create view vs same-named table", `created_view:"main"."t"`, `created_table:"main"."t"`, true, "create view"},
		{"create table vs other schema", `created_table:"main"."t"`, `created_table:"sales"."t",dropped_schema:5`, false, ""},
		{"create table in new schema", `created_schema:"new",created_table:"new"."t"`, "dropped_schema:5", false, ""},
		{"create table vs same-named macro", `created_table:"main"."t"`, `created_scalar_macro:"main"."t"`, false, ""},
		// create macro N in S | dropped S; created a macro of the same kind N in S
		{"create scalar macro vs same", `created_scalar_macro:"main"."f"`, `created_scalar_macro:"main"."f"`, true, "created a macro with the same name"},
		{"create scalar macro vs table macro", `created_scalar_macro:"main"."f"`, `created_table_macro:"main"."f"`, false, ""},
		{"create table macro vs schema dropped", `created_table_macro:"sales"."g"`, "dropped_schema:5", true, "dropped schema 5"},
		{"create table macro vs other", `created_table_macro:"sales"."g"`, `created_table_macro:"main"."g"`, false, ""},
		// insert into T | dropped, altered, deleted from (files), deleted inlined
		{"insert vs dropped", "inserted_into_table:3", "dropped_table:3", true, "Transaction conflict - attempting to insert into table 3 but another transaction has dropped it"},
		{"insert vs altered", "inserted_into_table:3", "altered_table:3", true, "altered it"},
		{"insert vs deleted from", "inserted_into_table:3", "deleted_from_table:3", true, "deleted from it"},
		{"insert vs inlined delete", "inserted_into_table:3", "inlined_delete:3", true, "deleted inlined rows"},
		{"insert vs insert", "inserted_into_table:3", "inserted_into_table:3,inlined_insert:3", false, ""},
		{"insert vs flush", "inserted_into_table:3", "inline_flush:3", false, ""},
		{"insert vs merge", "inserted_into_table:3", "merge_adjacent:3", false, ""},
		{"insert vs rewrite", "inserted_into_table:3", "rewrite_delete:3", false, ""},
		{"insert vs legacy compacted", "inserted_into_table:3", "compacted_table:3", false, ""},
		{"insert vs other table dropped", "inserted_into_table:3", "dropped_table:4,altered_table:4", false, ""},
		{"inlined insert vs dropped", "inlined_insert:3", "dropped_table:3", true, "insert inlined rows into table 3"},
		{"inlined insert vs flush", "inlined_insert:3", "inline_flush:3,inlined_insert:3", false, ""},
		// delete from T | dropped, altered, merge, rewrite, inserted (files or inlined)
		{"delete vs dropped", "deleted_from_table:3", "dropped_table:3", true, "delete from table 3"},
		{"delete vs altered", "deleted_from_table:3", "altered_table:3", true, "altered it"},
		{"delete vs merge", "deleted_from_table:3", "merge_adjacent:3", true, "compacted it"},
		{"delete vs rewrite", "deleted_from_table:3", "rewrite_delete:3", true, "compacted it"},
		{"delete vs insert", "deleted_from_table:3", "inserted_into_table:3", true, "inserted into it"},
		{"delete vs inlined insert", "deleted_from_table:3", "inlined_insert:3", true, "inserted inlined rows"},
		{"delete vs delete (file check elsewhere)", "deleted_from_table:3", "deleted_from_table:3", false, ""},
		{"delete vs flush", "deleted_from_table:3", "inline_flush:3,inlined_delete:3", false, ""},
		// inlined delete of T | dropped, altered, inlined delete, flushed, inserted
		{"inlined delete vs dropped", "inlined_delete:3", "dropped_table:3", true, "delete inlined rows from table 3"},
		{"inlined delete vs altered", "inlined_delete:3", "altered_table:3", true, "altered"},
		{"inlined delete vs inlined delete", "inlined_delete:3", "inlined_delete:3", true, "deleted inlined rows"},
		{"inlined delete vs flush", "inlined_delete:3", "inline_flush:3", true, "flushed"},
		{"inlined delete vs insert", "inlined_delete:3", "inserted_into_table:3", true, "inserted into it"},
		{"inlined delete vs inlined insert", "inlined_delete:3", "inlined_insert:3", true, "inserted inlined"},
		{"inlined delete vs merge", "inlined_delete:3", "merge_adjacent:3,deleted_from_table:3", false, ""},
		// flush of T | dropped, deleted inlined, flushed
		{"flush vs dropped", "inline_flush:3", "dropped_table:3", true, "flush inlined data of table 3"},
		{"flush vs inlined delete", "inline_flush:3", "inlined_delete:3", true, "deleted inlined"},
		{"flush vs flush", "inline_flush:3", "flushed_inlined:3", true, "flushed"},
		{"flush vs insert", "inline_flush:3", "inserted_into_table:3,inlined_insert:3,altered_table:3", false, ""},
		// merge/rewrite of T | dropped, deleted from, merge, rewrite
		{"merge vs dropped", "merge_adjacent:3", "dropped_table:3", true, "compact (merge adjacent files of) table 3"},
		{"merge vs deleted from", "merge_adjacent:3", "deleted_from_table:3", true, "deleted from it"},
		{"merge vs merge", "merge_adjacent:3", "merge_adjacent:3", true, "compacted it"},
		{"merge vs rewrite", "merge_adjacent:3", "rewrite_delete:3", true, "rewrite"},
		{"rewrite vs merge", "rewrite_delete:3", "merge_adjacent:3", true, "rewrite data files of"},
		{"merge vs insert", "merge_adjacent:3", "inserted_into_table:3,inlined_insert:3", false, ""},
		{"merge vs other table merge", "merge_adjacent:3", "merge_adjacent:4,dropped_table:4", false, ""},
		{"merge vs legacy compacted", "merge_adjacent:3", "compacted_table:3", false, ""},
		// alter table T | dropped, altered
		{"alter vs dropped", "altered_table:3", "dropped_table:3", true, "alter table 3"},
		{"alter vs altered", "altered_table:3", "altered_table:3", true, "altered it"},
		{"alter vs insert", "altered_table:3", "inserted_into_table:3,deleted_from_table:3", false, ""},
		// alter view V | dropped V, altered V
		{"alter view vs dropped", "altered_view:8", "dropped_view:8", true, "alter view 8"},
		{"alter view vs altered", "altered_view:8", "altered_view:8", true, "altered it"},
		{"alter view vs table of same id dropped", "altered_view:8", "dropped_table:8", false, ""},
		// legacy compacted_table on my side
		{"legacy compacted vs everything", "compacted_table:3", "dropped_table:3,merge_adjacent:3", false, ""},
		// empty sides
		{"no changes mine", "", "dropped_table:3", false, ""},
		{"no changes theirs", "dropped_table:3", "", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mine, err := Parse(tc.mine)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := Parse(tc.theirs)
			if err != nil {
				t.Fatal(err)
			}
			err = Classify(mine, theirs, schemas)
			if !tc.conflict {
				if err != nil {
					t.Fatalf("Classify(%q, %q) = %v, want no conflict", tc.mine, tc.theirs, err)
				}
				return
			}
			var c *Conflict
			if !errors.As(err, &c) || !errors.Is(err, ErrConflict) {
				t.Fatalf("Classify(%q, %q) = %v, want *Conflict", tc.mine, tc.theirs, err)
			}
			msg := err.Error()
			if !strings.Contains(strings.ToLower(msg), "conflict") || !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q lacks %q", msg, tc.msg)
			}
		})
	}
}

func TestDeleteOverlap(t *testing.T) {
	mine, _ := Parse("deleted_from_table:1,deleted_from_table:2,inserted_into_table:3")
	theirs, _ := Parse("deleted_from_table:2,deleted_from_table:3,inserted_into_table:1")
	if diff := cmp.Diff([]int64{2}, DeleteOverlap(mine, theirs)); diff != "" {
		t.Fatal(diff)
	}
}

// TestClassifyAll: every conflicting entry of mine is reported, each with
// the entry of theirs it meets, in mine's order; Classify reports the
// first of them.
func TestClassifyAll(t *testing.T) {
	mine, err := Parse(`inserted_into_table:1,inserted_into_table:2,deleted_from_table:3,created_table:"main"."t"`)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := Parse(`dropped_table:1,inserted_into_table:2,inserted_into_table:3,created_table:"main"."t"`)
	if err != nil {
		t.Fatal(err)
	}
	got := ClassifyAll(mine, theirs, nil)
	var desc []string
	for _, c := range got {
		desc = append(desc, c.Mine.String()+" / "+c.Theirs.String())
	}
	want := []string{
		"inserted_into_table:1 / dropped_table:1",
		"deleted_from_table:3 / inserted_into_table:3",
		`created_table:"main"."t" / created_table:"main"."t"`,
	}
	if strings.Join(desc, "; ") != strings.Join(want, "; ") {
		t.Fatalf("ClassifyAll: %v, want %v", desc, want)
	}
	first := Classify(mine, theirs, nil)
	if first == nil || first.Error() != got[0].Error() {
		t.Fatalf("Classify: %v, want the first of ClassifyAll: %v", first, got[0])
	}
	if s := got[0].Against("the parent"); s != "attempting to insert into table 1 but the parent has dropped it" {
		t.Fatalf("Against: %q", s)
	}
	if ClassifyAll(mine, nil, nil) != nil || ClassifyAll(nil, theirs, nil) != nil {
		t.Fatal("ClassifyAll with an empty side found conflicts")
	}
}
