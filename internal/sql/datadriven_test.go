package sql

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/pgwire/pgcopy"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/sql/*.txt")

// textSink renders results the way the datadriven files show them.
type textSink struct {
	b     strings.Builder
	stdin string
}

func (t *textSink) rows(cols []colInfo, rows [][]datum.Value, tag string) error {
	t.header(cols)
	for _, r := range rows {
		t.row(cols, r)
	}
	fmt.Fprintf(&t.b, "%s\n", tag)
	return nil
}

func (t *textSink) header(cols []colInfo) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.name + ":" + outType(c.typ).TypeName()
		if c.tableOID != 0 {
			parts[i] += fmt.Sprintf("@%d", c.attnum)
		}
	}
	fmt.Fprintf(&t.b, "%s\n", strings.Join(parts, " | "))
}

func (t *textSink) row(cols []colInfo, r []datum.Value) {
	parts := make([]string, len(r))
	for i, v := range r {
		if v.IsNull() {
			parts[i] = "NULL"
			continue
		}
		parts[i] = datum.FormatText(outType(cols[i].typ), v)
	}
	fmt.Fprintf(&t.b, "%s\n", strings.Join(parts, " | "))
}

func (t *textSink) complete(tag string) error {
	fmt.Fprintf(&t.b, "%s\n", tag)
	return nil
}

func (t *textSink) notice(n *pgwire.Error) {
	sev := n.Severity
	if sev == "" {
		sev = "NOTICE"
	}
	fmt.Fprintf(&t.b, "%s %s: %s\n", sev, n.Code, n.Message)
}

func (t *textSink) parameter(name, value string) { fmt.Fprintf(&t.b, "PARAMETER %s=%s\n", name, value) }

func (t *textSink) copyOut(format int16, cols []colInfo, src rowSource) error {
	rows, err := collect(src)
	if err != nil {
		return err
	}
	fmt.Fprintf(&t.b, "COPY OUT format=%d\n", format)
	// Round-trip every value through the wire encoding the client sees.
	for _, r := range rows {
		for i, v := range r {
			if v.IsNull() {
				continue
			}
			b, err := encodeCell(nil, cols[i].typ, v, format)
			if err != nil {
				return err
			}
			if format == 1 {
				back, err := datum.DecodeBinary(outType(cols[i].typ), b)
				if err != nil || datum.Compare(back, v) != 0 {
					return fmt.Errorf("binary round trip of %v failed: %v", v, err)
				}
			}
		}
	}
	t.header(cols)
	for _, r := range rows {
		t.row(cols, r)
	}
	fmt.Fprintf(&t.b, "COPY %d\n", len(rows))
	return nil
}

func (t *textSink) copyIn(format int16, ncols int, null string) (copySource, error) {
	if format != 0 {
		return nil, errors.New("datadriven COPY IN is text only")
	}
	r := pgcopy.NewTextCopyReader(strings.NewReader(t.stdin))
	r.Null = null
	return &textSource{r: r}, nil
}

// testServer is a catalog server with a fixed clock.
// lakeSession opens a session on database "lake" of a fresh test executor
// (closed when the test ends) and runs setup in it, failing on any error.
func lakeSession(t *testing.T, setup string) (*Executor, *Session) {
	t.Helper()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	t.Cleanup(func() { s.Close() })
	if out := runSQL(context.Background(), s, setup, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	return ex, s
}

func testServer() *Executor {
	ex := New(memcat.NewServer("lake"))
	ex.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC) }
	return ex
}

// TestDatadriven runs testdata/sql/*.txt. The format: each case starts with
// a directive line — "query" (run in the current session), or "session
// NAME [DB]" (switch to, or open, a session) — then the SQL up to a line
// "----", then the expected output up to a blank line. COPY FROM STDIN data
// goes after the SQL, introduced by a line "<<<" (text format rows). Run
// with -rewrite to regenerate the expected outputs.
func TestDatadriven(t *testing.T) {
	files, err := filepath.Glob("../../testdata/sql/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runFile(t, f) })
	}
}

type ddCase struct {
	directive string
	sql       string
	stdin     string
	expected  string
	line      int
}

func parseCases(t *testing.T, text string) []ddCase {
	var cases []ddCase
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := ddCase{directive: l, line: i + 1}
		i++
		var sqlLines, stdin []string
		inStdin := false
		for ; i < len(lines) && lines[i] != "----"; i++ {
			if lines[i] == "<<<" {
				inStdin = true
				continue
			}
			if inStdin {
				stdin = append(stdin, lines[i])
			} else {
				sqlLines = append(sqlLines, lines[i])
			}
		}
		if i >= len(lines) {
			t.Fatalf("line %d: case without ----", c.line)
		}
		i++
		var exp []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.sql = strings.Join(sqlLines, "\n")
		if len(stdin) > 0 {
			c.stdin = strings.Join(stdin, "\n") + "\n"
		}
		c.expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases
}

func runFile(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := parseCases(t, string(data))
	ex := testServer()
	sessions := map[string]*Session{}
	cur := ex.Open("lake", "postgres", "", 1)
	sessions["a"] = cur
	var out strings.Builder
	ctx := context.Background()
	for _, c := range cases {
		var got string
		fields := strings.Fields(c.directive)
		switch fields[0] {
		case "session":
			name := fields[1]
			s, ok := sessions[name]
			if !ok {
				db := "lake"
				if len(fields) > 2 {
					db = fields[2]
				}
				s = ex.Open(db, "postgres", "", uint32(len(sessions)+1))
				sessions[name] = s
			}
			cur = s
			got = ""
			if c.sql != "" {
				got = runSQL(ctx, cur, c.sql, c.stdin)
			}
		case "query":
			got = runSQL(ctx, cur, c.sql, c.stdin)
		default:
			t.Fatalf("%s:%d: unknown directive %q", path, c.line, c.directive)
		}
		got = strings.TrimRight(got, "\n")
		if *rewrite {
			out.WriteString(c.directive + "\n" + c.sql + "\n")
			if c.stdin != "" {
				out.WriteString("<<<\n" + c.stdin)
			}
			out.WriteString("----\n" + got + "\n\n")
			continue
		}
		if got != c.expected {
			t.Errorf("%s:%d:\n%s\n--- got ---\n%s\n--- want ---\n%s", path, c.line, c.sql, got, c.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runSQL(ctx context.Context, s *Session, sql, stdin string) string {
	ts := &textSink{stdin: stdin}
	err := s.query(ctx, sql, ts)
	if err != nil {
		if pe, ok := wireError(err); ok {
			fmt.Fprintf(&ts.b, "ERROR %s: %s\n", pe.Code, pe.Message)
			if pe.Detail != "" {
				fmt.Fprintf(&ts.b, "DETAIL: %s\n", pe.Detail)
			}
		} else {
			fmt.Fprintf(&ts.b, "ERROR (untyped): %v\n", err)
		}
	}
	fmt.Fprintf(&ts.b, "status %c", s.TxStatus())
	return ts.b.String()
}
