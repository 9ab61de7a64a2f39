package memcat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// Errors callers branch on. The SQL layer turns them into SQLSTATEs.
var (
	ErrNoSuchTable   = errors.New("memcat: no such table")
	ErrNoSuchSchema  = errors.New("memcat: no such schema")
	ErrTableExists   = errors.New("memcat: table already exists")
	ErrSchemaExists  = errors.New("memcat: schema already exists")
	ErrNoSuchColumn  = errors.New("memcat: no such column")
	ErrColumnExists  = errors.New("memcat: column already exists")
	ErrSerialization = errors.New("memcat: concurrent update")
	ErrNoSuchRow     = errors.New("memcat: no such row")
)

// UniqueError is a primary-key violation.
type UniqueError struct {
	Schema     string // schema name
	Table      string // table name
	Constraint string // "<table>_pkey"
	Columns    []string
	Values     []string // text forms of the duplicate key
	detail     string
}

func (e *UniqueError) Error() string {
	return fmt.Sprintf("duplicate key value violates unique constraint %q", e.Constraint)
}

// Detail is PostgreSQL's DETAIL line for the violation.
func (e *UniqueError) Detail() string {
	if e.detail != "" {
		return e.detail
	}
	return fmt.Sprintf("Key (%s)=(%s) already exists.", strings.Join(e.Columns, ", "), strings.Join(e.Values, ", "))
}

// convert maps catalog and commit errors to the forms the SQL layer
// renders: memcat's sentinels and UniqueError, or a *pgwire.Error carrying
// the lower layer's SQLSTATE.
func convert(err error) error {
	if err == nil {
		return nil
	}
	var ce *catalog.Error
	if errors.As(err, &ce) {
		switch {
		case errors.Is(ce, catalog.ErrDuplicateKey):
			return &UniqueError{Schema: ce.Schema, Table: ce.Table, Constraint: ce.Constraint, detail: ce.Detail}
		case errors.Is(ce, catalog.ErrSerialization):
			return fmt.Errorf("%w: %s", ErrSerialization, ce.Message)
		case errors.Is(ce, catalog.ErrNoTable):
			return fmt.Errorf("%w: %s", ErrNoSuchTable, ce.Message)
		case errors.Is(ce, catalog.ErrNoSchema):
			return fmt.Errorf("%w: %s", ErrNoSuchSchema, ce.Message)
		case errors.Is(ce, catalog.ErrTableExists):
			return fmt.Errorf("%w: %s", ErrTableExists, ce.Message)
		case errors.Is(ce, catalog.ErrSchemaExists):
			return fmt.Errorf("%w: %s", ErrSchemaExists, ce.Message)
		case errors.Is(ce, catalog.ErrNoColumn):
			return fmt.Errorf("%w: %s", ErrNoSuchColumn, ce.Message)
		case errors.Is(ce, catalog.ErrColumnExists):
			return fmt.Errorf("%w: %s", ErrColumnExists, ce.Message)
		case errors.Is(ce, catalog.ErrNoRow):
			return fmt.Errorf("%w: %s", ErrNoSuchRow, ce.Message)
		}
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() != "" {
		pe := &pgwire.Error{Code: st.SQLState(), Message: err.Error(), Cause: err}
		var d interface{ Error() string }
		if errors.As(err, &d) {
			pe.Message = d.Error()
		}
		if ce != nil && ce.Detail != "" {
			pe.Detail = ce.Detail
		}
		return pe
	}
	if errors.Is(err, catalog.ErrBadDef) || errors.Is(err, keyspace.ErrUnknownTable) || errors.Is(err, keyspace.ErrBadDef) {
		return &pgwire.Error{Code: pgcode.FeatureNotSupported, Message: err.Error(), Cause: err}
	}
	return err
}
