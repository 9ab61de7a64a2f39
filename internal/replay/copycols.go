package replay

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// COPY OUT reads carry no RowDescription, yet the executor must encode each
// column in PostgreSQL's binary format. The inventory therefore types them
// from the DDL the clients sent (CREATE TABLE, ALTER TABLE ADD/RENAME
// COLUMN) and records the field sizes actually seen in the recorded COPY
// streams.

// CopyColumn is one column of a COPY OUT read.
type CopyColumn struct {
	Name     string   `json:"name"`
	Types    []string `json:"types,omitempty"` // declared types seen in the fixtures' DDL for this table and column
	MinBytes int      `json:"min_bytes"`       // smallest non-NULL field seen, -1 if none
	MaxBytes int      `json:"max_bytes"`       // largest non-NULL field seen, -1 if none
	Null     bool     `json:"null"`            // a NULL was seen
}

// schemaBook records the declared column types of the relations created by
// the fixtures, as a union over all transcripts (a column may be declared
// differently by different catalog versions).
type schemaBook map[string]map[string][]string // relation → column → types

func (b schemaBook) add(rel, col, typ string) {
	if b[rel] == nil {
		b[rel] = map[string][]string{}
	}
	b[rel][col] = addString(b[rel][col], typ)
}

// learnDDL updates the book from one statement; anything that is not a
// CREATE TABLE or ALTER TABLE is ignored.
func (b schemaBook) learnDDL(stmt string) {
	js, err := pg_query.ParseToJSON(stmt)
	if err != nil {
		return
	}
	var tree struct {
		Stmts []struct {
			Stmt struct {
				CreateStmt *struct {
					Relation  rangeVarJSON      `json:"relation"`
					TableElts []json.RawMessage `json:"tableElts"`
				} `json:"CreateStmt"`
				AlterTableStmt *struct {
					Relation rangeVarJSON `json:"relation"`
					Cmds     []struct {
						AlterTableCmd struct {
							Subtype string          `json:"subtype"`
							Def     json.RawMessage `json:"def"`
						} `json:"AlterTableCmd"`
					} `json:"cmds"`
				} `json:"AlterTableStmt"`
				RenameStmt *struct {
					RenameType string       `json:"renameType"`
					Relation   rangeVarJSON `json:"relation"`
					Subname    string       `json:"subname"`
					Newname    string       `json:"newname"`
				} `json:"RenameStmt"`
			} `json:"stmt"`
		} `json:"stmts"`
	}
	if json.Unmarshal([]byte(js), &tree) != nil || len(tree.Stmts) != 1 {
		return
	}
	st := tree.Stmts[0].Stmt
	switch {
	case st.CreateStmt != nil:
		for _, e := range st.CreateStmt.TableElts {
			if name, typ, ok := columnDef(e); ok {
				b.add(st.CreateStmt.Relation.Relname, name, typ)
			}
		}
	case st.AlterTableStmt != nil:
		for _, c := range st.AlterTableStmt.Cmds {
			if c.AlterTableCmd.Subtype == "AT_AddColumn" {
				if name, typ, ok := columnDef(c.AlterTableCmd.Def); ok {
					b.add(st.AlterTableStmt.Relation.Relname, name, typ)
				}
			}
		}
	case st.RenameStmt != nil && st.RenameStmt.RenameType == "OBJECT_COLUMN":
		rel := st.RenameStmt.Relation.Relname
		for _, typ := range b[rel][st.RenameStmt.Subname] {
			b.add(rel, st.RenameStmt.Newname, typ)
		}
	}
}

type rangeVarJSON struct {
	Relname string `json:"relname"`
}

// columnDef extracts a ColumnDef's name and declared type ("int8",
// "numeric(10,2)", "varchar[]").
func columnDef(raw json.RawMessage) (string, string, bool) {
	var e struct {
		ColumnDef *struct {
			Colname  string `json:"colname"`
			TypeName struct {
				Names []struct {
					String struct {
						Sval string `json:"sval"`
					} `json:"String"`
				} `json:"names"`
				Typmods []struct {
					AConst struct {
						Ival struct {
							Ival int `json:"ival"`
						} `json:"ival"`
					} `json:"A_Const"`
				} `json:"typmods"`
				ArrayBounds []json.RawMessage `json:"arrayBounds"`
			} `json:"typeName"`
		} `json:"ColumnDef"`
	}
	if json.Unmarshal(raw, &e) != nil || e.ColumnDef == nil || len(e.ColumnDef.TypeName.Names) == 0 {
		return "", "", false
	}
	tn := e.ColumnDef.TypeName
	typ := tn.Names[len(tn.Names)-1].String.Sval
	if len(tn.Typmods) > 0 {
		mods := make([]string, len(tn.Typmods))
		for i, m := range tn.Typmods {
			mods[i] = strconv.Itoa(m.AConst.Ival.Ival)
		}
		typ += "(" + strings.Join(mods, ",") + ")"
	}
	typ += strings.Repeat("[]", len(tn.ArrayBounds))
	return e.ColumnDef.Colname, typ, true
}

// copySource names the relation and the output columns of a
// `COPY (SELECT cols FROM rel …) TO STDOUT`. ok is false for other shapes
// (a subquery source, expressions without a name).
func copySource(stmt string) (rel string, cols []string, ok bool) {
	js, err := pg_query.ParseToJSON(stmt)
	if err != nil {
		return "", nil, false
	}
	var tree struct {
		Stmts []struct {
			Stmt struct {
				CopyStmt *struct {
					Query struct {
						SelectStmt *struct {
							TargetList []struct {
								ResTarget struct {
									Name string          `json:"name"`
									Val  json.RawMessage `json:"val"`
								} `json:"ResTarget"`
							} `json:"targetList"`
							FromClause []struct {
								RangeVar *rangeVarJSON `json:"RangeVar"`
							} `json:"fromClause"`
						} `json:"SelectStmt"`
					} `json:"query"`
				} `json:"CopyStmt"`
			} `json:"stmt"`
		} `json:"stmts"`
	}
	if json.Unmarshal([]byte(js), &tree) != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.CopyStmt == nil {
		return "", nil, false
	}
	sel := tree.Stmts[0].Stmt.CopyStmt.Query.SelectStmt
	if sel == nil {
		return "", nil, false
	}
	if len(sel.FromClause) == 1 && sel.FromClause[0].RangeVar != nil {
		rel = sel.FromClause[0].RangeVar.Relname
	}
	for _, t := range sel.TargetList {
		name := t.ResTarget.Name
		if name == "" {
			var cr struct {
				ColumnRef *struct {
					Fields []struct {
						String *struct {
							Sval string `json:"sval"`
						} `json:"String"`
					} `json:"fields"`
				} `json:"ColumnRef"`
			}
			if json.Unmarshal(t.ResTarget.Val, &cr) == nil && cr.ColumnRef != nil && len(cr.ColumnRef.Fields) > 0 {
				if f := cr.ColumnRef.Fields[len(cr.ColumnRef.Fields)-1].String; f != nil {
					name = f.Sval
				}
			}
		}
		if name == "" {
			name = "?column?"
		}
		cols = append(cols, name)
	}
	return rel, cols, true
}

// observeCopy folds one recorded COPY OUT stream into a shape's columns.
func (s *Shape) observeCopy(stream []byte, binaryFormat bool) error {
	rows, err := decodeCopy(stream, binaryFormat)
	if err != nil {
		return fmt.Errorf("copy stream of %.60q: %w", s.Example, err)
	}
	for _, r := range rows {
		for i, v := range r {
			if i >= len(s.CopyColumns) {
				break
			}
			c := &s.CopyColumns[i]
			if v == nil {
				c.Null = true
				continue
			}
			if c.MinBytes < 0 || len(v) < c.MinBytes {
				c.MinBytes = len(v)
			}
			if len(v) > c.MaxBytes {
				c.MaxBytes = len(v)
			}
		}
	}
	return nil
}

// typeCopyColumns sets the declared types of a COPY OUT shape's columns
// from the book, once all DDL is known.
func (s *Shape) typeCopyColumns(book schemaBook, rel string) {
	for i := range s.CopyColumns {
		types := append([]string(nil), book[rel][s.CopyColumns[i].Name]...)
		sort.Strings(types)
		switch {
		case len(types) > 0:
		case s.CopyColumns[i].Name == "ctid":
			types = []string{"tid (system column)"}
		case s.CopyColumns[i].Name == "?column?":
			types = []string{"expression (e.g. NULL)"}
		}
		s.CopyColumns[i].Types = types
	}
}
