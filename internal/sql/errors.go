package sql

import (
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/moraine-db/moraine/internal/pgwire"
)

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
