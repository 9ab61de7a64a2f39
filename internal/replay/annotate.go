package replay

import (
	"encoding/json"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// stmtInfo is what the comparer needs to know about the statement that
// caused a recorded server message.
type stmtInfo struct {
	Text string
	// Ordered: the statement fixes its row order (ORDER BY at the top, or in
	// the only subquery a plain projection reads). Otherwise PostgreSQL
	// returns rows in physical order and they are compared as a multiset.
	Ordered bool
	// SortCols: when every ORDER BY key is an output column, their
	// indexes. Rows with equal keys (ties) come in PostgreSQL's physical or
	// plan order, so they compare as a multiset within each run of equal
	// keys. Nil with Ordered: the order is compared strictly.
	SortCols []int
	// Cluster: the result describes the whole server (pg_database), not the
	// connection's database; only the rows naming that database compare.
	Cluster bool
	// Version: the statement calls version(), whose text is server-specific.
	Version bool
}

// annotate attributes every recorded backend message to the statement that
// caused it, following the protocol: a simple Query's statements are
// answered in turn (each ends with CommandComplete or EmptyQueryResponse; an
// ErrorResponse abandons the rest), and Describe answers the last Parse.
// The result is indexed like t.Messages; frontend messages get nil.
func annotate(t *Transcript) []*stmtInfo {
	out := make([]*stmtInfo, len(t.Messages))
	type state struct {
		queue  []*stmtInfo
		parsed *stmtInfo
	}
	conns := map[int]*state{}
	for i, m := range t.Messages {
		st := conns[m.Conn]
		if st == nil {
			st = &state{}
			conns[m.Conn] = st
		}
		if m.Dir == Frontend {
			fm, err := t.frontend(i)
			if err != nil {
				continue // Load already rejected undecodable messages
			}
			switch q := fm.(type) {
			case *pgproto3.Query:
				st.queue = st.queue[:0]
				for _, s := range t.statements(q.String) {
					if s != "" {
						st.queue = append(st.queue, t.info(s))
					}
				}
			case *pgproto3.Parse:
				st.parsed = t.info(q.Query)
			}
			continue
		}
		if len(st.queue) > 0 {
			out[i] = st.queue[0]
		} else {
			out[i] = st.parsed
		}
		switch m.Type {
		case "CommandComplete", "EmptyQueryResponse":
			if len(st.queue) > 0 {
				st.queue = st.queue[1:]
			}
		case "ErrorResponse", "ReadyForQuery":
			st.queue = st.queue[:0]
		}
	}
	return out
}

// analyse derives stmtInfo from a statement's parse tree. A statement that
// does not parse is treated as ordered (compared strictly).
func analyse(text string) *stmtInfo {
	si := &stmtInfo{Text: text, Ordered: true}
	lower := strings.ToLower(text)
	si.Cluster = strings.Contains(lower, "pg_database")
	si.Version = strings.Contains(lower, "version()")
	js, err := pg_query.ParseToJSON(text)
	if err != nil {
		return si
	}
	var tree struct {
		Stmts []struct {
			Stmt map[string]map[string]json.RawMessage `json:"stmt"`
		} `json:"stmts"`
	}
	if err := json.Unmarshal([]byte(js), &tree); err != nil || len(tree.Stmts) != 1 {
		return si
	}
	st := tree.Stmts[0].Stmt
	var sel map[string]json.RawMessage
	switch {
	case st["SelectStmt"] != nil:
		sel = st["SelectStmt"]
	case st["CopyStmt"] != nil:
		var q struct {
			SelectStmt map[string]json.RawMessage `json:"SelectStmt"`
		}
		if raw := st["CopyStmt"]["query"]; raw != nil && json.Unmarshal(raw, &q) == nil && q.SelectStmt != nil {
			sel = q.SelectStmt
		} else {
			return si // COPY table TO: physical order, but none occur; strict
		}
	default:
		return si // not a row source
	}
	si.Ordered = selectOrdered(sel)
	if si.Ordered && sel["sortClause"] != nil {
		si.SortCols = sortColumns(sel)
	}
	return si
}

// sortColumns maps a SELECT's ORDER BY keys to output column indexes, or
// returns nil if any key is not an output column (an expression, or a
// column not selected): then the order is compared strictly, which is right
// when such hidden keys are unique tie-breakers (attnum, enumsortorder).
func sortColumns(sel map[string]json.RawMessage) []int {
	targets := sel["targetList"]
	if targets == nil {
		// A set operation: the output columns are the left branch's.
		var larg map[string]json.RawMessage
		if json.Unmarshal(sel["larg"], &larg) != nil {
			return nil
		}
		for larg["targetList"] == nil && larg["larg"] != nil {
			var next map[string]json.RawMessage
			if json.Unmarshal(larg["larg"], &next) != nil {
				return nil
			}
			larg = next
		}
		targets = larg["targetList"]
	}
	var tl []struct {
		ResTarget struct {
			Name string          `json:"name"`
			Val  json.RawMessage `json:"val"`
		} `json:"ResTarget"`
	}
	if json.Unmarshal(targets, &tl) != nil {
		return nil
	}
	type out struct {
		alias  string
		fields []string // of a plain column reference
	}
	outs := make([]out, len(tl))
	for i, t := range tl {
		outs[i] = out{alias: t.ResTarget.Name, fields: columnRefFields(t.ResTarget.Val)}
	}
	var keys []struct {
		SortBy struct {
			Node json.RawMessage `json:"node"`
		} `json:"SortBy"`
	}
	if json.Unmarshal(sel["sortClause"], &keys) != nil {
		return nil
	}
	var cols []int
	for _, k := range keys {
		var c struct {
			AConst *struct {
				Ival *struct {
					Ival int `json:"ival"`
				} `json:"ival"`
			} `json:"A_Const"`
		}
		if json.Unmarshal(k.SortBy.Node, &c) == nil && c.AConst != nil {
			if c.AConst.Ival == nil || c.AConst.Ival.Ival < 1 || c.AConst.Ival.Ival > len(outs) {
				return nil
			}
			cols = append(cols, c.AConst.Ival.Ival-1)
			continue
		}
		f := columnRefFields(k.SortBy.Node)
		if f == nil {
			return nil
		}
		match := -1
		for i, o := range outs { // an exact column reference wins
			if strings.Join(o.fields, ".") == strings.Join(f, ".") {
				match = i
				break
			}
		}
		if match < 0 && len(f) == 1 {
			for i, o := range outs {
				name := o.alias
				if name == "" && len(o.fields) > 0 {
					name = o.fields[len(o.fields)-1]
				}
				if name == f[0] {
					if match >= 0 {
						return nil // ambiguous
					}
					match = i
				}
			}
		}
		if match < 0 {
			return nil
		}
		cols = append(cols, match)
	}
	return cols
}

// columnRefFields returns the names of a ColumnRef node, nil for anything
// else (including a * reference).
func columnRefFields(raw json.RawMessage) []string {
	var n struct {
		ColumnRef *struct {
			Fields []struct {
				String *struct {
					Sval string `json:"sval"`
				} `json:"String"`
			} `json:"fields"`
		} `json:"ColumnRef"`
	}
	if json.Unmarshal(raw, &n) != nil || n.ColumnRef == nil {
		return nil
	}
	var out []string
	for _, f := range n.ColumnRef.Fields {
		if f.String == nil {
			return nil
		}
		out = append(out, f.String.Sval)
	}
	return out
}

// selectOrdered reports whether a SELECT's output order is fixed: it has a
// top-level ORDER BY, it reads no relation (one row), or it is a plain projection (no WHERE, GROUP BY,
// DISTINCT, set operation or join) of a single subquery that is ordered.
func selectOrdered(sel map[string]json.RawMessage) bool {
	if sel["sortClause"] != nil {
		return true
	}
	if sel["fromClause"] == nil && (sel["op"] == nil || string(sel["op"]) == `"SETOP_NONE"`) {
		return true // SELECT 1, version(): one row
	}
	if sel["whereClause"] != nil || sel["groupClause"] != nil || sel["distinctClause"] != nil ||
		sel["op"] != nil && string(sel["op"]) != `"SETOP_NONE"` {
		return false
	}
	var from []struct {
		RangeSubselect *struct {
			Subquery struct {
				SelectStmt map[string]json.RawMessage `json:"SelectStmt"`
			} `json:"subquery"`
		} `json:"RangeSubselect"`
	}
	if raw := sel["fromClause"]; raw == nil || json.Unmarshal(raw, &from) != nil || len(from) != 1 || from[0].RangeSubselect == nil {
		return false
	}
	sub := from[0].RangeSubselect.Subquery.SelectStmt
	return sub != nil && selectOrdered(sub)
}
