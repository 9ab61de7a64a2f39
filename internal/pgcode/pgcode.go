// Package pgcode names the SQLSTATEs moraine sends, once, with PostgreSQL's
// condition names (Appendix A of its manual). Every error that reaches a
// client carries one of these from where it arises; no other package spells
// a SQLSTATE out.
package pgcode

import "fmt"

// Class 00 — Successful Completion, and Class 01 — Warning.
const (
	SuccessfulCompletion = "00000"
	Warning              = "01000"
)

// Class 08 — Connection Exception.
const (
	ConnectionFailure = "08006"
	ProtocolViolation = "08P01"
)

// Class 0A — Feature Not Supported.
const FeatureNotSupported = "0A000"

// Class 21 — Cardinality Violation.
const CardinalityViolation = "21000"

// Class 22 — Data Exception.
const (
	StringDataRightTruncation           = "22001"
	NumericValueOutOfRange              = "22003"
	NullValueNotAllowed                 = "22004"
	DatetimeFieldOverflow               = "22008"
	InvalidTimeZoneDisplacementValue    = "22009"
	DivisionByZero                      = "22012"
	CharacterNotInRepertoire            = "22021"
	InvalidParameterValue               = "22023"
	InvalidRegularExpression            = "2201B"
	InvalidRowCountInLimitClause        = "2201W"
	InvalidRowCountInResultOffsetClause = "2201X"
	InvalidTextRepresentation           = "22P02"
	InvalidBinaryRepresentation         = "22P03"
	BadCopyFileFormat                   = "22P04"
)

// Class 23 — Integrity Constraint Violation.
const (
	IntegrityConstraintViolation = "23000"
	NotNullViolation             = "23502"
	ForeignKeyViolation          = "23503"
	UniqueViolation              = "23505"
)

// Class 25 — Invalid Transaction State.
const (
	ActiveSQLTransaction   = "25001"
	ReadOnlySQLTransaction = "25006"
	NoActiveSQLTransaction = "25P01"
	InFailedSQLTransaction = "25P02"
)

// Class 26, 28, 34 and 3D/3F — invalid names and authorization.
const (
	InvalidSQLStatementName           = "26000"
	InvalidAuthorizationSpecification = "28000"
	InvalidPassword                   = "28P01"
	InvalidCursorName                 = "34000"
	InvalidCatalogName                = "3D000"
	InvalidSchemaName                 = "3F000"
)

// Class 40 — Transaction Rollback.
const (
	TransactionRollback  = "40000"
	SerializationFailure = "40001"
)

// Class 42 — Syntax Error or Access Rule Violation.
const (
	InsufficientPrivilege        = "42501"
	SyntaxError                  = "42601"
	InvalidName                  = "42602"
	DuplicateColumn              = "42701"
	AmbiguousColumn              = "42702"
	UndefinedColumn              = "42703"
	UndefinedObject              = "42704"
	DuplicateAlias               = "42712"
	GroupingError                = "42803"
	DatatypeMismatch             = "42804"
	WrongObjectType              = "42809"
	AmbiguousFunction            = "42725"
	UndefinedFunction            = "42883"
	ReservedName                 = "42939"
	IndeterminateCollation       = "42P22"
	UndefinedTable               = "42P01"
	UndefinedParameter           = "42P02"
	DuplicateCursor              = "42P03"
	DuplicatePreparedStatement   = "42P05"
	DuplicateSchema              = "42P06"
	DuplicateTable               = "42P07"
	InvalidColumnReference       = "42P10"
	InvalidTableDefinition       = "42P16"
	DuplicateDatabase            = "42P04"
	ObjectNotInPrerequisiteState = "55000"
	ObjectInUse                  = "55006"
	DependentObjectsStillExist   = "2BP01"
	CannotCoerce                 = "42846"
)

// Class 53, 54 — Insufficient Resources, Program Limit Exceeded.
const (
	OutOfMemory          = "53200"
	TooManyConnections   = "53300"
	ProgramLimitExceeded = "54000"
	StatementTooComplex  = "54001"
)

// Class 57 — Operator Intervention; Class 58 — System Error.
const (
	QueryCanceled      = "57014"
	AdminShutdown      = "57P01"
	CannotConnectNow   = "57P03"
	IdleSessionTimeout = "57P05"
	IOError            = "58030"
)

// Class XX — Internal Error.
const (
	InternalError = "XX000"
	DataCorrupted = "XX001"
)

// Error is the one way an error tells the wire which PostgreSQL error it is:
// the first error in a chain that implements it is sent with its SQLSTATE and
// its own text as the message (context wrapped around it is for logs). An error that names an object or carries
// a DETAIL also implements Described. Errors with no SQLSTATE in their chain
// reach the client as XX000.
type Error interface {
	error
	SQLState() string
}

// Described is an Error with the ErrorResponse fields beyond the message.
type Described interface {
	Error
	PgFields() Fields
}

// Fields are an ErrorResponse's optional fields (DETAIL, HINT, and the
// schema, table, column, data type and constraint an error is about).
type Fields struct {
	Detail, Hint                                string
	Schema, Table, Column, DataType, Constraint string
}

// Errorf formats an error sent to clients with code. Its text is the
// formatted message; a %w operand stays reachable by errors.Is and errors.As.
func Errorf(code, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf(format, args...)}
}

type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string    { return e.err.Error() }
func (e *codedError) Unwrap() error    { return e.err }
func (e *codedError) SQLState() string { return e.code }
