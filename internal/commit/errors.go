package commit

import (
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// Sentinels a caller branches on. Every error Submit (or its wait) returns for a refused
// commit is an *Error wrapping one of them.
var (
	// ErrShape: a row operation that is in the SQL vocabulary but illegal for
	// its kind (RFC 0008's shape errors, e.g. SET begin_snapshot on a data
	// file that is not current). Nothing of the transaction lands.
	ErrShape = errors.New("commit: illegal row shape")
	// ErrConflict: the commit's change set conflicts with a commit that
	// landed after its base snapshot, by DuckLake's own matrix.
	ErrConflict = errors.New("commit: transaction conflict")
	// ErrHead: a snapshot-minting commit does not advance the head by one.
	ErrHead = errors.New("commit: snapshot does not advance the head by one")
	// ErrHold: a compaction whose files do not hold their sources' row ids
	// (RFC 0008). Refused as corruption; the sources stay live.
	ErrHold = errors.New("commit: compaction row-id hold violated")
	// ErrIntegrity: a commit that would break a lake invariant the store
	// cannot repair afterwards: a tombstone dropped while rows it hides are
	// still readable, a row id handed out twice (guards.go).
	ErrIntegrity = errors.New("commit: lake integrity")
	// ErrStoreFailed: an earlier write to the store failed; this pipeline
	// accepts no commit until the server reopens the store.
	ErrStoreFailed = errors.New("commit: store write failed; the server must reopen the store")
)

// Error is a refused commit, with the SQLSTATE and message the SQL layer sends
// to the client.
type Error struct {
	Kind    error
	Code    string // SQLSTATE
	Message string
	Detail  string
	// Class is a conflict's class (changes.Conflict.Class) when Kind is
	// ErrConflict: what the metrics and logs count refused commits by.
	Class string
}

func (e *Error) Error() string    { return e.Message }
func (e *Error) Unwrap() error    { return e.Kind }
func (e *Error) SQLState() string { return e.Code }

// PgFields are the ErrorResponse fields sent with the error.
func (e *Error) PgFields() pgcode.Fields { return pgcode.Fields{Detail: e.Detail} }

func shapeErr(format string, args ...any) error {
	return &Error{Kind: ErrShape, Code: pgcode.FeatureNotSupported, Message: "illegal row operation: " + fmt.Sprintf(format, args...)}
}
