package sql

import (
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// A statement's work is counted as it goes, so that no statement can grow
// memory without limit or outlive its context: every row the executor
// materializes (a join's output, a projection, a set operation, VALUES) is
// charged to the statement's memory budget (Executor.StatementMem), and
// every step of a loop over rows or row pairs counts towards the next look
// at the statement's context — cancelled by the client's CancelRequest, the
// statement timeout, the client going away or the server shutting down.
//
// The executor materializes each stage of a statement, so a budget is what
// stands between a cross join of two large tables (n×m rows) and the
// process's memory; PostgreSQL streams such a join in constant memory, which
// moraine cannot, and refuses with 53200 instead.

// DefaultStatementMem is the default memory budget of one statement.
const DefaultStatementMem = 2 << 30

// largeStatement is the materialized size from which a statement's end
// hands freed memory back to the operating system (pgwire.ReleaseMemory).
const largeStatement = 256 << 20

// rowBytes estimates the memory a materialized row holds: its slice of
// values. Strings are not counted: rows copy values, and a value's string
// is shared with the row it came from.
func rowBytes(row []datum.Value) int64 { return 24 + 40*int64(len(row)) }

// work is one statement's account.
type work struct {
	bytes int64  // materialized rows so far
	steps uint32 // loop steps since the statement began
}

// checkEvery is how many steps pass between looks at the context: a look
// costs an atomic load and a select, a step a few nanoseconds to a few
// microseconds of evaluation.
const checkEvery = 1024

// step counts one unit of work and, every checkEvery steps, reports the
// statement's context error if it has ended.
func (x *exec) step() error {
	x.work.steps++
	if x.work.steps%checkEvery == 0 && x.ctx != nil {
		return x.ctx.Err()
	}
	return nil
}

// interrupt reports the statement's context error if it has ended: for
// long computations inside one step (a LIKE search over a long string).
func (x *exec) interrupt() error {
	if x.ctx == nil {
		return nil
	}
	return x.ctx.Err()
}

// hold charges a row the statement materializes, and steps.
func (x *exec) hold(row []datum.Value) error {
	x.work.bytes += rowBytes(row)
	if lim := x.statementMem(); lim > 0 && x.work.bytes > lim {
		return &pgwire.Error{Code: pgcode.OutOfMemory, Message: "out of memory",
			Detail: fmt.Sprintf("The statement's rows need more than the %d MiB a statement may hold (setting statement-mem-mib).", lim>>20)}
	}
	return x.step()
}

func (x *exec) statementMem() int64 {
	if x.s == nil || x.s.ex == nil {
		return DefaultStatementMem
	}
	return x.s.ex.StatementMem
}
