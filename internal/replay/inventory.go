package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

var (
	inlinedRE       = regexp.MustCompile(`(ducklake_inlined_data_)[0-9]+_[0-9]+`)
	inlinedDeleteRE = regexp.MustCompile(`(ducklake_inlined_delete_)[0-9]+`)
)

// typeNames names the PostgreSQL type OIDs that occur in the fixtures'
// RowDescriptions, for the human-readable inventory only.
var typeNames = map[uint32]string{
	16: "bool", 17: "bytea", 18: "char", 19: "name", 20: "int8", 21: "int2", 22: "int2vector",
	23: "int4", 24: "regproc", 25: "text", 26: "oid", 28: "xid", 30: "oidvector", 114: "json",
	194: "pg_node_tree", 700: "float4", 701: "float8", 1000: "bool[]", 1002: "char[]",
	1005: "int2[]", 1007: "int4[]", 1009: "text[]", 1016: "int8[]", 1028: "oid[]",
	1034: "aclitem[]", 1042: "bpchar", 1043: "varchar", 1082: "date", 1083: "time",
	1114: "timestamp", 1184: "timestamptz", 1186: "interval", 1700: "numeric",
	2205: "regclass", 2206: "regtype", 2950: "uuid", 3802: "jsonb", 4089: "regnamespace",
}

// TypeName returns a PostgreSQL type's name for display, or its OID.
func TypeName(oid uint32) string {
	if n, ok := typeNames[oid]; ok {
		return n
	}
	return fmt.Sprintf("oid %d", oid)
}

var groupTitles = map[Group]string{
	GroupSession:       "Session and transaction statements",
	GroupIntrospection: "Introspection queries (pg_catalog, information_schema)",
	GroupCatalogRead:   "Catalog reads (the lake's own tables)",
	GroupWrite:         "Writes (INSERT, UPDATE, DELETE, COPY FROM STDIN)",
	GroupDDL:           "DDL",
	GroupOther:         "Others",
}

// RenderInventory renders shapes as the Markdown document
// testdata/shapes/inventory.md. The output is deterministic.
func RenderInventory(shapes []*Shape, sources []string) []byte {
	var b bytes.Buffer
	total := 0
	count := map[Group][2]int{}
	for _, s := range shapes {
		c := count[s.Group]
		c[0]++
		c[1] += s.Count
		count[s.Group] = c
		total += s.Count
	}
	fmt.Fprintf(&b, "# Statement shapes in the captured DuckLake conversations\n\n")
	fmt.Fprintf(&b, "Generated from %s by `go test ./internal/replay -run TestInventory -update`;\n", strings.Join(sources, ", "))
	fmt.Fprintf(&b, "do not edit by hand. The machine-readable twin is `shapes.json` (read it with `replay.ReadInventory`).\n\n")
	fmt.Fprintf(&b, "A *shape* is every statement with the same `pg_query` fingerprint: literal values do not matter,\n")
	fmt.Fprintf(&b, "structure (tables, columns, operators, clause layout) does. Simple-protocol Query strings are split\n")
	fmt.Fprintf(&b, "into statements with the PostgreSQL grammar; Parse texts (extended protocol: Parse, Sync,\n")
	fmt.Fprintf(&b, "Describe S, Sync, never executed) are shapes of their own. For each shape: occurrences, scenarios,\n")
	fmt.Fprintf(&b, "the normalized text, one full example, and what PostgreSQL 15 answered (RowDescription columns;\n")
	fmt.Fprintf(&b, "table OIDs are server-specific, attnum is the column's position in its table), COPY format codes,\n")
	fmt.Fprintf(&b, "command tags with digits replaced by N, and errors.\n\n")
	fmt.Fprintf(&b, "| group | shapes | occurrences |\n| --- | ---: | ---: |\n")
	for _, g := range Groups {
		fmt.Fprintf(&b, "| [%s](#%s) | %d | %d |\n", groupTitles[g], anchor(groupTitles[g]), count[g][0], count[g][1])
	}
	fmt.Fprintf(&b, "| total | %d | %d |\n\n", len(shapes), total)
	// Index: which shapes touch which relation, per group. DuckLake's
	// per-table inlined relations are folded into one family name.
	fmt.Fprintf(&b, "## Index by relation\n\n| group | relation | shapes |\n| --- | --- | --- |\n")
	num := map[*Shape]int{}
	for i, s := range shapes {
		num[s] = i + 1
	}
	for _, g := range Groups {
		byRel := map[string][]string{}
		var rels []string
		for _, s := range shapes {
			if s.Group != g {
				continue
			}
			for _, t := range s.Tables {
				t = inlinedRE.ReplaceAllString(t, "${1}<table>_<version>")
				t = inlinedDeleteRE.ReplaceAllString(t, "${1}<table>")
				ref := fmt.Sprintf("[%d](#%d)", num[s], num[s])
				if l := byRel[t]; len(l) > 0 && l[len(l)-1] == ref {
					continue
				}
				if byRel[t] == nil {
					rels = append(rels, t)
				}
				byRel[t] = append(byRel[t], ref)
			}
		}
		sort.Strings(rels)
		for _, r := range rels {
			fmt.Fprintf(&b, "| %s | `%s` | %s |\n", g, r, strings.Join(byRel[r], " "))
		}
	}
	b.WriteString("\n")
	n := 0
	for _, g := range Groups {
		fmt.Fprintf(&b, "## %s\n\n", groupTitles[g])
		if count[g][0] == 0 {
			fmt.Fprintf(&b, "None.\n\n")
			continue
		}
		for _, s := range shapes {
			if s.Group != g {
				continue
			}
			n++
			fmt.Fprintf(&b, "<a id=\"%d\"></a>\n### %d. `%s`\n\n", n, n, headline(s.Normalized))
			fmt.Fprintf(&b, "- fingerprint `%s`, %d× (%s), in %s\n", s.Fingerprint, s.Count,
				strings.Join(s.Protocol, ", "), strings.Join(s.Scenarios, ", "))
			if len(s.Tags) > 0 {
				fmt.Fprintf(&b, "- command tags: %s\n", codeList(s.Tags))
			}
			for _, f := range s.CopyOutFormats {
				fmt.Fprintf(&b, "- COPY OUT, %d columns, format codes %v\n", len(f), f)
			}
			for _, f := range s.CopyInFormats {
				fmt.Fprintf(&b, "- COPY IN, %d columns, format codes %v\n", len(f), f)
			}
			for _, p := range s.ParamOIDs {
				fmt.Fprintf(&b, "- ParameterDescription %v\n", p)
			}
			if len(s.Errors) > 0 {
				fmt.Fprintf(&b, "- errors: %s\n", codeList(s.Errors))
			}
			if s.Normalized != s.Example {
				fmt.Fprintf(&b, "\nNormalized:\n\n```sql\n%s\n```\n", s.Normalized)
			}
			fmt.Fprintf(&b, "\nExample:\n\n```sql\n%s\n```\n", s.Example)
			if len(s.CopyColumns) > 0 {
				fmt.Fprintf(&b, "\nCOPY OUT columns (types from the fixtures' DDL for `%s`; field sizes as recorded):\n\n", s.copyRelName())
				fmt.Fprintf(&b, "| # | column | declared type | bytes | NULL seen |\n| ---: | --- | --- | --- | --- |\n")
				for j, c := range s.CopyColumns {
					types := strings.Join(c.Types, ", ")
					if types == "" {
						types = "?"
					}
					size := "no value seen"
					switch {
					case c.MinBytes < 0:
					case c.MinBytes == c.MaxBytes:
						size = fmt.Sprint(c.MinBytes)
					default:
						size = fmt.Sprintf("%d–%d", c.MinBytes, c.MaxBytes)
					}
					null := "no"
					if c.Null {
						null = "yes"
					}
					fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %s |\n", j+1, c.Name, types, size, null)
				}
			}
			for i, rd := range s.RowDescriptions {
				title := "RowDescription"
				if len(s.RowDescriptions) > 1 {
					title = fmt.Sprintf("RowDescription (variant %d)", i+1)
				}
				fmt.Fprintf(&b, "\n%s:\n\n| # | name | from table | attnum | type | type oid | size | typmod | format |\n", title)
				fmt.Fprintf(&b, "| ---: | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
				for j, f := range rd {
					from := "no"
					if f.TableOID != 0 {
						from = "yes"
					}
					fmt.Fprintf(&b, "| %d | `%s` | %s | %d | %s | %d | %d | %d | %d |\n", j+1, f.Name, from,
						f.AttNum, TypeName(f.TypeOID), f.TypeOID, f.TypeSize, f.TypeModifier, f.Format)
				}
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

func codeList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "`" + x + "`"
	}
	return strings.Join(q, ", ")
}

// headline is a one-line, bounded form of a statement for a heading.
func headline(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	return s
}

func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// MarshalInventory encodes shapes as the JSON document testdata/shapes/shapes.json.
func MarshalInventory(shapes []*Shape) ([]byte, error) {
	b, err := json.MarshalIndent(shapes, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("replay: marshal inventory: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadInventory reads testdata/shapes/shapes.json: the list of statement
// shapes the fixtures contain. Executor tests use it to assert coverage,
// e.g. that Key(stmt) of every shape's Example is understood.
func ReadInventory(path string) ([]*Shape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read inventory: %w", err)
	}
	var shapes []*Shape
	if err := json.Unmarshal(b, &shapes); err != nil {
		return nil, fmt.Errorf("replay: decode inventory %s: %w", path, err)
	}
	return shapes, nil
}

// copyRelName is the relation a COPY OUT shape reads, for display; shapes
// read back from JSON do not carry it and show their first table.
func (s *Shape) copyRelName() string {
	if s.copyRel != "" {
		return s.copyRel
	}
	if len(s.Tables) > 0 {
		return s.Tables[0]
	}
	return "?"
}
