package sql

import (
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	pgquery "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// SQLSTATEs the executor raises.
const ()

func errf(code, format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// unsupported is the answer to anything outside the vocabulary.
func unsupported(format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Code: pgcode.FeatureNotSupported, Message: "moraine does not support " + fmt.Sprintf(format, args...)}
}

// parseError converts a pg_query parse failure into PostgreSQL's 42601.
func parseError(err error) *pgwire.Error {
	var pe *parser.Error
	if errors.As(err, &pe) {
		return &pgwire.Error{Code: pgcode.SyntaxError, Message: pe.Message, Position: pe.Cursorpos}
	}
	return &pgwire.Error{Code: pgcode.SyntaxError, Message: err.Error(), Cause: err}
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
		return &pgwire.Error{Code: pgcode.UniqueViolation, Message: ue.Error(), Detail: ue.Detail(), Cause: err,
			Schema: ue.Schema, Table: ue.Table, Constraint: ue.Constraint}
	}
	if errors.Is(err, memcat.ErrSerialization) {
		return &pgwire.Error{Code: pgcode.SerializationFailure, Message: "could not serialize access due to concurrent update", Cause: err}
	}
	return err
}
