package sql

import (
	"context"
	"errors"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// promote runs pg_promote(wait boolean DEFAULT true, wait_seconds integer
// DEFAULT 60) as PostgreSQL does: only a standby can be promoted; with
// wait it returns true once the server accepts writes, or false (with a
// warning in PostgreSQL, here the log) if that takes longer than
// wait_seconds; without wait it starts the promotion and returns true.
// A promotion that fails is an error naming why; the server stays a
// standby.
func (x *exec) promote(args []tv) (tv, error) {
	if !x.s.ex.InStandby() || x.s.ex.Promote == nil {
		return tv{}, &pgwire.Error{Code: pgcode.ObjectNotInPrerequisiteState, Message: "recovery is not in progress",
			Hint: "Recovery control functions can only be executed during recovery."}
	}
	wait, seconds := true, int64(60)
	if len(args) > 2 {
		return tv{}, errf(pgcode.UndefinedFunction, "function pg_promote takes at most 2 arguments")
	}
	for _, a := range args {
		if a.v.IsNull() {
			return tv{datum.Null, datum.Bool}, nil // pg_promote is strict
		}
	}
	if len(args) > 0 {
		v, err := coerce(args[0], datum.Bool)
		if err != nil {
			return tv{}, err
		}
		wait = v.I != 0
	}
	if len(args) > 1 {
		v, err := coerce(args[1], datum.Int4)
		if err != nil {
			return tv{}, err
		}
		seconds = v.I
		if seconds <= 0 {
			return tv{}, errf(pgcode.InvalidParameterValue, `"wait_seconds" must not be negative or zero`)
		}
	}
	promote := x.s.ex.Promote
	if !wait {
		go promote(context.Background())
		return tv{datum.BoolValue(true), datum.Bool}, nil
	}
	ctx, cancel := context.WithTimeout(x.ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	err := promote(ctx)
	if errors.Is(err, context.DeadlineExceeded) && x.ctx.Err() == nil {
		return tv{datum.BoolValue(false), datum.Bool}, nil
	}
	if err != nil {
		return tv{}, err
	}
	return tv{datum.BoolValue(true), datum.Bool}, nil
}
