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
	cache := map[string]*stmtInfo{}
	info := func(text string) *stmtInfo {
		if si, ok := cache[text]; ok {
			return si
		}
		si := analyse(text)
		cache[text] = si
		return si
	}
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
			fm, err := m.FrontendMessage()
			if err != nil {
				continue // Load already rejected undecodable messages
			}
			switch q := fm.(type) {
			case *pgproto3.Query:
				st.queue = st.queue[:0]
				stmts, err := pg_query.SplitWithParser(q.String, true)
				if err != nil {
					stmts = []string{q.String}
				}
				for _, s := range stmts {
					if s != "" {
						st.queue = append(st.queue, info(s))
					}
				}
			case *pgproto3.Parse:
				st.parsed = info(q.Query)
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
	return si
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
