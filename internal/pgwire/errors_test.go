package pgwire

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/moraine-db/moraine/internal/pgcode"
)

// described is a lower layer's error: it knows its SQLSTATE and the object
// it is about, and knows nothing of pgwire.
type described struct{ msg string }

func (e *described) Error() string    { return e.msg }
func (e *described) SQLState() string { return pgcode.UniqueViolation }
func (e *described) PgFields() pgcode.Fields {
	return pgcode.Fields{Detail: "Key (id)=(1) already exists.", Schema: "public", Table: "t", Constraint: "t_pkey"}
}

// TestOneErrorPath pins how any error reaches the wire: the first error in
// the chain with a SQLSTATE decides, with its own text and fields; context
// wrapped around it stays out of the message; an error without a SQLSTATE
// is XX000 with its full text.
func TestOneErrorPath(t *testing.T) {
	sentinel := errors.New("table definition is not a DuckLake shape")
	wire := &Error{Code: pgcode.DuplicateTable, Message: "relation \"t\" already exists"}
	tests := []struct {
		name string
		err  error
		want Error
	}{
		{"pgwire error", wire, *wire},
		{"wrapped pgwire error", fmt.Errorf("ddl: %w", wire), *wire},
		{"described error wrapped in context", fmt.Errorf("commit: %w", &described{"duplicate key"}),
			Error{Code: pgcode.UniqueViolation, Message: "duplicate key", Detail: "Key (id)=(1) already exists.",
				Schema: "public", Table: "t", Constraint: "t_pkey"}},
		{"coded sentinel wrap", pgcode.Errorf(pgcode.FeatureNotSupported, "%w: table %q", sentinel, "x"),
			Error{Code: pgcode.FeatureNotSupported, Message: `table definition is not a DuckLake shape: table "x"`}},
		{"outermost code wins", fmt.Errorf("a: %w", pgcode.Errorf(pgcode.DataCorrupted, "b: %w", &described{"inner"})),
			Error{Code: pgcode.DataCorrupted, Message: "b: inner"}},
		{"no code", fmt.Errorf("load: %w", errors.New("disk on fire")),
			Error{Code: pgcode.InternalError, Message: "load: disk on fire"}},
		{"canceled", fmt.Errorf("scan: %w", context.Canceled), *errCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AsError(tt.err)
			got.Cause = nil
			if *got != tt.want {
				t.Fatalf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
	if !errors.Is(pgcode.Errorf(pgcode.FeatureNotSupported, "%w: x", sentinel), sentinel) {
		t.Fatal("a coded error hides the sentinel it wraps from errors.Is")
	}
}
