package pgwire

import (
	"context"
	"net"
)

// The executor contract. pgwire owns the protocol; the executor (the catalog
// SQL layer, or a toy in tests) owns parsing, statements, transactions and
// values. Calls into one Session never overlap: a connection is served by a
// single goroutine, so a Session needs no locking of its own. Different
// sessions run concurrently.

// Executor creates one Session per authenticated connection.
type Executor interface {
	// NewSession is called after authentication succeeded and before
	// ReadyForQuery. An error (an *Error, e.g. 3D000 for an unknown
	// database) is sent as a FATAL ErrorResponse and the connection closes.
	NewSession(ctx context.Context, info StartupInfo) (Session, error)
}

// StartupInfo is what the client sent in its StartupMessage, plus where it
// came from.
type StartupInfo struct {
	User            string
	Database        string // defaults to User, as in PostgreSQL
	ApplicationName string
	Options         string            // the raw "options" parameter (command-line style -c settings)
	Params          map[string]string // every startup parameter, including the above
	RemoteAddr      net.Addr
	TLS             bool
	// BackendPID is the process id reported in BackendKeyData, for
	// pg_backend_pid().
	BackendPID uint32
}

// TxStatus is the transaction status byte of ReadyForQuery.
type TxStatus byte

const (
	TxIdle   TxStatus = 'I' // not in a transaction block
	TxActive TxStatus = 'T' // in a transaction block
	TxFailed TxStatus = 'E' // in a failed transaction block: everything fails until ROLLBACK
)

// Session is the executor's state for one connection.
type Session interface {
	// Query runs a simple-query string, which may hold several statements
	// (the executor splits it). For each statement, in order, it writes the
	// statement's result to w — w.Describe, rows, then w.Complete; or
	// w.CopyOut / w.CopyIn for COPY — and stops at the first error, which
	// it returns (pgwire sends it as an ErrorResponse). A string with no
	// statement at all (empty, blanks, comments, only semicolons) writes
	// nothing and returns nil: pgwire then sends EmptyQueryResponse. ctx is
	// canceled by a CancelRequest or the statement timeout.
	Query(ctx context.Context, sql string, w *ResultWriter) error

	// Prepare parses sql for the extended protocol. paramOIDs are the
	// types the client declared (0 = unspecified), possibly fewer than
	// the statement uses. The executor may accept a string of several
	// statements: a Statement whose Columns is nil is answered NoData and
	// runs them all at Execute (DuckDB's postgres extension does this).
	Prepare(ctx context.Context, sql string, paramOIDs []uint32) (Statement, error)

	// TxStatus reports the transaction state after the last call; pgwire
	// reads it for every ReadyForQuery.
	TxStatus() TxStatus

	// Close ends the session when the connection goes away: an open
	// transaction is rolled back. It is called exactly once.
	Close() error
}

// Statement is a prepared statement.
type Statement interface {
	// ParamOIDs are the types of $1..$n, with unspecified ones resolved.
	ParamOIDs() []uint32
	// Columns describes the result rows; nil means the statement returns
	// no rows (NoData). Format fields are ignored here.
	Columns() []Column
	// Bind makes a portal from parameter values. params has one entry per
	// ParamOIDs entry; Value nil is NULL.
	Bind(ctx context.Context, params []Param) (Portal, error)
	// Close releases the statement (Close message, or replacement of the
	// unnamed statement, or session end).
	Close()
}

// Portal is a bound statement ready to run, possibly in several Execute
// steps.
type Portal interface {
	// Execute runs the portal, writing to w as Query does for one
	// statement, except that w.Describe does not send a RowDescription
	// (Describe did) and cells must use w.Formats(), which reflect the
	// Bind's result formats. With maxRows > 0 it writes at most maxRows
	// rows; if rows remain it calls w.Suspend() instead of w.Complete(),
	// and the next Execute continues where this one stopped. An Execute
	// after completion writes only Complete again (PostgreSQL sends the
	// command tag with zero rows).
	Execute(ctx context.Context, w *ResultWriter, maxRows int) error
	// Close releases the portal.
	Close()
}

// Param is one bound parameter value.
type Param struct {
	OID    uint32
	Format int16  // 0 text, 1 binary
	Value  []byte // nil = NULL; owned by the executor after Bind returns
}

// Column describes one result column (a RowDescription field).
type Column struct {
	Name         string
	TableOID     uint32
	TableAttr    int16
	TypeOID      uint32
	TypeSize     int16 // -1 for variable length; 0 means "use the known size of TypeOID"
	TypeModifier int32 // -1 for none
	Format       int16 // 0 text, 1 binary; set by pgwire from the client's request
}
