package sql

import (
	"errors"
	"fmt"

	pgquery "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// SQLSTATEs the executor raises.
const (
	codeSyntax          = "42601"
	codeUndefinedTable  = "42P01"
	codeUndefinedColumn = "42703"
	codeAmbiguousColumn = "42702"
	codeUndefinedFunc   = "42883"
	codeUndefinedObject = "42704"
	codeDuplicateTable  = "42P07"
	codeDuplicateSchema = "42P06"
	codeDuplicateColumn = "42701"
	codeInvalidSchema   = "3F000"
	codeUnique          = "23505"
	codeNotNull         = "23502"
	codeNotSupported    = "0A000"
	codeDatatype        = "42804"
	codeSerialization   = "40001"
	codeReadOnly        = "25006"
	codeNoActiveTx      = "25P01"
	codeActiveTx        = "25001"
	codeInFailedTx      = "25P02"
	codeCardinality     = "21000"
	codeInternal        = "XX000"
	codeWrongObjectType = "42809"
	codeInvalidParam    = "22023"
	codeDivByZero       = "22012"
	codeStackDepth      = "54001"
	codeOutOfMemory     = "53200"
)

func errf(code, format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// unsupported is the answer to anything outside the vocabulary.
func unsupported(format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Code: codeNotSupported, Message: "moraine does not support " + fmt.Sprintf(format, args...)}
}

// parseError converts a pg_query parse failure into PostgreSQL's 42601.
func parseError(err error) *pgwire.Error {
	var pe *parser.Error
	if errors.As(err, &pe) {
		return &pgwire.Error{Code: codeSyntax, Message: pe.Message, Position: pe.Cursorpos}
	}
	return &pgwire.Error{Code: codeSyntax, Message: err.Error(), Cause: err}
}

var _ = pgquery.Parse

// asPg converts errors from lower layers into PostgreSQL errors.
func asPg(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgwire.Error
	if errors.As(err, &pe) {
		return pe
	}
	var se *datum.SyntaxError
	if errors.As(err, &se) {
		return &pgwire.Error{Code: se.Code, Message: se.Msg, Cause: err}
	}
	var ue *memcat.UniqueError
	if errors.As(err, &ue) {
		return &pgwire.Error{Code: codeUnique, Message: ue.Error(), Detail: ue.Detail(), Cause: err,
			Schema: ue.Schema, Table: ue.Table, Constraint: ue.Constraint}
	}
	if errors.Is(err, memcat.ErrSerialization) {
		return &pgwire.Error{Code: codeSerialization, Message: "could not serialize access due to concurrent update", Cause: err}
	}
	return err
}
