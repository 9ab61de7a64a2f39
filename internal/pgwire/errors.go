package pgwire

import (
	"context"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Severities of ErrorResponse and NoticeResponse.
const (
	SeverityError   = "ERROR"
	SeverityFatal   = "FATAL"
	SeverityWarning = "WARNING"
	SeverityNotice  = "NOTICE"
	SeverityInfo    = "INFO"
)

// Error is a PostgreSQL error or notice as the executor reports it; pgwire
// renders it as an ErrorResponse (or NoticeResponse) with the same fields.
// Severity defaults to ERROR and Code to XX000 when empty. Position is the
// 1-based character offset into the statement text, 0 for none.
type Error struct {
	Severity string
	Code     string
	Message  string
	Detail   string
	Hint     string
	Position int
	// Schema, Table, Column, DataType and Constraint name the object an
	// error is about (ErrorResponse fields s, t, c, d, n), as PostgreSQL
	// sends them for constraint violations.
	Schema, Table, Column, DataType, Constraint string
	// Cause is an optional underlying error, for errors.Is/As; it is not
	// sent to the client.
	Cause error
}

func (e *Error) Error() string {
	sev := e.Severity
	if sev == "" {
		sev = SeverityError
	}
	code := e.Code
	if code == "" {
		code = pgcode.InternalError
	}
	return fmt.Sprintf("%s: %s (SQLSTATE %s)", sev, e.Message, code)
}

func (e *Error) Unwrap() error { return e.Cause }

// SQLState is the error's SQLSTATE (pgcode.Error).
func (e *Error) SQLState() string { return e.code() }

// Errorf returns an ERROR with the given SQLSTATE and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Severity: SeverityError, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errCanceled and errStatementTimeout are what a statement ends with when
// its context is canceled by a CancelRequest or by the statement timeout.
var (
	errCanceled         = &Error{Code: pgcode.QueryCanceled, Message: "canceling statement due to user request"}
	errStatementTimeout = &Error{Code: pgcode.QueryCanceled, Message: "canceling statement due to statement timeout"}
)

// asPgError converts any error the executor (or pgwire) produced into the
// *Error that is sent. The first error in the chain that knows its SQLSTATE
// (pgcode.Error) decides: an *Error is sent as it is, any other with its
// code, its own text and the fields it describes (pgcode.Described). A bare
// context error reads as the statement context ended: a timeout names the
// statement timeout, a cancel the user request, a shutdown the
// administrator. Any other error becomes XX000 with its text, since the
// client must still get a message.
func asPgError(err error, cause error) *Error {
	var coded pgcode.Error
	if errors.As(err, &coded) {
		if pe, ok := coded.(*Error); ok {
			return pe
		}
		pe := &Error{Code: coded.SQLState(), Message: coded.Error(), Cause: err}
		if d, ok := coded.(pgcode.Described); ok {
			f := d.PgFields()
			pe.Detail, pe.Hint = f.Detail, f.Hint
			pe.Schema, pe.Table, pe.Column, pe.DataType, pe.Constraint = f.Schema, f.Table, f.Column, f.DataType, f.Constraint
		}
		return pe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(cause, errStatementTimeoutCause) {
			return errStatementTimeout
		}
		if errors.Is(cause, errAdminShutdownCause) {
			return errShutdown
		}
		return errCanceled
	}
	return &Error{Code: pgcode.InternalError, Message: err.Error(), Cause: err}
}

// AsError is the *Error a client is sent for err, as the wire renders it
// (for tests and tools that look at an executor's errors as a client would).
func AsError(err error) *Error { return asPgError(err, nil) }

// errStatementTimeoutCause marks a statement context that ended by timeout.
var errStatementTimeoutCause = errors.New("pgwire: statement timeout")

// errCancelRequestCause marks a statement context ended by a CancelRequest.
var errCancelRequestCause = errors.New("pgwire: cancel request")

func (e *Error) severity() string {
	if e.Severity == "" {
		return SeverityError
	}
	return e.Severity
}

func (e *Error) code() string {
	if e.Code == "" {
		return pgcode.InternalError
	}
	return e.Code
}

func (e *Error) toErrorResponse() *pgproto3.ErrorResponse {
	r := &pgproto3.ErrorResponse{
		Severity:            e.severity(),
		SeverityUnlocalized: e.severity(),
		Code:                e.code(),
		Message:             e.Message,
		Detail:              e.Detail,
		Hint:                e.Hint,
		SchemaName:          e.Schema,
		TableName:           e.Table,
		ColumnName:          e.Column,
		DataTypeName:        e.DataType,
		ConstraintName:      e.Constraint,
	}
	if e.Position > 0 {
		r.Position = int32(e.Position)
	}
	return r
}

func (e *Error) toNoticeResponse() *pgproto3.NoticeResponse {
	sev := e.Severity
	if sev == "" {
		sev = SeverityNotice
	}
	code := e.Code
	if code == "" {
		code = pgcode.SuccessfulCompletion
	}
	return &pgproto3.NoticeResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                code,
		Message:             e.Message,
		Detail:              e.Detail,
		Hint:                e.Hint,
		Position:            int32(e.Position),
	}
}
