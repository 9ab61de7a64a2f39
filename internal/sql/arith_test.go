package sql

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/pgwire"
)

func isRangeErr(err error) bool {
	_, ok := wireError(err)
	return ok && pgwire.AsError(err).Code == pgcode.NumericValueOutOfRange
}

// TestIntArith: integer + and - against exact arithmetic — the result
// when it fits the wider operand's type, 22003 when it does not; never a
// wrapped value.
func TestIntArith(t *testing.T) {
	types := []datum.Type{datum.Int2, datum.Int4, datum.Int8}
	bounds := map[datum.Type][2]int64{
		datum.Int2: {math.MinInt16, math.MaxInt16},
		datum.Int4: {math.MinInt32, math.MaxInt32},
		datum.Int8: {math.MinInt64, math.MaxInt64},
	}
	operand := func(t *rapid.T, label string) tv {
		typ := rapid.SampledFrom(types).Draw(t, label+" type")
		b := bounds[typ]
		// Edges are where wrapping happens; draw them often.
		v := rapid.OneOf(rapid.SampledFrom([]int64{b[0], b[0] + 1, b[1] - 1, b[1], 0, -1, 1}), rapid.Int64Range(b[0], b[1])).Draw(t, label)
		return tv{datum.IntValue(v), typ}
	}
	rapid.Check(t, func(t *rapid.T) {
		l, r := operand(t, "left"), operand(t, "right")
		op := rapid.SampledFrom([]string{"+", "-"}).Draw(t, "op")
		exact := new(big.Int)
		if op == "+" {
			exact.Add(big.NewInt(l.v.I), big.NewInt(r.v.I))
		} else {
			exact.Sub(big.NewInt(l.v.I), big.NewInt(r.v.I))
		}
		want := widerInt(l.t, r.t)
		b := bounds[want]
		fits := exact.IsInt64() && exact.Int64() >= b[0] && exact.Int64() <= b[1]
		got, err := intArith(op, l, r)
		switch {
		case fits && err != nil:
			t.Fatalf("%d %s %d: %v, want %s", l.v.I, op, r.v.I, err, exact)
		case fits && (got.v.I != exact.Int64() || got.t != want):
			t.Fatalf("%d %s %d = %d (%v), want %s (%v)", l.v.I, op, r.v.I, got.v.I, got.t, exact, want)
		case !fits && !isRangeErr(err):
			t.Fatalf("%d %s %d (%v): %v %v, want 22003", l.v.I, op, r.v.I, want, got.v.I, err)
		}
	})
}

// wireError is the error a client is sent for err, and whether err carries
// a SQLSTATE at all (an error without one is a bug the tests report as
// untyped).
func wireError(err error) (*pgwire.Error, bool) {
	var coded pgcode.Error
	if !errors.As(err, &coded) {
		return nil, false
	}
	return pgwire.AsError(err), true
}
