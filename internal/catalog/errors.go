package catalog

import (
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// Sentinel errors. Every error the catalog returns for a caller mistake or a
// constraint violation is an *Error wrapping one of these, so callers branch
// with errors.Is and render the PostgreSQL error with errors.As.
var (
	ErrNoSchema      = errors.New("catalog: schema does not exist")
	ErrSchemaExists  = errors.New("catalog: schema already exists")
	ErrNoTable       = errors.New("catalog: table does not exist")
	ErrTableExists   = errors.New("catalog: table already exists")
	ErrNoColumn      = errors.New("catalog: column does not exist")
	ErrColumnExists  = errors.New("catalog: column already exists")
	ErrNoRow         = errors.New("catalog: no row at this ctid")
	ErrDuplicateKey  = errors.New("catalog: duplicate key")
	ErrNotNull       = errors.New("catalog: null value in a NOT NULL column")
	ErrBadValue      = errors.New("catalog: value does not fit the column")
	ErrSerialization = errors.New("catalog: concurrent update")
	ErrTxnDone       = errors.New("catalog: transaction already committed or rolled back")
	ErrBadDef        = errors.New("catalog: invalid table definition")
	ErrCorrupt       = errors.New("catalog: corrupt stored catalog")
)

// Error is a catalog error with the PostgreSQL SQLSTATE and message text the
// SQL layer sends to the client. Kind is one of the sentinels above.
type Error struct {
	Kind       error
	Code       string // SQLSTATE
	Message    string // PostgreSQL's primary message text
	Detail     string // PostgreSQL's DETAIL, may be empty
	Schema     string
	Table      string
	Column     string
	Constraint string
}

func (e *Error) Error() string    { return e.Message }
func (e *Error) Unwrap() error    { return e.Kind }
func (e *Error) SQLState() string { return e.Code }

// PgFields are the ErrorResponse fields sent with the error: the DETAIL, and
// for a unique violation the schema, table and constraint, as PostgreSQL
// sends them. The object an error of another kind names is for callers and
// logs; it is in the message text.
func (e *Error) PgFields() pgcode.Fields {
	f := pgcode.Fields{Detail: e.Detail}
	if e.Kind == ErrDuplicateKey {
		f.Schema, f.Table, f.Constraint = e.Schema, e.Table, e.Constraint
	}
	return f
}

func errNoSchema(name string) error {
	return &Error{Kind: ErrNoSchema, Code: pgcode.InvalidSchemaName, Schema: name,
		Message: fmt.Sprintf("schema %q does not exist", name)}
}

func errSchemaExists(name string) error {
	return &Error{Kind: ErrSchemaExists, Code: pgcode.DuplicateSchema, Schema: name,
		Message: fmt.Sprintf("schema %q already exists", name)}
}

func errNoTable(schema, name string) error {
	return &Error{Kind: ErrNoTable, Code: pgcode.UndefinedTable, Schema: schema, Table: name,
		Message: fmt.Sprintf("relation %q does not exist", schema+"."+name)}
}

func errTableExists(schema, name string) error {
	return &Error{Kind: ErrTableExists, Code: pgcode.DuplicateTable, Schema: schema, Table: name,
		Message: fmt.Sprintf("relation %q already exists", name)}
}

func errNoColumn(table, col string) error {
	return &Error{Kind: ErrNoColumn, Code: pgcode.UndefinedColumn, Table: table, Column: col,
		Message: fmt.Sprintf("column %q of relation %q does not exist", col, table)}
}

func errColumnExists(table, col string) error {
	return &Error{Kind: ErrColumnExists, Code: pgcode.DuplicateColumn, Table: table, Column: col,
		Message: fmt.Sprintf("column %q of relation %q already exists", col, table)}
}

func errNoRow(table string, c CTID) error {
	return &Error{Kind: ErrNoRow, Code: pgcode.ObjectNotInPrerequisiteState, Table: table,
		Message: fmt.Sprintf("no row of %q at ctid %s", table, c)}
}

func errNotNull(table, col string) error {
	return &Error{Kind: ErrNotNull, Code: pgcode.NotNullViolation, Table: table, Column: col,
		Message: fmt.Sprintf("null value in column %q of relation %q violates not-null constraint", col, table)}
}

func errBadValue(table string, format string, args ...any) error {
	return &Error{Kind: ErrBadValue, Code: pgcode.DatatypeMismatch, Table: table,
		Message: fmt.Sprintf("table %q: ", table) + fmt.Sprintf(format, args...)}
}

func errSerialization(table string, c CTID) error {
	return &Error{Kind: ErrSerialization, Code: pgcode.SerializationFailure, Table: table,
		Message: "could not serialize access due to concurrent update",
		Detail:  fmt.Sprintf("row %s of %q changed after the transaction's snapshot", c, table)}
}

// DuplicateKey is PostgreSQL's unique violation of table's primary key,
// whose text DuckLake's retry loop scans for ("unique", "primary key",
// "conflict", "concurrent"). cols and vals are the key's column names and
// text forms, comma-separated.
func DuplicateKey(schema, table string, cols, vals string) error {
	c := table + "_pkey"
	return &Error{Kind: ErrDuplicateKey, Code: pgcode.UniqueViolation, Schema: schema, Table: table, Constraint: c,
		Message: fmt.Sprintf("duplicate key value violates unique constraint %q", c),
		Detail:  fmt.Sprintf("Key (%s)=(%s) already exists.", cols, vals)}
}

// SerializationFailure is PostgreSQL's 40001 for a transaction that must
// retry; detail may be empty.
func SerializationFailure(detail string) error {
	return &Error{Kind: ErrSerialization, Code: pgcode.SerializationFailure,
		Message: "could not serialize access due to concurrent update", Detail: detail}
}

// errSpeculationFailed is returned by the commit of a transaction that
// pinned a sealed version whose transaction did not commit it (Txn.Seal).
func errSpeculationFailed() error {
	return &Error{Kind: ErrSerialization, Code: pgcode.SerializationFailure,
		Message: "could not serialize access due to concurrent update",
		Detail:  "the transaction read the writes of a concurrent transaction that did not commit them"}
}

// errSpeculationUndecided is returned by the commit of a transaction that
// pinned a sealed version whose transaction did not decide within
// Options.SealedWait.
func errSpeculationUndecided() error {
	return &Error{Kind: ErrSerialization, Code: pgcode.SerializationFailure,
		Message: "could not serialize access due to concurrent update",
		Detail:  "the transaction read the writes of a concurrent transaction that has not committed them in time"}
}
