package pgwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/moraine-db/moraine/internal/datum"
)

// maxAuthMessageLen bounds messages during authentication.
const maxAuthMessageLen = 65535

// flushThreshold is how much output is buffered before it is written even
// without a sync point; it keeps COPY OUT streaming in large writes.
const flushThreshold = 64 << 10

// conn serves one client connection on one goroutine.
//
// States: startup (readStartup, authenticate) → ready (loop). In the loop a
// message is read only at the top ("idle", interruptible by Shutdown) or by
// a COPY IN reader inside a statement. After an extended-protocol error the
// conn discards messages until Sync (skipToSync).
type conn struct {
	srv  *Server
	be   *pgproto3.Backend
	out  []byte
	werr error // first write error; the connection is dead after it
	sess Session
	info StartupInfo

	pid, secret uint32
	// tlsCert is the certificate this connection's TLS handshake
	// presented, for SCRAM channel binding (tls-server-end-point).
	tlsCert *tls.Certificate

	stmts   map[string]*preparedStmt
	portals map[string]*boundPortal
	// discarded is set when a statement completed as DISCARD ALL: the
	// connection then drops its prepared statements and portals, as
	// PostgreSQL's DISCARD ALL (DEALLOCATE ALL, CLOSE ALL) does.
	discarded bool

	skipToSync bool
	// pendingStatus holds ParameterStatus reports until ReadyForQuery.
	pendingStatus [][2]string
	// flushNow asks the loop to write buffered output before reading on.
	flushNow bool
	// fatal is set when the connection must close after the current
	// request (executor panic, protocol violation inside COPY).
	fatal error

	// rw is reused for every statement.
	rw ResultWriter
	// counted: the connection counts against MaxConnections (its startup
	// packet arrived).
	counted bool
	// evicted is the FATAL to end the connection with, set by
	// CloseConnections.
	evicted atomic.Pointer[Error]
	// raw is the accepted connection, under any TLS: the socket the
	// client-connection check polls.
	raw net.Conn

	mu struct {
		sync.Mutex
		netConn    net.Conn
		idle       bool
		stmtCancel context.CancelCauseFunc
	}
}

type preparedStmt struct {
	stmt Statement
	cols []Column
	oids []uint32
}

type boundPortal struct {
	portal  Portal
	cols    []Column // with the Bind's formats applied
	formats []int16
}

func (c *conn) nc() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.netConn
}

// errClosing ends the loop quietly.
var errClosing = errors.New("pgwire: connection closing")

// serveConn serves c, which admit registered, until it ends.
func (s *Server) serveConn(c *conn) {
	defer s.wg.Done()
	nc := c.raw
	// Connections in their startup phase are not clients yet: they count
	// against MaxConnections only once their startup packet arrived (as in
	// PostgreSQL), and AuthTimeout ends those that send nothing. So that
	// silent sockets cannot exhaust file descriptors either, at most twice
	// MaxConnections may be starting at once; past that a new one is
	// refused at once.
	starting := s.starting.Add(1)
	defer func() {
		if c.counted {
			s.active.Add(-1)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.log.Error("pgwire: connection panic", "panic", r, "stack", string(debug.Stack()))
		}
		// Executor code runs here too; a panic in it must not take the
		// server down.
		c.safely(func() {
			c.closeAllStatements()
			if c.sess != nil {
				if err := c.sess.Close(); err != nil {
					s.log.Warn("pgwire: session close", "err", err)
				}
			}
		})
		c.nc().Close()
		s.untrack(c)
	}()
	if starting > 2*int64(s.cfg.MaxConnections) {
		s.starting.Add(-1)
		c.sendFatal(&Error{Code: pgcode.TooManyConnections, Message: "sorry, too many clients already"})
		s.log.Warn("pgwire: connection refused: too many connections in their startup phase", "remote", nc.RemoteAddr())
		return
	}
	if s.cfg.LogConnections {
		s.log.Info("connection received", "remote", nc.RemoteAddr())
		start := time.Now()
		defer func() {
			if c.sess != nil {
				s.log.Info("disconnection", "session", c.pid, "remote", nc.RemoteAddr(), "user", c.info.User, "database", c.info.Database,
					"session_time", time.Since(start).Round(time.Millisecond))
			}
		}()
	}
	err := c.startup()
	s.starting.Add(-1)
	if err != nil {
		if !errors.Is(err, errClosing) {
			s.log.Debug("pgwire: startup failed", "remote", nc.RemoteAddr(), "err", err)
		}
		return
	}
	if err := c.loop(); err != nil && !errors.Is(err, errClosing) {
		s.log.Debug("pgwire: connection ended", "remote", nc.RemoteAddr(), "err", err)
	}
}

// safely runs fn, turning a panic into a log line.
func (c *conn) safely(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.log.Error("pgwire: executor panic while closing", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// send buffers one message; write errors surface at flush.
func (c *conn) send(msg pgproto3.BackendMessage) {
	out, err := msg.Encode(c.out)
	if err != nil {
		if c.werr == nil {
			c.werr = fmt.Errorf("pgwire: encode %T: %w", msg, err)
		}
		return
	}
	c.out = out
}

func (c *conn) flush() error {
	if c.werr != nil {
		return c.werr
	}
	if len(c.out) == 0 {
		return nil
	}
	nc := c.nc()
	if t := c.srv.cfg.WriteTimeout; t > 0 {
		_ = nc.SetWriteDeadline(time.Now().Add(t))
	}
	_, err := nc.Write(c.out)
	if cap(c.out) > 4*flushThreshold {
		c.out = nil // do not pin a huge buffer after a big result
	} else {
		c.out = c.out[:0]
	}
	if err != nil {
		c.werr = fmt.Errorf("pgwire: write: %w", err)
		return c.werr
	}
	return nil
}

// maybeFlush writes when enough output is buffered.
func (c *conn) maybeFlush() error {
	if len(c.out) >= flushThreshold {
		return c.flush()
	}
	return c.werr
}

// sendFatal sends a FATAL error and flushes; the caller closes.
func (c *conn) sendFatal(e *Error) {
	e2 := *e
	e2.Severity = SeverityFatal
	c.send(e2.toErrorResponse())
	_ = c.flush()
}

// startup runs SSL negotiation, the StartupMessage and authentication, and
// creates the session. tooMany is set when the connection is over
// MaxConnections once its startup packet arrived: it is refused then, as
// PostgreSQL does.
func (c *conn) startup() error {
	s := c.srv
	nc := c.nc()
	// The startup phase counts as idle: Shutdown may interrupt it.
	c.mu.Lock()
	if s.isClosing() {
		c.mu.Unlock()
		return errClosing
	}
	c.mu.idle = true
	_ = nc.SetDeadline(time.Now().Add(s.cfg.AuthTimeout))
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.mu.idle = false
		c.mu.Unlock()
	}()
	sslDone, gssDone := false, false
	var pkt startupPacket
	for {
		body, err := readStartupPacket(c.nc())
		if err != nil {
			return err
		}
		pkt, err = decodeStartupPacket(body)
		if err != nil {
			return err
		}
		switch pkt.kind {
		case packetCancel:
			s.cancel(pkt.pid, pkt.secret)
			return errClosing
		case packetSSLRequest:
			if sslDone {
				return errors.New("pgwire: SSLRequest repeated")
			}
			sslDone = true
			if s.cfg.TLS == nil {
				if _, err := c.nc().Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if _, err := c.nc().Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(c.nc(), c.tlsConfig())
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("pgwire: TLS handshake: %w", err)
			}
			c.mu.Lock()
			c.mu.netConn = tc
			c.mu.Unlock()
			c.info.TLS = true
			continue
		case packetGSSEncRequest:
			if gssDone {
				return errors.New("pgwire: GSSENCRequest repeated")
			}
			gssDone = true
			if _, err := c.nc().Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		break
	}
	if major := pkt.version >> 16; major != 3 {
		c.sendFatal(&Error{Code: pgcode.FeatureNotSupported, Message: fmt.Sprintf(
			"unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", major, pkt.version&0xffff)})
		return errClosing
	}
	params := make(map[string]string, len(pkt.params))
	var unknownOpts []string
	for _, kv := range pkt.params {
		if strings.HasPrefix(kv[0], "_pq_.") {
			unknownOpts = append(unknownOpts, kv[0])
			continue
		}
		params[kv[0]] = kv[1]
	}
	if pkt.version != protocol30 || len(unknownOpts) > 0 {
		// A 3.x client newer than 3.0 (libpq 18 may ask for 3.2): tell it
		// we speak 3.0 and carry on, as PostgreSQL does.
		c.send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknownOpts})
	}
	c.be = pgproto3.NewBackend(c.nc(), nil)
	// Before authentication nobody may make the server buffer more than
	// an auth token (PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH): pgproto3
	// allocates a message's declared length before reading it.
	c.be.SetMaxBodyLen(maxAuthMessageLen)

	c.counted = true
	if s.active.Add(1) > int64(s.cfg.MaxConnections) {
		c.sendFatal(&Error{Code: pgcode.TooManyConnections, Message: "sorry, too many clients already"})
		s.log.Warn("pgwire: connection refused: too many clients already", "remote", nc.RemoteAddr(), "max_connections", s.cfg.MaxConnections)
		return errClosing
	}
	if replication := params["replication"]; replication != "" && replication != "false" && replication != "0" && replication != "off" {
		c.sendFatal(&Error{Code: pgcode.FeatureNotSupported, Message: "replication connections are not supported"})
		return errClosing
	}
	user := params["user"]
	if user == "" {
		c.sendFatal(&Error{Code: pgcode.InvalidAuthorizationSpecification, Message: "no PostgreSQL user name specified in startup packet"})
		return errClosing
	}
	db := params["database"]
	if db == "" {
		db = user
	}
	c.info.User = user
	c.info.Database = db
	c.info.ApplicationName = params["application_name"]
	c.info.Options = params["options"]
	c.info.Params = params
	c.info.RemoteAddr = nc.RemoteAddr()

	if _, tcp := nc.RemoteAddr().(*net.TCPAddr); tcp && s.cfg.RequireTLS && !c.info.TLS {
		c.sendFatal(&Error{Code: pgcode.InvalidAuthorizationSpecification, Message: fmt.Sprintf(
			"no pg_hba.conf entry for host %q, user %q, database %q, no encryption", hostOf(nc.RemoteAddr()), user, db),
			Hint: "This server requires TLS (setting ssl-require): connect with sslmode=require."})
		s.log.Warn("pgwire: connection refused: TLS required", "remote", nc.RemoteAddr(), "user", user, "database", db)
		return errClosing
	}
	if until, blocked := s.authFails.blocked(nc.RemoteAddr()); blocked {
		c.sendFatal(&Error{Code: pgcode.InvalidAuthorizationSpecification, Message: fmt.Sprintf(
			"too many failed authentication attempts from %s; try again in %d s", hostOf(nc.RemoteAddr()), int(time.Until(until).Seconds())+1)})
		s.log.Debug("pgwire: connection refused: too many failed authentications", "remote", nc.RemoteAddr(), "user", user)
		return errClosing
	}
	if err := c.authenticate(user, s.trusted(nc.RemoteAddr())); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			if pe.Code == pgcode.InvalidPassword || pe.Code == pgcode.InvalidAuthorizationSpecification {
				s.authFails.failed(nc.RemoteAddr())
			}
			s.log.Warn("pgwire: authentication failed", "remote", nc.RemoteAddr(), "user", user, "database", db, "code", pe.Code, "err", pe.Message)
			c.sendFatal(pe)
			return errClosing
		}
		return err
	}
	c.be.SetMaxBodyLen(s.cfg.MaxMessageSize)
	if err := s.register(c); err != nil {
		return err
	}
	c.info.BackendPID = c.pid
	sess, err := s.exec.NewSession(context.Background(), c.info)
	if err != nil {
		c.sendFatal(asPgError(err, nil))
		return errClosing
	}
	c.sess = sess
	if s.cfg.LogConnections {
		s.log.Info("connection authorized", "session", c.pid, "remote", nc.RemoteAddr(), "user", user, "database", db,
			"application_name", c.info.ApplicationName, "tls", c.info.TLS)
	}
	c.stmts = map[string]*preparedStmt{}
	c.portals = map[string]*boundPortal{}

	c.send(&pgproto3.AuthenticationOk{})
	for _, kv := range c.parameterStatus(params) {
		c.send(&pgproto3.ParameterStatus{Name: kv[0], Value: kv[1]})
	}
	c.send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: uint32ToBytes(c.secret)})
	_ = nc.SetDeadline(time.Time{})
	if tc, ok := c.nc().(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Time{})
	}
	return nil
}

func uint32ToBytes(v uint32) []byte {
	return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// parameterStatus is the set PostgreSQL 15 reports at startup, with
// moraine's fixed session settings.
func (c *conn) parameterStatus(params map[string]string) [][2]string {
	set := map[string]string{
		"application_name":              params["application_name"],
		"client_encoding":               "UTF8",
		"DateStyle":                     "ISO, MDY",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
		"integer_datetimes":             "on",
		"IntervalStyle":                 "postgres",
		"is_superuser":                  "on",
		"server_encoding":               "UTF8",
		"server_version":                c.srv.cfg.ServerVersion,
		"session_authorization":         c.info.User,
		"standard_conforming_strings":   "on",
		"TimeZone":                      "UTC",
	}
	extra := c.srv.parameters()
	for k, v := range extra {
		set[k] = v
	}
	order := []string{"application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
		"in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser", "server_encoding",
		"server_version", "session_authorization", "standard_conforming_strings", "TimeZone"}
	out := make([][2]string, 0, len(set))
	seen := map[string]bool{}
	for _, k := range order {
		out = append(out, [2]string{k, set[k]})
		seen[k] = true
	}
	for k, v := range extra {
		if !seen[k] {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// interruptIfIdle wakes a connection blocked waiting for its next request,
// so that Shutdown can close it.
func (c *conn) interruptIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.idle {
		_ = c.mu.netConn.SetReadDeadline(time.Now())
	}
}

// cancelStatement cancels the running statement, if any.
func (c *conn) cancelStatement(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.stmtCancel != nil {
		c.mu.stmtCancel(cause)
	}
}

// enterIdle marks the conn idle and arms the read deadline. It reports
// false when the server is shutting down.
func (c *conn) enterIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv.isClosing() {
		return false
	}
	c.mu.idle = true
	var d time.Time
	switch {
	case c.evicted.Load() != nil:
		// Terminated while it was busy: the deadline evict set must not be
		// lifted, or the next request would be served.
		d = time.Now()
	case c.srv.cfg.IdleTimeout > 0:
		d = time.Now().Add(c.srv.cfg.IdleTimeout)
	}
	_ = c.mu.netConn.SetReadDeadline(d)
	return true
}

func (c *conn) leaveIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.idle = false
	_ = c.mu.netConn.SetReadDeadline(time.Time{})
}

var errShutdown = &Error{Severity: SeverityFatal, Code: pgcode.AdminShutdown,
	Message: "terminating connection due to administrator command"}

// loop serves requests until the client leaves or the connection fails.
func (c *conn) loop() error {
	// Output is written at ReadyForQuery (after a Query or Sync), on
	// Flush, and whenever flushThreshold bytes are buffered — not after
	// every message — so a pipelined Parse/Bind/Describe/Execute/Sync
	// batch is answered in one write, as PostgreSQL does. The protocol
	// obliges clients to send Sync or Flush before waiting for answers.
	ready := true
	for {
		if ready && !c.skipToSync {
			for _, kv := range c.pendingStatus {
				c.send(&pgproto3.ParameterStatus{Name: kv[0], Value: kv[1]})
			}
			c.pendingStatus = c.pendingStatus[:0]
			c.send(&pgproto3.ReadyForQuery{TxStatus: byte(c.sess.TxStatus())})
			ready = false
			c.flushNow = true
		}
		if c.flushNow || c.fatal != nil {
			c.flushNow = false
			if err := c.flush(); err != nil {
				return err
			}
		}
		if c.fatal != nil {
			return c.fatal
		}
		if !c.enterIdle() {
			c.sendFatal(c.srv.shutdownError())
			return errClosing
		}
		msg, err := c.be.Receive()
		c.leaveIdle()
		if err != nil {
			return c.receiveFailed(err)
		}
		if c.skipToSync {
			switch msg.(type) {
			case *pgproto3.Sync:
				c.skipToSync = false
				c.endOfTransactionCleanup()
				ready = true
			case *pgproto3.Terminate:
				return errClosing
			}
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(m.String)
			ready = true
		case *pgproto3.Parse:
			c.handleParse(m)
		case *pgproto3.Bind:
			c.handleBind(m)
		case *pgproto3.Describe:
			c.handleDescribe(m)
		case *pgproto3.Execute:
			c.handleExecute(m)
		case *pgproto3.Close:
			c.handleClose(m)
		case *pgproto3.Sync:
			c.endOfTransactionCleanup()
			ready = true
		case *pgproto3.Flush:
			c.flushNow = true
		case *pgproto3.Terminate:
			return errClosing
		case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
			// Leftovers of a COPY IN that already failed: PostgreSQL drops
			// them silently.
		case *pgproto3.FunctionCall:
			c.extendedError(&Error{Code: pgcode.FeatureNotSupported, Message: "fastpath function calls are not supported"})
		default:
			c.sendFatal(&Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf("unexpected message %T", msg)})
			return errClosing
		}
	}
}

// receiveFailed turns a Receive error into the connection's last words.
func (c *conn) receiveFailed(err error) error {
	// pgproto3 reports a client hang-up (even between messages) as
	// io.ErrUnexpectedEOF; a bare io.EOF comes from decoding a truncated
	// message body, which is a protocol violation.
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return errClosing
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if e := c.evicted.Load(); e != nil {
			c.sendFatal(e)
		} else if c.srv.isClosing() {
			c.sendFatal(c.srv.shutdownError())
		} else {
			c.sendFatal(&Error{Code: pgcode.IdleSessionTimeout, Message: "terminating connection due to idle-session timeout"})
		}
		return errClosing
	}
	var tooBig *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooBig) {
		c.sendFatal(&Error{Code: pgcode.ProgramLimitExceeded, Message: fmt.Sprintf(
			"invalid message length: %d bytes exceeds the limit of %d", tooBig.ActualBodyLen, tooBig.MaxExpectedBodyLen)})
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return err
	}
	c.sendFatal(&Error{Code: pgcode.ProtocolViolation, Message: "invalid frontend message: " + err.Error()})
	return err
}

// runStatement runs fn with a statement context that a CancelRequest or
// the statement timeout can end, recovering an executor panic into an
// internal error that also closes the connection.
func (c *conn) runStatement(fn func(ctx context.Context) error) (err error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var stop context.CancelFunc = func() {}
	if t := c.srv.cfg.StatementTimeout; t > 0 {
		ctx, stop = context.WithTimeoutCause(ctx, t, errStatementTimeoutCause)
	}
	c.mu.Lock()
	c.mu.stmtCancel = cancel
	c.mu.Unlock()
	unwatch := watchPeer(c.raw, c.srv.cfg.ClientCheckInterval, cancel)
	defer func() {
		unwatch()
		c.mu.Lock()
		c.mu.stmtCancel = nil
		c.mu.Unlock()
		stop()
		cause := context.Cause(ctx)
		cancel(nil)
		if r := recover(); r != nil {
			c.srv.log.Error("pgwire: executor panic", "panic", r, "stack", string(debug.Stack()))
			c.fatal = fmt.Errorf("pgwire: executor panic: %v", r)
			err = &Error{Code: pgcode.InternalError, Message: fmt.Sprintf("internal error: %v", r)}
			return
		}
		if err != nil {
			err = asPgError(err, cause)
		}
	}()
	return fn(ctx)
}

func (c *conn) sendError(err error) {
	c.send(asPgError(err, nil).toErrorResponse())
}

// simpleQuery handles a Query message.
func (c *conn) simpleQuery(sql string) {
	// A simple Query destroys the unnamed portal and the unnamed
	// statement, as in PostgreSQL.
	c.closePortal("")
	c.closeStatement("")
	if err := checkEncoding(sql); err != nil {
		c.sendError(err)
		return
	}
	w := c.resetWriter(false, nil, 0)
	err := c.runStatement(func(ctx context.Context) error {
		w.ctx = ctx
		return c.sess.Query(ctx, sql, w)
	})
	w.finishStatement()
	if len(sql) >= largeRequest {
		ReleaseMemory()
	}
	c.applyDiscard(nil)
	if err == nil && w.inResult() {
		err = &Error{Code: pgcode.InternalError, Message: "executor left a statement result unfinished"}
	}
	if err != nil {
		c.sendError(err)
		return
	}
	if w.results == 0 {
		c.send(&pgproto3.EmptyQueryResponse{})
	}
}

// extendedError reports an extended-protocol error and discards messages
// until Sync.
func (c *conn) extendedError(err error) {
	c.sendError(err)
	c.skipToSync = true
}

func (c *conn) handleParse(m *pgproto3.Parse) {
	if m.Name != "" {
		if _, exists := c.stmts[m.Name]; exists {
			c.extendedError(&Error{Code: pgcode.DuplicatePreparedStatement, Message: fmt.Sprintf("prepared statement %q already exists", m.Name)})
			return
		}
	}
	sql := m.Query
	if err := checkEncoding(sql); err != nil {
		c.extendedError(err)
		return
	}
	oids := append([]uint32(nil), m.ParameterOIDs...)
	var st Statement
	err := c.runStatement(func(ctx context.Context) error {
		var err error
		st, err = c.sess.Prepare(ctx, sql, oids)
		return err
	})
	if err != nil {
		c.extendedError(err)
		return
	}
	c.closeStatement(m.Name)
	c.stmts[m.Name] = &preparedStmt{stmt: st, cols: st.Columns(), oids: st.ParamOIDs()}
	c.send(&pgproto3.ParseComplete{})
}

func stmtNotFound(name string) *Error {
	if name == "" {
		return &Error{Code: pgcode.InvalidSQLStatementName, Message: "unnamed prepared statement does not exist"}
	}
	return &Error{Code: pgcode.InvalidSQLStatementName, Message: fmt.Sprintf("prepared statement %q does not exist", name)}
}

func portalNotFound(name string) *Error {
	return &Error{Code: pgcode.InvalidCursorName, Message: fmt.Sprintf("portal %q does not exist", name)}
}

// resolveFormats expands a Bind's format code list (empty = all text, one
// = all that code, else one per item) to n entries.
func resolveFormats(codes []int16, n int, what string) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	case n:
		copy(out, codes)
	default:
		return nil, &Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf(
			"bind message has %d %s formats but %d %s", len(codes), what, n, map[string]string{"parameter": "parameters", "result": "result columns"}[what])}
	}
	for _, f := range out {
		if f != TextFormat && f != BinaryFormat {
			return nil, &Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf("unsupported format code: %d", f)}
		}
	}
	return out, nil
}

func (c *conn) handleBind(m *pgproto3.Bind) {
	ps, ok := c.stmts[m.PreparedStatement]
	if !ok {
		c.extendedError(stmtNotFound(m.PreparedStatement))
		return
	}
	if m.DestinationPortal != "" {
		if _, exists := c.portals[m.DestinationPortal]; exists {
			c.extendedError(&Error{Code: pgcode.DuplicateCursor, Message: fmt.Sprintf("portal %q already exists", m.DestinationPortal)})
			return
		}
	}
	if len(m.Parameters) != len(ps.oids) {
		c.extendedError(&Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf(
			"bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), m.PreparedStatement, len(ps.oids))})
		return
	}
	pf, err := resolveFormats(m.ParameterFormatCodes, len(m.Parameters), "parameter")
	if err != nil {
		c.extendedError(err)
		return
	}
	rf, err := resolveFormats(m.ResultFormatCodes, len(ps.cols), "result")
	if err != nil {
		c.extendedError(err)
		return
	}
	params := make([]Param, len(m.Parameters))
	for i, v := range m.Parameters {
		params[i] = Param{OID: ps.oids[i], Format: pf[i]}
		if v != nil {
			params[i].Value = append(make([]byte, 0, len(v)), v...) // Receive reuses its buffer
		}
	}
	var p Portal
	err = c.runStatement(func(ctx context.Context) error {
		var err error
		p, err = ps.stmt.Bind(ctx, params)
		return err
	})
	if err != nil {
		c.extendedError(err)
		return
	}
	var cols []Column // stays nil for a NoData statement
	if ps.cols != nil {
		cols = make([]Column, len(ps.cols))
		copy(cols, ps.cols)
	}
	for i := range cols {
		cols[i].Format = rf[i]
	}
	c.closePortal(m.DestinationPortal)
	c.portals[m.DestinationPortal] = &boundPortal{portal: p, cols: cols, formats: rf}
	c.send(&pgproto3.BindComplete{})
}

func (c *conn) handleDescribe(m *pgproto3.Describe) {
	switch m.ObjectType {
	case 'S':
		ps, ok := c.stmts[m.Name]
		if !ok {
			c.extendedError(stmtNotFound(m.Name))
			return
		}
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: ps.oids})
		c.sendRowDescription(ps.cols, nil)
	case 'P':
		bp, ok := c.portals[m.Name]
		if !ok {
			c.extendedError(portalNotFound(m.Name))
			return
		}
		c.sendRowDescription(bp.cols, bp.formats)
	default:
		c.extendedError(&Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf("invalid DESCRIBE message subtype %d", m.ObjectType)})
	}
}

// sendRowDescription sends a RowDescription for cols, or NoData for none.
func (c *conn) sendRowDescription(cols []Column, formats []int16) {
	if cols == nil {
		c.send(&pgproto3.NoData{})
		return
	}
	c.out = appendRowDescription(c.out, cols, formats)
}

func (c *conn) handleExecute(m *pgproto3.Execute) {
	bp, ok := c.portals[m.Portal]
	if !ok {
		c.extendedError(portalNotFound(m.Portal))
		return
	}
	maxRows := int(m.MaxRows)
	if maxRows < 0 {
		maxRows = 0
	}
	w := c.resetWriter(true, bp, maxRows)
	err := c.runStatement(func(ctx context.Context) error {
		w.ctx = ctx
		return bp.portal.Execute(ctx, w, maxRows)
	})
	w.finishStatement()
	c.applyDiscard(bp)
	if err == nil && w.inResult() {
		err = &Error{Code: pgcode.InternalError, Message: "executor left a portal result unfinished"}
	}
	if err != nil {
		c.extendedError(err)
		return
	}
	if w.results == 0 && !w.suspended {
		c.send(&pgproto3.EmptyQueryResponse{})
	}
}

func (c *conn) handleClose(m *pgproto3.Close) {
	switch m.ObjectType {
	case 'S':
		c.closeStatement(m.Name)
	case 'P':
		c.closePortal(m.Name)
	default:
		c.extendedError(&Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf("invalid CLOSE message subtype %d", m.ObjectType)})
		return
	}
	c.send(&pgproto3.CloseComplete{})
}

func (c *conn) closeStatement(name string) {
	if ps, ok := c.stmts[name]; ok {
		ps.stmt.Close()
		delete(c.stmts, name)
	}
}

func (c *conn) closePortal(name string) {
	if bp, ok := c.portals[name]; ok {
		bp.portal.Close()
		delete(c.portals, name)
	}
}

// endOfTransactionCleanup drops portals when no transaction is open:
// PostgreSQL portals (without WITH HOLD) live only as long as their
// transaction.
func (c *conn) endOfTransactionCleanup() {
	if c.sess.TxStatus() != TxIdle {
		return
	}
	for name := range c.portals {
		c.closePortal(name)
	}
}

// applyDiscard carries out a DISCARD ALL that just completed: every named
// prepared statement is deallocated and every portal but the one that ran
// it (active) is closed. The unnamed statement stays, as in PostgreSQL,
// whose DEALLOCATE ALL only drops named statements (a DISCARD ALL sent as a
// simple Query has destroyed it already, as every simple Query does).
func (c *conn) applyDiscard(active *boundPortal) {
	if !c.discarded {
		return
	}
	c.discarded = false
	for name, bp := range c.portals {
		if bp != active {
			c.closePortal(name)
		}
	}
	for name := range c.stmts {
		if name != "" {
			c.closeStatement(name)
		}
	}
}

func (c *conn) closeAllStatements() {
	for name := range c.portals {
		c.closePortal(name)
	}
	for name := range c.stmts {
		c.closeStatement(name)
	}
}

// checkEncoding verifies a statement text as PostgreSQL verifies every
// string a client sends: valid UTF8 without NUL, else 22021.
func checkEncoding(s string) *Error {
	var se *datum.SyntaxError
	if err := datum.CheckUTF8(s); errors.As(err, &se) {
		return &Error{Code: se.Code, Message: se.Msg}
	}
	return nil
}

// hostOf is the host part of a client address, as PostgreSQL names it in
// its connection errors.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return "[local]"
}
