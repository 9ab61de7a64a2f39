package sql

import (
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Read-only serving. A replica refuses every statement that could change the
// catalog, as PostgreSQL's hot standby does (25006 "cannot execute INSERT in
// a read-only transaction"), and a writer whose store refuses writes
// refuses them with the store's error (Executor.WriteRefusal). The decision
// is made on the statement's own parse tree, before it runs: a write hidden
// in a data-modifying CTE or a COPY FROM is caught too.

// admitWrite refuses st if the executor serves reads only and st writes.
func (s *Session) admitWrite(st stmt) error {
	ex := s.ex
	if !ex.InStandby() && ex.WriteRefusal == nil {
		return nil
	}
	verb, ok := writes(st.node)
	if !ok {
		return nil
	}
	if verb == "" {
		verb = strings.ToUpper(firstKeyword(st.text))
	}
	if ex.InStandby() {
		return errf(pgcode.ReadOnlySQLTransaction, "cannot execute %s in a read-only transaction", verb)
	}
	return ex.WriteRefusal()
}

// firstKeyword is the first word of a statement text.
func firstKeyword(text string) string {
	text = strings.TrimLeft(text, " \t\r\n(")
	end := strings.IndexFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_')
	})
	if end < 0 {
		return text
	}
	return text[:end]
}

// writes reports whether a statement could change the catalog, and names
// it where the tree alone does ("" for DDL and the like, named by their
// first keyword).
func writes(n *pg.Node) (string, bool) {
	if n == nil {
		return "", false
	}
	switch {
	case n.GetSelectStmt() != nil:
		s := n.GetSelectStmt()
		if s.IntoClause != nil {
			return "SELECT INTO", true
		}
		return cteWrites(s.WithClause)
	case n.GetCopyStmt() != nil:
		if n.GetCopyStmt().IsFrom {
			return "COPY FROM", true
		}
		return writes(n.GetCopyStmt().Query)
	case n.GetExplainStmt() != nil:
		return writes(n.GetExplainStmt().Query)
	case n.GetVariableSetStmt() != nil, n.GetVariableShowStmt() != nil,
		n.GetTransactionStmt() != nil, n.GetDiscardStmt() != nil,
		n.GetDeallocateStmt() != nil, n.GetFetchStmt() != nil,
		n.GetClosePortalStmt() != nil:
		return "", false
	case n.GetDeclareCursorStmt() != nil:
		return writes(n.GetDeclareCursorStmt().Query)
	case n.GetPrepareStmt() != nil:
		return writes(n.GetPrepareStmt().Query)
	case n.GetCreatedbStmt() != nil:
		return "CREATE DATABASE", true
	case n.GetDropdbStmt() != nil:
		return "DROP DATABASE", true
	case n.GetAlterDatabaseStmt() != nil:
		return "ALTER DATABASE", true
	case n.GetInsertStmt() != nil:
		return "INSERT", true
	case n.GetUpdateStmt() != nil:
		return "UPDATE", true
	case n.GetDeleteStmt() != nil:
		return "DELETE", true
	case n.GetMergeStmt() != nil:
		return "MERGE", true
	case n.GetTruncateStmt() != nil:
		return "TRUNCATE", true
	}
	// DDL, EXECUTE of an unknown statement, LOCK, and everything else: a
	// replica's catalog changes only by following the writer.
	return "", true
}

func cteWrites(w *pg.WithClause) (string, bool) {
	if w == nil {
		return "", false
	}
	for _, c := range w.Ctes {
		if cte := c.GetCommonTableExpr(); cte != nil {
			if verb, ok := writes(cte.Ctequery); ok {
				return verb, true
			}
		}
	}
	return "", false
}
