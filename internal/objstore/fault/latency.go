package fault

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Latency is a delay distribution: uniform over [Min, Max]. Min == Max is a
// fixed delay; the zero value is no delay.
type Latency struct {
	Min, Max time.Duration
}

// Fixed returns a constant delay.
func Fixed(d time.Duration) Latency { return Latency{Min: d, Max: d} }

// Uniform returns a delay drawn uniformly from [lo, hi].
func Uniform(lo, hi time.Duration) Latency { return Latency{Min: lo, Max: hi} }

// ParseLatency parses the flag syntax: "" or "0" (none), a Go duration
// ("50ms", fixed), or "lo-hi" ("10ms-80ms", uniform), so that a command can
// offer --put-latency=50ms.
func ParseLatency(s string) (Latency, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return Latency{}, nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	min, err := time.ParseDuration(lo)
	if err != nil {
		return Latency{}, fmt.Errorf("fault: latency %q: %w", s, err)
	}
	max := min
	if isRange {
		if max, err = time.ParseDuration(hi); err != nil {
			return Latency{}, fmt.Errorf("fault: latency %q: %w", s, err)
		}
	}
	l := Latency{Min: min, Max: max}
	if err := l.Validate(); err != nil {
		return Latency{}, fmt.Errorf("fault: latency %q: %w", s, err)
	}
	return l, nil
}

// Validate rejects negative and inverted ranges.
func (l Latency) Validate() error {
	if l.Min < 0 || l.Max < l.Min {
		return fmt.Errorf("invalid latency range [%v, %v]", l.Min, l.Max)
	}
	return nil
}

// String formats l in the syntax ParseLatency reads.
func (l Latency) String() string {
	switch {
	case l.Min == 0 && l.Max == 0:
		return "0"
	case l.Min == l.Max:
		return l.Min.String()
	}
	return l.Min.String() + "-" + l.Max.String()
}

// draw returns one delay; an invalid distribution yields no delay.
func (l Latency) draw(rng *rand.Rand) time.Duration {
	if l.Validate() != nil || l.Max == 0 {
		return 0
	}
	if l.Min == l.Max {
		return l.Min
	}
	return l.Min + time.Duration(rng.Int64N(int64(l.Max-l.Min)+1))
}
