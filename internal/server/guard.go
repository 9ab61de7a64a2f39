package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// guard wraps the SQL executor of one stack. It counts connections and
// statements for the metrics, refuses writes on a replica (SQLSTATE 25006)
// and, once the server is fenced, refuses every statement with an error
// naming the fencing so that clients learn why the server is going away.
type guard struct {
	inner pgwire.Executor
	m     *Metrics
	// fenced holds the fencing error once the store reported it.
	fenced atomic.Pointer[error]
}

func newGuard(inner pgwire.Executor, m *Metrics) *guard {
	return &guard{inner: inner, m: m}
}

func (g *guard) fence(err error) { g.fenced.CompareAndSwap(nil, &err) }

func (g *guard) check() error {
	if e := g.fenced.Load(); e != nil {
		// admin_shutdown: the code clients already treat as "this server is
		// going away, reconnect elsewhere".
		return pgwire.Errorf(pgcode.AdminShutdown, "moraine: this server was fenced by a newer writer on the same store and accepts no more statements; reconnect to the new writer (%v)", *e)
	}
	return nil
}

func (g *guard) NewSession(ctx context.Context, info pgwire.StartupInfo) (pgwire.Session, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	s, err := g.inner.NewSession(ctx, info)
	if err != nil {
		return nil, err
	}
	g.m.Connections.Inc()
	g.m.ConnectionsTotal.Inc()
	return &guardSession{Session: s, g: g}, nil
}

type guardSession struct {
	pgwire.Session
	g *guard
}

func (s *guardSession) admit(sql string) error {
	if err := s.g.check(); err != nil {
		return err
	}
	s.g.m.Statements.WithLabelValues(statementShape(sql)).Inc()
	return nil
}

func (s *guardSession) Query(ctx context.Context, sql string, w *pgwire.ResultWriter) error {
	if err := s.admit(sql); err != nil {
		return err
	}
	start := time.Now()
	err := s.Session.Query(ctx, sql, w)
	s.g.observe(statementShape(sql), start, err)
	return err
}

func (s *guardSession) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.Statement, error) {
	if err := s.admit(sql); err != nil {
		return nil, err
	}
	st, err := s.Session.Prepare(ctx, sql, paramOIDs)
	if err != nil {
		return nil, err
	}
	return &guardStatement{Statement: st, g: s.g, shape: statementShape(sql)}, nil
}

type guardStatement struct {
	pgwire.Statement
	g     *guard
	shape string
}

func (s *guardStatement) Bind(ctx context.Context, params []pgwire.Param) (pgwire.Portal, error) {
	p, err := s.Statement.Bind(ctx, params)
	if err != nil {
		return nil, err
	}
	return &guardPortal{Portal: p, g: s.g, shape: s.shape}, nil
}

type guardPortal struct {
	pgwire.Portal
	g     *guard
	shape string
}

func (p *guardPortal) Execute(ctx context.Context, w *pgwire.ResultWriter, maxRows int) error {
	if err := p.g.check(); err != nil {
		return err
	}
	start := time.Now()
	err := p.Portal.Execute(ctx, w, maxRows)
	p.g.observe(p.shape, start, err)
	return err
}

// observe times a statement of the given shape that began at start, and
// counts its error by SQLSTATE and, for a conflict, by class.
func (g *guard) observe(shape string, start time.Time, err error) {
	g.m.StatementDuration.WithLabelValues(shape).Observe(time.Since(start).Seconds())
	if err == nil {
		return
	}
	g.m.StatementErrors.WithLabelValues(sqlState(err)).Inc()
	if class, ok := conflictClass(err); ok {
		g.m.Conflicts.WithLabelValues(class).Inc()
	}
}

// sqlState is the SQLSTATE a client is answered with for err.
func sqlState(err error) string {
	var pe *pgwire.Error
	if errors.As(err, &pe) && pe.Code != "" {
		return pe.Code
	}
	var sc interface{ SQLState() string }
	if errors.As(err, &sc) && sc.SQLState() != "" {
		return sc.SQLState()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return pgcode.QueryCanceled
	}
	return pgcode.InternalError
}

// conflictClass names a conflict reported to a client: "unique" for the
// 23505 of a lost race for the snapshot id (DuckLake retries), or the class
// the commit path gave a true conflict under DuckLake's matrix
// (changes.Conflict.Class).
func conflictClass(err error) (string, bool) {
	var ce *commit.Error
	if errors.As(err, &ce) && ce.Class != "" {
		return ce.Class, true
	}
	if sqlState(err) == pgcode.UniqueViolation {
		return "unique", true
	}
	return "", false
}

func (s *guardSession) Close() error {
	s.g.m.Connections.Dec()
	return s.Session.Close()
}

// shapes are the statement labels of moraine_statements_total; anything
// else is "other", so the label set stays bounded whatever clients send.
var shapes = map[string]bool{
	"select": true, "insert": true, "update": true, "delete": true, "copy": true,
	"begin": true, "start": true, "commit": true, "end": true, "rollback": true, "abort": true,
	"set": true, "show": true, "reset": true, "create": true, "drop": true, "alter": true,
	"with": true, "values": true, "truncate": true, "explain": true, "discard": true,
	"deallocate": true, "prepare": true, "execute": true,
}

// statementShape is the lower-cased first keyword of sql (after blanks,
// comments and opening parentheses).
func statementShape(sql string) string {
	w := strings.ToLower(firstWord(sql))
	if w == "this statement" {
		return "empty"
	}
	if shapes[w] {
		return w
	}
	return "other"
}

func firstWord(sql string) string {
	sql = skipNoise(sql)
	end := 0
	for end < len(sql) && isWordByte(sql[end]) {
		end++
	}
	if end == 0 {
		return "this statement"
	}
	return sql[:end]
}

// stmtText is the source text of one parsed statement (byte offsets).
func stmtText(sql string, raw *pg.RawStmt) string {
	start := int(raw.StmtLocation)
	if start < 0 || start > len(sql) {
		return ""
	}
	end := len(sql)
	if raw.StmtLen > 0 && start+int(raw.StmtLen) <= len(sql) {
		end = start + int(raw.StmtLen)
	}
	return sql[start:end]
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func skipNoise(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n(;")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return ""
			}
			s = s[i+2:]
		default:
			return s
		}
	}
}
