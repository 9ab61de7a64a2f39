package replay

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Group is the coarse kind of a statement shape, used to organise the
// inventory the way the executor is built.
type Group string

// Groups, in the order the inventory lists them.
const (
	GroupSession       Group = "session"       // BEGIN/COMMIT/SET/DISCARD/SHOW, FROM-less SELECTs (SELECT 1, version())
	GroupIntrospection Group = "introspection" // reads of pg_catalog / information_schema
	GroupCatalogRead   Group = "catalog-read"  // SELECT / COPY TO over the lake's own tables
	GroupWrite         Group = "write"         // INSERT / UPDATE / DELETE / COPY FROM
	GroupDDL           Group = "ddl"           // CREATE / DROP / ALTER
	GroupOther         Group = "other"
)

// Groups lists every Group in inventory order.
var Groups = []Group{GroupSession, GroupIntrospection, GroupCatalogRead, GroupWrite, GroupDDL, GroupOther}

// Field is one RowDescription column as PostgreSQL sent it. TableOID is
// volatile between servers (see docs/replay.md) and kept only as evidence of
// whether the column came from a table.
type Field struct {
	Name         string `json:"name"`
	TableOID     uint32 `json:"table_oid"`
	AttNum       uint16 `json:"attnum"`
	TypeOID      uint32 `json:"type_oid"`
	TypeSize     int16  `json:"type_size"`
	TypeModifier int32  `json:"type_modifier"`
	Format       int16  `json:"format"`
}

// Shape is one distinct statement shape: all statements with the same
// pg_query fingerprint (literal values do not matter, structure does).
type Shape struct {
	Fingerprint string   `json:"fingerprint"`
	Group       Group    `json:"group"`
	Normalized  string   `json:"normalized"` // pg_query Normalize of the first example (literals → $n)
	Tables      []string `json:"tables"`     // relations the statement names, in order of appearance
	Example     string   `json:"example"`    // the first occurrence, verbatim
	Count       int      `json:"count"`      // occurrences over all transcripts
	Protocol    []string `json:"protocol"`   // "simple" and/or "extended" (Parse + Describe)
	Scenarios   []string `json:"scenarios"`  // transcripts it occurs in
	// Result describes what the server answered, deduplicated:
	// RowDescriptions (TableOID zeroed when comparing for duplicates),
	// COPY column format codes, command tags with digits replaced by N, and
	// error SQLSTATEs.
	RowDescriptions [][]Field  `json:"row_descriptions,omitempty"`
	ParamOIDs       [][]uint32 `json:"param_oids,omitempty"`
	CopyOutFormats  [][]uint16 `json:"copy_out_formats,omitempty"`
	CopyInFormats   [][]uint16 `json:"copy_in_formats,omitempty"`
	Tags            []string   `json:"tags,omitempty"`
	// CopyColumns types the columns of a COPY (SELECT cols FROM rel) TO
	// STDOUT read, which has no RowDescription (see copycols.go).
	CopyColumns []CopyColumn `json:"copy_columns,omitempty"`
	copyRel     string
	Errors      []string `json:"errors,omitempty"` // "SQLSTATE message"
}

// Key returns the statement-shape key of one SQL statement: its pg_query
// fingerprint. This is the key the executor's plan cache uses too, so tests
// can assert that every inventoried shape is understood.
func Key(stmt string) (string, error) {
	fp, err := pg_query.Fingerprint(stmt)
	if err != nil {
		return "", fmt.Errorf("replay: fingerprint: %w", err)
	}
	return fp, nil
}

// shapeSet accumulates shapes in first-seen order.
type shapeSet struct {
	byKey map[string]*Shape
	order []*Shape
	book  schemaBook
}

// stmtRef points at the shape a statement in flight belongs to, so the
// server's answer can be attached to it.
type stmtRef struct {
	shape *Shape
}

// ExtractShapes derives the statement-shape inventory from transcripts:
// every statement a client sent (simple Query strings split into statements,
// Parse texts), keyed by fingerprint, with the server's answers attached.
func ExtractShapes(trs []*Transcript) ([]*Shape, error) {
	set := &shapeSet{byKey: map[string]*Shape{}, book: schemaBook{}}
	for _, tr := range trs {
		if err := set.addTranscript(tr); err != nil {
			return nil, fmt.Errorf("%s: %w", tr.Name, err)
		}
	}
	for _, s := range set.order {
		if s.copyRel != "" {
			s.typeCopyColumns(set.book, s.copyRel)
		}
		sort.Strings(s.Protocol)
		sort.Strings(s.Scenarios)
		sort.Strings(s.Tags)
		sort.Strings(s.Errors)
	}
	out := append([]*Shape(nil), set.order...)
	// Stable presentation: by group, then by descending count, then by text.
	gi := map[Group]int{}
	for i, g := range Groups {
		gi[g] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if gi[a.Group] != gi[b.Group] {
			return gi[a.Group] < gi[b.Group]
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Normalized < b.Normalized
	})
	return out, nil
}

func (set *shapeSet) add(stmt, protocol, scenario string) (*Shape, error) {
	key, err := Key(stmt)
	if err != nil {
		return nil, fmt.Errorf("statement %.80q: %w", stmt, err)
	}
	s := set.byKey[key]
	if s == nil {
		norm, err := pg_query.Normalize(stmt)
		if err != nil {
			return nil, fmt.Errorf("normalize %.80q: %w", stmt, err)
		}
		g, tables, err := classify(stmt)
		if err != nil {
			return nil, err
		}
		s = &Shape{Fingerprint: key, Group: g, Normalized: norm, Example: stmt, Tables: tables}
		if g == GroupCatalogRead {
			if rel, cols, ok := copySource(stmt); ok && rel != "" {
				s.copyRel = rel
				for _, c := range cols {
					s.CopyColumns = append(s.CopyColumns, CopyColumn{Name: c, MinBytes: -1, MaxBytes: -1})
				}
			}
		}
		set.byKey[key] = s
		set.order = append(set.order, s)
	}
	if s.Group == GroupDDL {
		set.book.learnDDL(stmt)
	}
	s.Count++
	s.Protocol = addString(s.Protocol, protocol)
	s.Scenarios = addString(s.Scenarios, scenario)
	return s, nil
}

func addString(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

var digitsRE = regexp.MustCompile(`[0-9]+`)

// connState follows one connection's statements so that each backend
// message can be attributed to the statement that caused it.
type connState struct {
	queue  []*Shape // statements of the current simple Query not yet answered
	parsed *Shape   // the last Parse'd (unnamed) statement, for Describe

	copyShape *Shape // the COPY OUT in progress, whose stream is copyBuf
	copyBuf   []byte
	copyBin   bool
}

func (set *shapeSet) addTranscript(tr *Transcript) error {
	conns := map[int]*connState{}
	for _, m := range tr.Messages {
		cs := conns[m.Conn]
		if cs == nil {
			cs = &connState{}
			conns[m.Conn] = cs
		}
		if m.Dir == Frontend {
			fm, err := m.FrontendMessage()
			if err != nil {
				return err
			}
			switch q := fm.(type) {
			case *pgproto3.Query:
				stmts, err := pg_query.SplitWithParser(q.String, true)
				if err != nil {
					return fmt.Errorf("seq %d: split query: %w", m.Seq, err)
				}
				cs.queue = cs.queue[:0]
				for _, st := range stmts {
					if st == "" {
						continue
					}
					s, err := set.add(st, "simple", tr.Name)
					if err != nil {
						return fmt.Errorf("seq %d: %w", m.Seq, err)
					}
					cs.queue = append(cs.queue, s)
				}
			case *pgproto3.Parse:
				s, err := set.add(strings.TrimSpace(q.Query), "extended", tr.Name)
				if err != nil {
					return fmt.Errorf("seq %d: %w", m.Seq, err)
				}
				cs.parsed = s
			}
			continue
		}
		cur := func() *Shape {
			if len(cs.queue) > 0 {
				return cs.queue[0]
			}
			return nil
		}
		switch m.Type {
		case "RowDescription":
			var rd pgproto3.RowDescription
			if err := json.Unmarshal(m.Raw, &rd); err != nil {
				return fmt.Errorf("seq %d: %w", m.Seq, err)
			}
			s := cur()
			if s == nil {
				s = cs.parsed // Describe of a prepared statement
			}
			if s != nil {
				s.RowDescriptions = addFields(s.RowDescriptions, rd.Fields)
			}
		case "ParameterDescription":
			var pd pgproto3.ParameterDescription
			if err := json.Unmarshal(m.Raw, &pd); err != nil {
				return fmt.Errorf("seq %d: %w", m.Seq, err)
			}
			if s := cs.parsed; s != nil {
				s.ParamOIDs = addUint32s(s.ParamOIDs, pd.ParameterOIDs)
			}
		case "CopyOutResponse", "CopyInResponse":
			var cr struct{ ColumnFormatCodes []uint16 }
			if err := json.Unmarshal(m.Raw, &cr); err != nil {
				return fmt.Errorf("seq %d: %w", m.Seq, err)
			}
			if s := cur(); s != nil {
				if m.Type == "CopyOutResponse" {
					s.CopyOutFormats = addUint16s(s.CopyOutFormats, cr.ColumnFormatCodes)
					cs.copyShape, cs.copyBuf, cs.copyBin = s, cs.copyBuf[:0], copyOverall(cr.ColumnFormatCodes) == 1
				} else {
					s.CopyInFormats = addUint16s(s.CopyInFormats, cr.ColumnFormatCodes)
				}
			}
		case "CopyData":
			if cs.copyShape != nil {
				var cd struct{ Data string }
				if err := json.Unmarshal(m.Raw, &cd); err != nil {
					return fmt.Errorf("seq %d: %w", m.Seq, err)
				}
				b, err := hex.DecodeString(cd.Data)
				if err != nil {
					return fmt.Errorf("seq %d: %w", m.Seq, err)
				}
				cs.copyBuf = append(cs.copyBuf, b...)
			}
		case "CopyDone":
			if s := cs.copyShape; s != nil {
				if len(s.CopyColumns) > 0 {
					if err := s.observeCopy(cs.copyBuf, cs.copyBin); err != nil {
						return fmt.Errorf("seq %d: %w", m.Seq, err)
					}
				}
				cs.copyShape = nil
			}
		case "CommandComplete":
			var cc struct{ CommandTag string }
			if err := json.Unmarshal(m.Raw, &cc); err != nil {
				return fmt.Errorf("seq %d: %w", m.Seq, err)
			}
			if s := cur(); s != nil {
				s.Tags = addString(s.Tags, digitsRE.ReplaceAllString(cc.CommandTag, "N"))
				cs.queue = cs.queue[1:]
			}
		case "EmptyQueryResponse":
			if len(cs.queue) > 0 {
				cs.queue = cs.queue[1:]
			}
		case "ErrorResponse":
			var er pgproto3.ErrorResponse
			if err := json.Unmarshal(m.Raw, &er); err != nil {
				return fmt.Errorf("seq %d: %w", m.Seq, err)
			}
			s := cur()
			if s == nil {
				s = cs.parsed
			}
			if s != nil {
				s.Errors = addString(s.Errors, er.Code+" "+digitsRE.ReplaceAllString(er.Message, "N"))
			}
			// The rest of a multi-statement Query is not executed.
			cs.queue = cs.queue[:0]
		case "ReadyForQuery":
			cs.queue = cs.queue[:0]
		}
	}
	return nil
}

func addFields(list [][]Field, fs []pgproto3.FieldDescription) [][]Field {
	conv := make([]Field, len(fs))
	for i, f := range fs {
		conv[i] = Field{Name: string(f.Name), TableOID: f.TableOID, AttNum: f.TableAttributeNumber,
			TypeOID: f.DataTypeOID, TypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format}
	}
	for _, have := range list {
		if sameFields(have, conv) {
			return list
		}
	}
	return append(list, conv)
}

// sameFields compares RowDescriptions ignoring TableOID, which differs
// between databases of the same shape.
func sameFields(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.TableOID, y.TableOID = 0, 0
		if (a[i].TableOID == 0) != (b[i].TableOID == 0) || x != y {
			return false
		}
	}
	return true
}

func addUint16s(list [][]uint16, v []uint16) [][]uint16 {
	for _, have := range list {
		if fmt.Sprint(have) == fmt.Sprint(v) {
			return list
		}
	}
	return append(list, append([]uint16{}, v...))
}

func addUint32s(list [][]uint32, v []uint32) [][]uint32 {
	for _, have := range list {
		if fmt.Sprint(have) == fmt.Sprint(v) {
			return list
		}
	}
	return append(list, append([]uint32{}, v...))
}

// classify assigns a statement to a Group from its parse tree and lists
// the relations it names.
func classify(stmt string) (Group, []string, error) {
	js, err := pg_query.ParseToJSON(stmt)
	if err != nil {
		return "", nil, fmt.Errorf("replay: parse %.80q: %w", stmt, err)
	}
	var whole any
	if err := json.Unmarshal([]byte(js), &whole); err != nil {
		return "", nil, fmt.Errorf("replay: parse tree: %w", err)
	}
	var tables []string
	for _, rv := range rangeVars(whole) {
		name, _ := rv["relname"].(string)
		if schema, _ := rv["schemaname"].(string); schema != "" {
			name = schema + "." + name
		}
		tables = addString(tables, name)
	}
	g, err := classifyTree(js)
	return g, tables, err
}

func classifyTree(js string) (Group, error) {
	var tree struct {
		Stmts []struct {
			Stmt map[string]json.RawMessage `json:"stmt"`
		} `json:"stmts"`
	}
	if err := json.Unmarshal([]byte(js), &tree); err != nil {
		return "", fmt.Errorf("replay: parse tree: %w", err)
	}
	if len(tree.Stmts) != 1 {
		return GroupOther, nil
	}
	var kind string
	var body json.RawMessage
	for k, v := range tree.Stmts[0].Stmt {
		kind, body = k, v
	}
	switch kind {
	case "TransactionStmt", "VariableSetStmt", "VariableShowStmt", "DiscardStmt":
		return GroupSession, nil
	case "InsertStmt", "UpdateStmt", "DeleteStmt":
		return GroupWrite, nil
	case "CreateStmt", "CreateSchemaStmt", "DropStmt", "AlterTableStmt", "RenameStmt", "IndexStmt", "CreateTableAsStmt", "ViewStmt":
		return GroupDDL, nil
	case "CopyStmt":
		var c struct {
			IsFrom bool `json:"is_from"`
		}
		if err := json.Unmarshal(body, &c); err != nil {
			return "", fmt.Errorf("replay: copy stmt: %w", err)
		}
		if c.IsFrom {
			return GroupWrite, nil
		}
		return readGroup(body), nil
	case "SelectStmt":
		return readGroup(body), nil
	}
	return GroupOther, nil
}

// readGroup classifies a read by the relations it names: any pg_catalog or
// information_schema relation makes it introspection, no relation at all a
// session statement (SELECT 1, version(), to_regclass(…)), anything else a
// read of the lake's own tables.
func readGroup(body json.RawMessage) Group {
	var tree any
	if err := json.Unmarshal(body, &tree); err != nil {
		return GroupOther
	}
	rels := rangeVars(tree)
	if len(rels) == 0 {
		return GroupSession
	}
	for _, rv := range rels {
		schema, _ := rv["schemaname"].(string)
		name, _ := rv["relname"].(string)
		if schema == "pg_catalog" || schema == "information_schema" || strings.HasPrefix(name, "pg_") {
			return GroupIntrospection
		}
	}
	return GroupCatalogRead
}

// rangeVars returns the RangeVar nodes of a decoded parse tree in document
// order (map keys visited sorted, so the order is deterministic).
func rangeVars(tree any) []map[string]any {
	var rels []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if rv, ok := x[k].(map[string]any); ok && k == "RangeVar" {
					rels = append(rels, rv)
				}
				walk(x[k])
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(tree)
	return rels
}
