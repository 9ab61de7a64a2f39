package sql

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/moraine-db/moraine/internal/datum"
)

func constsInOrder(m protoreflect.Message, out *[]*pg.A_Const) {
	if c, ok := m.Interface().(*pg.A_Const); ok {
		*out = append(*out, c)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				constsInOrder(l.Get(i).Message(), out)
			}
		case !fd.IsMap() && fd.Message() != nil:
			constsInOrder(v.Message(), out)
		}
		return true
	})
}

// checkTemplate compares what the plan cache returns for sql with a fresh
// parse: the same statements, and every literal with the same value.
func checkTemplate(t *testing.T, c *parseCache, sql string) {
	t.Helper()
	got, err := c.parse(sql)
	res, ferr := pg.Parse(sql)
	if (err != nil) != (ferr != nil) {
		t.Fatalf("%q: cache error %v, parse error %v", sql, err, ferr)
	}
	if err != nil {
		return
	}
	if len(got) != len(res.Stmts) {
		t.Fatalf("%q: %d statements, want %d", sql, len(got), len(res.Stmts))
	}
	for i, st := range got {
		var a, b []*pg.A_Const
		constsInOrder(st.node.ProtoReflect(), &a)
		constsInOrder(res.Stmts[i].Stmt.ProtoReflect(), &b)
		if len(a) != len(b) {
			t.Fatalf("%q: %d constants, want %d", sql, len(a), len(b))
		}
		x := &exec{lits: st.lits}
		for j := range a {
			va, erra := x.constValue(a[j])
			vb, errb := constValue(b[j])
			if (erra != nil) != (errb != nil) || va.t != vb.t || datum.Compare(va.v, vb.v) != 0 || va.v.K != vb.v.K {
				t.Fatalf("%q: constant %d is %v/%v, want %v/%v", sql, j, va, erra, vb, errb)
			}
		}
	}
}

func TestTemplateCache(t *testing.T) {
	c := newParseCache(1 << 16)
	texts := []string{
		`INSERT INTO t VALUES (1, 'a', -2, 1.5, NULL, true)`,
		`INSERT INTO t VALUES (3000000000, 'it''s', -2147483648, 0.25, NULL, true)`,
		`INSERT INTO t VALUES (7, '', - 9, 1e3, NULL, true)`,
		`SELECT a FROM t WHERE b = 'x' ORDER BY 1 LIMIT 5`,
		`SELECT a FROM t WHERE b = 'z' ORDER BY 1 LIMIT 7`,
		`SELECT a FROM t WHERE b = 'y' ORDER BY 2 LIMIT 6`,
		`SELECT CAST(a AS VARCHAR(10)) FROM t WHERE c IN (1, 2, 3)`,
		`SELECT CAST(a AS VARCHAR(12)) FROM t WHERE c IN (4, 5, 6)`,
		`UPDATE t SET a = 2 WHERE ctid IN ('(0,1)', '(0,2)')`,
		`SELECT E'a\nb', 1`,
		`SELECT $$x$$, 2`,
	}
	for _, s := range texts {
		before := c.stats.shapeHits
		checkTemplate(t, c, s)
		if c.stats.shapeHits != before {
			t.Logf("template hit: %s", s)
		}
	}
	// Hits: the second INSERT and the third SELECT; ORDER BY 2 and
	// VARCHAR(12) differ in a structural literal and are parsed.
	if c.stats.shapeHits != 2 {
		t.Errorf("template hits %d, want 2", c.stats.shapeHits)
	}
	// Every Query text of the captured conversations.
	files, _ := filepath.Glob(filepath.Join(fixtureDir(t), "*.jsonl"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range splitLines(data) {
			var m struct {
				Dir, Type string
				Msg       struct{ String, Query string }
			}
			if json.Unmarshal(line, &m) != nil || m.Dir != "F" {
				continue
			}
			q := m.Msg.String
			if m.Type == "Parse" {
				q = m.Msg.Query
			} else if m.Type != "Query" {
				continue
			}
			checkTemplate(t, c, q)
			n++
		}
	}
	t.Logf("%d fixture texts: %d parses, %d exact hits, %d template hits", n, c.stats.parses, c.stats.exactHits, c.stats.shapeHits)
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

// TestSessionBindBuffer: a simple query binds a template's literals into
// memory its session reuses for the next query, which is only right for
// statements that die with their query. A prepared statement's must be its
// own: a later query of the same shape must not change them.
func TestSessionBindBuffer(t *testing.T) {
	ctx := context.Background()
	s := testServer().Open("lake", "postgres", "", 1)
	defer s.Close()
	if out := runSQL(ctx, s, `SELECT 10 AS a, 'x' AS b`, ""); !strings.Contains(out, "10") {
		t.Fatalf("first query: %s", out)
	}
	st, err := s.Prepare(ctx, `SELECT 20 AS a, 'y' AS b`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := st.(*prepared)
	if ps.stmts[0].lits == nil {
		t.Fatal("the prepared text was not a template hit; the test needs one")
	}
	out := runSQL(ctx, s, `SELECT 30 AS a, 'z' AS b`, "")
	if !strings.Contains(out, "30") || !strings.Contains(out, "z") {
		t.Fatalf("second query: %s", out)
	}
	if s.ex.cache.stats.shapeHits < 2 {
		t.Fatalf("shape hits %d: the queries did not share a template", s.ex.cache.stats.shapeHits)
	}
	var got []string
	for _, v := range ps.stmts[0].lits.vals {
		got = append(got, datum.FormatText(v.t, v.v))
	}
	if strings.Join(got, ",") != "20,y" {
		t.Fatalf("the prepared statement's literals are %v after a later query, want [20 y]", got)
	}
	if len(s.bound.lits.vals) != 0 || len(s.bound.stmts) != 0 {
		t.Fatalf("the session's bind buffer still holds %d values and %d statements after its query", len(s.bound.lits.vals), len(s.bound.stmts))
	}
}
