package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

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
	log   *slog.Logger
	// slow is the duration from which a statement is logged (0: none).
	slow time.Duration
	// fenced holds the fencing error once the store reported it.
	fenced atomic.Pointer[error]
}

func newGuard(inner pgwire.Executor, m *Metrics, log *slog.Logger, slow time.Duration) *guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &guard{inner: inner, m: m, log: log, slow: slow}
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
	return &guardSession{Session: s, g: g, info: info}, nil
}

type guardSession struct {
	pgwire.Session
	g    *guard
	info pgwire.StartupInfo
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
	s.observe(sql, start, err)
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
	return &guardStatement{Statement: st, s: s, sql: sql}, nil
}

type guardStatement struct {
	pgwire.Statement
	s   *guardSession
	sql string
}

func (s *guardStatement) Bind(ctx context.Context, params []pgwire.Param) (pgwire.Portal, error) {
	p, err := s.Statement.Bind(ctx, params)
	if err != nil {
		return nil, err
	}
	return &guardPortal{Portal: p, st: s}, nil
}

type guardPortal struct {
	pgwire.Portal
	st *guardStatement
}

func (p *guardPortal) Execute(ctx context.Context, w *pgwire.ResultWriter, maxRows int) error {
	if err := p.st.s.g.check(); err != nil {
		return err
	}
	start := time.Now()
	err := p.Portal.Execute(ctx, w, maxRows)
	p.st.s.observe(p.st.sql, start, err)
	return err
}

// observe times a statement that began at start, counts its error by
// SQLSTATE and, for a conflict, by class, and logs what an operator reads
// PostgreSQL's log for: every statement error, with its SQLSTATE, the
// session (its backend pid) and the statement, refused commits with their
// conflict class, and statements slower than the slow-statement setting.
func (s *guardSession) observe(sql string, start time.Time, err error) {
	g := s.g
	took := time.Since(start)
	g.m.StatementDuration.WithLabelValues(statementShape(sql)).Observe(took.Seconds())
	if g.slow > 0 && took >= g.slow {
		g.log.Info("slow statement", "session", s.info.BackendPID, "user", s.info.User, "database", s.info.Database,
			"duration", took.Round(time.Microsecond), "statement", abbreviate(sql))
	}
	if err == nil {
		return
	}
	code := sqlState(err)
	g.m.StatementErrors.WithLabelValues(code).Inc()
	attrs := []any{"session", s.info.BackendPID, "user", s.info.User, "database", s.info.Database, "sqlstate", code, "err", err.Error()}
	if class, ok := conflictClass(err); ok {
		g.m.Conflicts.WithLabelValues(class).Inc()
		attrs = append(attrs, "conflict_class", class)
	}
	g.log.Warn("statement failed", append(attrs, "statement", abbreviate(sql))...)
}

// abbreviate keeps a logged statement to its first 500 bytes.
func abbreviate(sql string) string {
	if len(sql) <= 500 {
		return sql
	}
	return sql[:500] + fmt.Sprintf("… (%d bytes)", len(sql))
}

// sqlState is the SQLSTATE a client is answered with for err.
func sqlState(err error) string {
	var coded pgcode.Error
	if errors.As(err, &coded) {
		return coded.SQLState()
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
