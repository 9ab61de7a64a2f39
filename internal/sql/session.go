package sql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// ServerVersionString is what version() answers. DuckDB's postgres
// extension parses the first number group (major ≥ 14 enables its ctid
// scans, which relpages 0 keeps serial) and checks for "PostgreSQL".
const ServerVersionString = "PostgreSQL 15.18 (moraine) on x86_64-pc-linux-gnu, compiled by Go, 64-bit"

// Executor is the pgwire executor over a catalog server.
type Executor struct {
	cat   *memcat.Server
	cache *parseCache
	// catalogReads answers repeated reads of PostgreSQL's catalogs
	// (catcache.go).
	catalogReads *catalogCache
	// copies is the binary COPY cache (copycache.go).
	copies *copyCache
	// Now is the clock for NOW(); tests replace it.
	Now func() time.Time
	// StatementMem bounds the rows one statement may hold in memory, in
	// bytes (work.go); 0 is no bound.
	StatementMem int64
	// standby serves a read replica as PostgreSQL serves a hot standby:
	// every transaction is read-only (transaction_read_only and
	// in_hot_standby on, pg_is_in_recovery() true) and every write is
	// refused with 25006. Promotion turns it off under open sessions,
	// whose next transactions may write, as on PostgreSQL.
	standby atomic.Bool
	// Promote, when set, promotes this replica to the writer of its store
	// (pg_promote()); it returns once the catalog accepts commits.
	Promote func(ctx context.Context) error
	// WriteRefusal, when set and returning an error, refuses every write
	// with it: a writer whose store refuses writes serves reads only.
	WriteRefusal func() error
	// Terminate, when set, ends the session with this backend pid as
	// PostgreSQL's pg_terminate_backend does (DROP DATABASE WITH (FORCE)).
	Terminate func(pid uint32) bool
	// Roles are the server's users, as pg_roles shows them (besides each
	// session's own user).
	Roles []string
	// sessions are the open sessions (pg_stat_activity).
	sessions sync.Map
}

// New returns an executor over cat.
func New(cat *memcat.Server) *Executor {
	return &Executor{cat: cat, cache: newParseCache(4096), catalogReads: newCatalogCache(), copies: newCopyCache(copyCacheBytes), Now: time.Now, StatementMem: DefaultStatementMem}
}

// SetStandby makes the executor serve as a hot standby (on) or a primary.
func (ex *Executor) SetStandby(on bool) { ex.standby.Store(on) }

// InStandby reports whether the executor serves as a hot standby.
func (ex *Executor) InStandby() bool { return ex.standby.Load() }

var _ pgwire.Executor = (*Executor)(nil)

// NewSession implements pgwire.Executor: the startup database, which must
// exist (3D000 as PostgreSQL's FATAL otherwise), selects the catalog.
func (ex *Executor) NewSession(_ context.Context, info pgwire.StartupInfo) (pgwire.Session, error) {
	name := info.Database
	if name == "" {
		name = info.User
	}
	if _, ok := ex.cat.Lookup(name); !ok {
		return nil, &pgwire.Error{Severity: pgwire.SeverityFatal, Code: pgcode.InvalidCatalogName,
			Message: fmt.Sprintf("database %q does not exist", name)}
	}
	s := ex.Open(name, info.User, info.ApplicationName, info.BackendPID)
	s.act.mu.Lock()
	s.act.clientAddr = info.RemoteAddr
	s.act.mu.Unlock()
	return s, nil
}

// Open returns a session on database db, creating it in memory if it does
// not exist (in-process use; clients come through NewSession).
func (ex *Executor) Open(db, user, app string, pid uint32) *Session {
	if db == "" {
		db = user
	}
	s := &Session{ex: ex, db: ex.cat.Database(db), dbName: db, user: user, pid: pid, temps: map[string]*memcat.Table{}}
	s.act.started = ex.Now()
	s.act.state, s.act.app = "idle", app
	ex.register(s)
	s.resetSettings()
	if app != "" {
		s.settings["application_name"] = app
	}
	return s
}

// Session is one connection's state. pgwire never calls into one Session
// concurrently, so it has no lock.
type Session struct {
	ex     *Executor
	db     *memcat.DB
	dbName string
	user   string
	pid    uint32

	tx   txState     // the transaction (txstate.go)
	role sessionRole // what the session's history says about its pins
	// multi: the simple query running holds several statements, which
	// PostgreSQL runs as an implicit transaction block.
	multi bool

	temps      map[string]*memcat.Table
	tempOnDrop map[string]bool
	settings   map[string]string
	// reports are the reported settings (name, value) changed by the
	// statement running, sent as ParameterStatus when it ends.
	reports [][2]string
	// settingsSet: a SET or RESET ran since the settings were last reset.
	settingsSet bool

	// valuesSlab holds an INSERT … VALUES statement's computed rows (exec.insert);
	// one statement of a session runs at a time, and it clears what it used.
	valuesSlab []tv
	valuesRows [][]tv
	// matched holds an UPDATE's or DELETE's per-row buffers (matchScratch).
	matched valueScratch
	// bound holds the literals of the simple query running (query).
	bound bindBuf
	// act is what pg_stat_activity shows of the session.
	act activity
}

var defaultSettings = map[string]string{
	"application_name":              "",
	"client_encoding":               "UTF8",
	"datestyle":                     "ISO, MDY",
	"default_transaction_isolation": "read committed",
	"default_transaction_read_only": "off",
	"extra_float_digits":            "1",
	"integer_datetimes":             "on",
	"intervalstyle":                 "postgres",
	"is_superuser":                  "on",
	"lc_collate":                    "C.UTF-8",
	"lc_ctype":                      "C.UTF-8",
	"max_identifier_length":         "63",
	"search_path":                   `"$user", public`,
	"server_encoding":               "UTF8",
	"server_version":                "15.18",
	"server_version_num":            "150018",
	"standard_conforming_strings":   "on",
	"statement_timeout":             "0",
	"timezone":                      "UTC",
	"transaction_isolation":         "read committed",
	"transaction_read_only":         "off",
	"in_hot_standby":                "off",
	"bytea_output":                  "hex",
}

// reported are the settings PostgreSQL reports with ParameterStatus when
// they change, with their reported spelling.
var reported = map[string]string{
	"application_name": "application_name", "client_encoding": "client_encoding",
	"datestyle": "DateStyle", "intervalstyle": "IntervalStyle", "timezone": "TimeZone",
	"standard_conforming_strings": "standard_conforming_strings", "is_superuser": "is_superuser",
}

// resetSettings restores every setting's default, keeping application_name
// (its default is the startup packet's). DuckDB's connection pool runs
// DISCARD ALL each time it takes a connection back, nearly always with
// nothing to reset: then it costs nothing.
func (s *Session) resetSettings() {
	if s.settings != nil && !s.settingsSet {
		return
	}
	s.settingsSet = false
	app := ""
	if s.settings != nil {
		app = s.settings["application_name"]
	}
	s.settings = make(map[string]string, len(defaultSettings))
	for k, v := range defaultSettings {
		s.settings[k] = v
	}
	s.settings["application_name"] = app
}

// set changes a setting for the session.
func (s *Session) set(name, val string) {
	s.settings[name] = val
	s.settingsSet = true
}

func (s *Session) setting(name string) (string, bool) {
	name = strings.ToLower(name)
	switch name {
	case "transaction_isolation":
		if s.tx.txn != nil && s.tx.repeatable {
			return "repeatable read", true
		}
	case "transaction_read_only":
		if s.tx.readOnly || s.ex.InStandby() {
			return "on", true
		}
	case "in_hot_standby":
		if s.ex.InStandby() {
			return "on", true
		}
	}
	v, ok := s.settings[name]
	return v, ok
}

// searchSchema is the first schema of search_path that exists.
func (s *Session) searchSchema() string {
	v := s.view()
	for _, p := range strings.Split(s.settings["search_path"], ",") {
		p = strings.TrimSpace(p)
		if p == `"$user"` || p == "$user" {
			p = s.user
		}
		p = unquoteIdent(p)
		if v.HasSchema(p) {
			return p
		}
	}
	return "public"
}

// view is what a statement reads.
func (s *Session) view() *memcat.Version {
	if s.tx.txn != nil {
		return s.tx.txn.View()
	}
	return s.db.Head()
}

func (s *Session) txStartMicros() int64 {
	t := s.tx.start
	if t.IsZero() {
		t = s.ex.Now()
	}
	return t.UnixMicro() - 946684800*1_000_000
}

// TxStatus implements pgwire.Session.
func (s *Session) TxStatus() pgwire.TxStatus { return s.tx.status() }

// Close implements pgwire.Session: an open transaction rolls back.
func (s *Session) Close() error {
	s.endTxn()
	s.ex.unregister(s)
	return nil
}

func (s *Session) beginTxn(ctx context.Context) error {
	txn, err := s.db.Begin(ctx, s.role.writer())
	if err != nil {
		return err
	}
	s.startTxn(txn)
	return nil
}

// startTxn makes txn the session's implicit transaction.
func (s *Session) startTxn(txn *memcat.Txn) {
	s.tx.begin(txn, s.ex.Now(), s.settings["default_transaction_read_only"] == "on" || s.ex.InStandby())
}

// endTxn rolls back the session's transaction, if any.
func (s *Session) endTxn() {
	if txn := s.leaveTxn(); txn != nil {
		txn.Rollback()
	}
}

// commitTxn commits the session's transaction, if any.
func (s *Session) commitTxn(ctx context.Context) error {
	txn := s.leaveTxn()
	if txn == nil {
		return nil
	}
	return txn.Commit(ctx)
}

// leaveTxn ends the session's transaction, drops its ON COMMIT DROP temp
// tables, and returns the catalog transaction to commit or roll back.
func (s *Session) leaveTxn() *memcat.Txn {
	if s.tx.inBlock() {
		s.role.blockEnded()
	}
	for name := range s.tempOnDrop {
		delete(s.temps, name)
	}
	s.tempOnDrop = nil
	return s.tx.end()
}

// Query implements pgwire.Session.
func (s *Session) Query(ctx context.Context, sql string, w *pgwire.ResultWriter) error {
	s.beginActivity(sql)
	defer s.endActivity()
	return s.query(ctx, sql, &resultSink{w: w})
}

// query runs a simple-query string, writing each statement's result to out.
func (s *Session) query(ctx context.Context, sql string, out sink) error {
	stmts, err := s.ex.cache.parseInto(sql, &s.bound)
	defer s.bound.release()
	s.multi = len(stmts) > 1
	defer func() { s.multi = false }()
	if err != nil {
		s.fail()
		return err
	}
	for _, st := range stmts {
		if err := s.run(ctx, st, out, nil); err != nil {
			s.fail()
			return err
		}
	}
	// A simple Query is one implicit transaction unless it opened a block.
	if s.tx.phase == txImplicit {
		if err := s.commitTxn(ctx); err != nil {
			return err
		}
	}
	if s.tx.phase == txBlock {
		// The session goes idle in its transaction (DuckLake: between its
		// write batch and its COMMIT): a writer waiting may read its writes.
		s.tx.txn.Seal()
	}
	return nil
}

// fail records an error: a block becomes failed, an implicit transaction
// rolls back.
func (s *Session) fail() {
	if s.tx.inBlock() {
		s.tx.to(txFailed)
		return
	}
	s.endTxn()
}

// isTxnControl reports statements that run in a failed block.
func isTxnControl(n *pg.Node) bool {
	ts := n.GetTransactionStmt()
	if ts == nil {
		return false
	}
	switch ts.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK,
		pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO, pg.TransactionStmtKind_TRANS_STMT_PREPARE,
		pg.TransactionStmtKind_TRANS_STMT_COMMIT_PREPARED, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_PREPARED:
		return true
	}
	return false
}

// run executes one statement.
func (s *Session) run(ctx context.Context, st stmt, out sink, params []tv) error {
	n := st.node
	if err := ctx.Err(); err != nil {
		return err
	}
	// The writers' pin lease lapses, and new snapshots stop waiting for
	// a claimer, only once the transaction sits idle between statements
	// (memcat.LeaseHold, memcat.SettleWait).
	if s.tx.txn != nil {
		s.tx.txn.Busy()
	}
	defer func() {
		if s.tx.txn != nil {
			s.tx.txn.Idle()
		}
	}()
	if s.tx.failed() && !isTxnControl(n) {
		return errf(pgcode.InFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	if err := s.admitWrite(st); err != nil {
		return err
	}
	if ts := n.GetTransactionStmt(); ts != nil {
		return s.runTxn(ctx, ts, out)
	}
	if n.GetCreatedbStmt() != nil || n.GetDropdbStmt() != nil || n.GetAlterDatabaseStmt() != nil {
		return s.databaseStmt(ctx, n, out)
	}
	if s.tx.phase == txNone {
		if readsNothing(n) {
			// No snapshot to take: a statement that reads no table must
			// not queue for the writers' lease or wait for a commit under
			// way. DuckDB's connection pool sends `SELECT 1` and `DISCARD
			// ALL` around every DuckLake transaction, on a session that
			// writes: pinned like a writer's, they joined the commit chain.
			s.startTxn(s.db.BeginDeferred(false))
		} else if err := s.beginTxn(ctx); err != nil {
			return err
		}
	} else if s.tx.txn.Deferred() {
		// The block's first statement takes its snapshot.
		if err := s.tx.txn.Pin(ctx); err != nil {
			return err
		}
	} else if !s.tx.repeatable {
		// READ COMMITTED: each statement sees the newest commit (while the
		// transaction has not written; see the package notes).
		if err := s.tx.txn.Rebase(ctx); err != nil {
			return err
		}
	}
	if n.GetInsertStmt() != nil || n.GetUpdateStmt() != nil || n.GetDeleteStmt() != nil {
		s.role.wrote() // even if it fails: DuckLake's retry is a writer
	}
	x := &exec{ctx: ctx, s: s, params: params, lits: st.lits, text: st.text}
	err := x.statement(n, out)
	s.flushReports(out)
	if x.work.bytes >= largeStatement {
		pgwire.ReleaseMemory()
	}
	return err
}

// readsNothing reports statements that read no table and write nothing:
// session commands (DISCARD, SET, SHOW) and a SELECT of constants only,
// without FROM, WITH, WHERE or set operations (a health check's `SELECT 1`).
func readsNothing(n *pg.Node) bool {
	switch {
	case n.GetDiscardStmt() != nil, n.GetVariableShowStmt() != nil:
		return true
	case n.GetVariableSetStmt() != nil:
		return true
	}
	sel := n.GetSelectStmt()
	if sel == nil || len(sel.FromClause) > 0 || sel.WithClause != nil || sel.WhereClause != nil ||
		sel.Op != pg.SetOperation_SETOP_NONE || len(sel.ValuesLists) > 0 || len(sel.GroupClause) > 0 ||
		sel.HavingClause != nil || len(sel.LockingClause) > 0 || sel.IntoClause != nil || len(sel.TargetList) == 0 {
		return false
	}
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			return false
		}
		v := rt.Val
		if tc := v.GetTypeCast(); tc != nil {
			v = tc.Arg
		}
		if v.GetAConst() == nil {
			return false
		}
	}
	return true
}

func (s *Session) runTxn(ctx context.Context, ts *pg.TransactionStmt, out sink) error {
	switch ts.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		if s.tx.inBlock() {
			out.notice(&pgwire.Error{Severity: pgwire.SeverityWarning, Code: pgcode.ActiveSQLTransaction, Message: "there is already a transaction in progress"})
			return out.complete("BEGIN")
		}
		if s.tx.phase == txNone {
			s.startTxn(s.db.BeginDeferred(s.role.leasedBlocks()))
		}
		s.tx.to(txBlock)
		for _, o := range ts.Options {
			d := o.GetDefElem()
			if d == nil {
				continue
			}
			switch d.Defname {
			case "transaction_isolation":
				lvl := ""
				if c := d.Arg.GetAConst(); c != nil && c.GetSval() != nil {
					lvl = c.GetSval().Sval
				}
				s.tx.repeatable = lvl == "repeatable read" || lvl == "serializable"
			case "transaction_read_only":
				if c := d.Arg.GetAConst(); c != nil {
					if c.GetIval() != nil {
						s.tx.readOnly = c.GetIval().Ival != 0
					} else if c.GetBoolval() != nil {
						s.tx.readOnly = c.GetBoolval().Boolval
					}
				}
			case "transaction_deferrable":
			default:
				return unsupported("transaction option %s", d.Defname)
			}
		}
		return out.complete("BEGIN")
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT:
		if !s.tx.inBlock() {
			out.notice(&pgwire.Error{Severity: pgwire.SeverityWarning, Code: pgcode.NoActiveSQLTransaction, Message: "there is no transaction in progress"})
			if err := s.commitTxn(ctx); err != nil {
				return err
			}
			return out.complete("COMMIT")
		}
		if s.tx.failed() {
			s.endTxn()
			return out.complete("ROLLBACK")
		}
		if err := s.commitTxn(ctx); err != nil {
			return err
		}
		return out.complete("COMMIT")
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if !s.tx.inBlock() {
			out.notice(&pgwire.Error{Severity: pgwire.SeverityWarning, Code: pgcode.NoActiveSQLTransaction, Message: "there is no transaction in progress"})
		}
		s.endTxn()
		return out.complete("ROLLBACK")
	}
	return unsupported("transaction statement %s", ts.Kind)
}

// sink receives a statement's result. resultSink writes to pgwire; tests
// use a collecting sink.
type sink interface {
	rows(cols []colInfo, rows [][]datum.Value, tag string) error
	complete(tag string) error
	notice(n *pgwire.Error)
	parameter(name, value string)
	copyOut(format int16, cols []colInfo, src rowSource) error
	copyIn(format int16, ncols int, null string) (copySource, error)
}

// rowSource produces a result's rows one at a time: it calls emit for each
// row (the slice may be reused after emit returns) and stops at the first
// error emit returns.
type rowSource func(emit func(row []datum.Value) error) error

// sliceSource is a rowSource over materialized rows.
func sliceSource(rows [][]datum.Value) rowSource {
	return func(emit func([]datum.Value) error) error {
		for _, r := range rows {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// collect materializes a rowSource (for test sinks).
func collect(src rowSource) ([][]datum.Value, error) {
	var rows [][]datum.Value
	err := src(func(r []datum.Value) error {
		rows = append(rows, append([]datum.Value(nil), r...))
		return nil
	})
	return rows, err
}

// copySource yields COPY FROM cells, nil = NULL.
type copySource interface {
	Next() ([][]byte, error)
}

// pgColumns converts result columns to RowDescription fields.
func pgColumns(cols []colInfo) []pgwire.Column {
	out := make([]pgwire.Column, len(cols))
	for i, c := range cols {
		t := outType(c.typ)
		size := t.Len()
		if !t.Known() {
			size = -1
		}
		mod := t.Mod
		if t == regclassText {
			mod = -1
		}
		out[i] = pgwire.Column{Name: c.name, TableOID: c.tableOID, TableAttr: c.attnum, TypeOID: t.OID, TypeSize: size, TypeModifier: mod}
		if c.tableOID == 0 {
			out[i].TableAttr = 0
		}
	}
	return out
}

// encodeCell encodes one value in a wire format.
func encodeCell(dst []byte, t datum.Type, v datum.Value, format int16) ([]byte, error) {
	t = outType(t)
	if format == 1 {
		return datum.AppendBinary(dst, t, v)
	}
	return datum.AppendText(dst, t, v), nil
}
