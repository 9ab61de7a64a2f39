package sql

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// stagedTable is a drawn CREATE TABLE.
type stagedTable struct {
	schema, name string
	cols         []stagedColumn
	pk           int // index of the primary key column, -1 for none
}

type stagedColumn struct {
	name, typ string
	notNull   bool
}

func (t stagedTable) sql() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s.%s(", t.schema, t.name)
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.name + " " + c.typ)
		if c.notNull {
			b.WriteString(" NOT NULL")
		}
		if i == t.pk {
			b.WriteString(" PRIMARY KEY")
		}
	}
	b.WriteString(")")
	return b.String()
}

// stagedTypes are column types, several with the same type OID and another
// typmod.
var stagedTypes = []string{"bigint", "integer", "varchar", "varchar(8)", "varchar(16)", "boolean",
	"numeric", "numeric(10,2)", "numeric(12,4)", "timestamptz", "uuid", "double precision", "bigint[]"}

// sameOID are the types that differ from one another only in typmod.
var sameOID = map[string][]string{
	"varchar": {"varchar(8)", "varchar(16)"}, "varchar(8)": {"varchar", "varchar(16)"}, "varchar(16)": {"varchar", "varchar(8)"},
	"numeric": {"numeric(10,2)", "numeric(12,4)"}, "numeric(10,2)": {"numeric", "numeric(12,4)"}, "numeric(12,4)": {"numeric", "numeric(10,2)"},
}

func drawStagedTables(rt *rapid.T) []stagedTable {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"ducklake_inlined_data_1_1", "ducklake_inlined_data_2_1", "ducklake_inlined_data_3_1", "ducklake_inlined_data_4_1"}), 1, 3, rapid.ID).Draw(rt, "tables")
	out := make([]stagedTable, len(names))
	for i, n := range names {
		cols := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c"}), 1, 3, rapid.ID).Draw(rt, "columns")
		t := stagedTable{schema: rapid.SampledFrom([]string{"public", "s1"}).Draw(rt, "schema"), name: n,
			pk: rapid.IntRange(-1, len(cols)-1).Draw(rt, "pk")}
		for _, c := range cols {
			t.cols = append(t.cols, stagedColumn{name: c, typ: rapid.SampledFrom(stagedTypes).Draw(rt, "type"), notNull: rapid.IntRange(0, 3).Draw(rt, "notnull") > 0})
		}
		out[i] = t
	}
	return out
}

// mutateStaged changes one drawn thing about the tables: what the
// catalogs show of a column, a table, its schema or the primary key, or
// how many columns or tables there are.
func mutateStaged(rt *rapid.T, ts []stagedTable) []stagedTable {
	out := make([]stagedTable, len(ts))
	for i, t := range ts {
		t.cols = append([]stagedColumn(nil), t.cols...)
		out[i] = t
	}
	t := &out[rapid.IntRange(0, len(out)-1).Draw(rt, "mutated table")]
	c := &t.cols[rapid.IntRange(0, len(t.cols)-1).Draw(rt, "mutated column")]
	switch rapid.SampledFrom([]string{"column name", "type", "typmod", "not null", "primary key", "table name", "schema", "one column fewer", "one table fewer"}).Draw(rt, "mutation") {
	case "column name":
		c.name = "z"
	case "type":
		c.typ = rapid.SampledFrom(stagedTypes).Filter(func(s string) bool { return s != c.typ }).Draw(rt, "new type")
	case "typmod":
		if others := sameOID[c.typ]; others != nil {
			c.typ = rapid.SampledFrom(others).Draw(rt, "new typmod")
		} else {
			c.typ = "varchar(8)"
		}
	case "not null":
		c.notNull = !c.notNull
	case "primary key":
		t.pk = rapid.IntRange(-1, len(t.cols)-1).Filter(func(i int) bool { return i != t.pk }).Draw(rt, "new pk")
	case "table name":
		t.name = "ducklake_inlined_data_9_1"
	case "schema":
		if t.schema == "public" {
			t.schema = "s1"
		} else {
			t.schema = "public"
		}
	case "one column fewer":
		if len(t.cols) > 1 {
			t.cols = t.cols[:len(t.cols)-1]
			if t.pk >= len(t.cols) {
				t.pk = -1
			}
		}
	case "one table fewer":
		if len(out) > 1 {
			out = out[:len(out)-1]
		}
	}
	return out
}

// rowID is catalogIDOf the DDL-derived relations of v as pgcatalog builds
// them: what the catalogs hold, row by row.
func rowID(t interface{ Fatalf(string, ...any) }, v *memcat.Version) catalogID {
	rels := make([]*pgcatalog.Relation, len(ddlCatalogNames))
	for i, name := range ddlCatalogNames {
		r, ok := pgcatalog.Lookup(&pgcatalog.Context{Version: v, Database: "x", User: "postgres"}, "pg_catalog", name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		rels[i] = r
	}
	return catalogIDOf(ddlCatalogNames, rels)
}

// TestDDLIDSeesEveryCatalogChange: two views have equal IDs (ddlID) exactly
// when their DDL-derived catalogs hold the same rows. Each case stages drawn
// CREATE TABLEs in one database and the same with one drawn change in
// another, commits both, and compares every view along both, staged and
// published. A case
// takes about a millisecond, so the property runs in several rounds of
// rapid's default count: a change that reaches the catalogs in few cases
// (moving the primary key between two NOT NULL columns) is drawn in nearly
// every run.
func TestDDLIDSeesEveryCatalogChange(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), ddlIDProperty)
	}
}

func ddlIDProperty(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		ex := testServer()
		admin := ex.Open("lake", "postgres", "", 1)
		defer admin.Close()
		a := drawStagedTables(rt)
		b := mutateStaged(rt, a)
		type point struct {
			id, rows catalogID
			where    string
		}
		var points []point
		for i, tables := range [][]stagedTable{a, b} {
			db := fmt.Sprintf("db%d", i)
			if out := runSQL(ctx, admin, "CREATE DATABASE "+db, ""); strings.Contains(out, "ERROR") {
				rt.Fatal(out)
			}
			s := ex.Open(db, "postgres", "", uint32(2+i))
			stmts := []string{"BEGIN", "CREATE SCHEMA s1"}
			for _, tb := range tables {
				stmts = append(stmts, tb.sql())
			}
			for j, q := range stmts {
				if out := runSQL(ctx, s, q, ""); strings.Contains(out, "ERROR") {
					rt.Fatalf("%s: %s", q, out)
				}
				if j == 0 {
					continue // nothing staged yet
				}
				v := s.view()
				points = append(points, point{ddlID(v), rowID(rt, v), db + " after " + q})
			}
			if out := runSQL(ctx, s, "COMMIT", ""); strings.Contains(out, "ERROR") {
				rt.Fatal(out)
			}
			x := &exec{ctx: ctx, s: s}
			id, ok := x.catalogID()
			if !ok {
				rt.Fatal("no catalog ID for a published view")
			}
			points = append(points, point{id, rowID(rt, s.view()), db + " committed"})
			s.Close()
		}
		for i, p := range points {
			for _, q := range points[i+1:] {
				if (p.id == q.id) != (p.rows == q.rows) {
					rt.Fatalf("IDs equal: %v, catalogs equal: %v\n%s\n%s", p.id == q.id, p.rows == q.rows, p.where, q.where)
				}
			}
		}
	})
}

// catalogIDOf hashes the named relations' columns and rows: what the
// catalogs hold, which ddlID must tell apart. PostgreSQL's
// own rows (the first Sys of each) are the same in every build and are
// counted, not hashed.
func catalogIDOf(names []string, rels []*pgcatalog.Relation) catalogID {
	h := sha256.New()
	var b []byte
	for i, r := range rels {
		b = binary.AppendUvarint(b[:0], uint64(len(names[i])))
		b = append(b, names[i]...)
		b = binary.AppendUvarint(b, uint64(len(r.Cols)))
		for _, c := range r.Cols {
			b = binary.AppendUvarint(b, uint64(len(c.Name)))
			b = append(b, c.Name...)
			b = binary.AppendUvarint(b, uint64(c.Type.OID))
			b = binary.AppendVarint(b, int64(c.Type.Mod))
		}
		b = binary.AppendUvarint(b, uint64(r.Sys))
		b = binary.AppendUvarint(b, uint64(len(r.Rows)))
		h.Write(b)
		for _, row := range r.Rows[r.Sys:] {
			b = binary.AppendUvarint(b[:0], uint64(len(row)))
			for _, v := range row {
				b = append(b, byte(v.K))
				b = binary.AppendVarint(b, v.I)
				b = binary.AppendVarint(b, v.J)
				b = binary.AppendUvarint(b, uint64(len(v.S)))
				b = append(b, v.S...)
			}
			h.Write(b)
		}
	}
	var id catalogID
	h.Sum(id[:0])
	return id
}
