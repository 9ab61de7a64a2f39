package fault

import (
	"flag"
	"fmt"
	"strconv"
)

// Flags binds fault-injection settings to command-line flags, for commands
// that can run against a deliberately slow or unreliable store
// (moraine serve/bench --put-latency=50ms). Register with NewFlags, parse,
// then call Config.
//
// Flags registered (prefix "" shown; every op is one of put, put-if-absent,
// get, get-range, list, delete, stat):
//
//	--fault-seed=N              random seed
//	--latency=D | lo-hi         latency of every operation
//	--error-rate=P              injected error probability of every operation
//	--ambiguous-rate=P          ambiguous-write probability of every write
//	--<op>-latency, --<op>-error-rate, --<op>-ambiguous-rate
//	                            the same for one operation, overriding the above
type Flags struct {
	seed    uint64
	def     ruleFlags
	ops     [numOps]ruleFlags
	present map[string]bool
}

type ruleFlags struct {
	latency                  latencyValue
	errorRate, ambiguousRate rateValue
}

// NewFlags registers the flags on fs, each name prefixed by prefix (which
// may be empty, or e.g. "store-").
func NewFlags(fs *flag.FlagSet, prefix string) *Flags {
	f := &Flags{}
	fs.Func(prefix+"fault-seed", "seed for injected faults", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		f.seed = v
		return err
	})
	bind := func(r *ruleFlags, name, what string) {
		fs.Var(&r.latency, prefix+name+"latency", "added latency of "+what+": a duration (50ms) or a uniform range (10ms-80ms)")
		fs.Var(&r.errorRate, prefix+name+"error-rate", "probability in [0,1] that "+what+" fails with an injected error")
		fs.Var(&r.ambiguousRate, prefix+name+"ambiguous-rate", "probability in [0,1] that a write among "+what+" lands but reports failure")
	}
	bind(&f.def, "", "every object store operation")
	for op := range numOps {
		bind(&f.ops[op], op.String()+"-", op.String()+" operations")
	}
	return f
}

// Config returns the configuration the flags describe, and whether it
// injects anything at all (if not, callers can skip the wrapper).
func (f *Flags) Config() (Config, bool) {
	c := Config{Seed: f.seed, Default: f.def.rule(Rule{})}
	active := f.def.set()
	for op := range numOps {
		if f.ops[op].set() {
			if c.Ops == nil {
				c.Ops = map[Op]Rule{}
			}
			c.Ops[op] = f.ops[op].rule(c.Default)
			active = true
		}
	}
	return c, active
}

func (r *ruleFlags) set() bool { return r.latency.set || r.errorRate.set || r.ambiguousRate.set }

// rule overlays the flags that were given on base.
func (r *ruleFlags) rule(base Rule) Rule {
	if r.latency.set {
		base.Latency = r.latency.l
	}
	if r.errorRate.set {
		base.ErrorRate = r.errorRate.p
	}
	if r.ambiguousRate.set {
		base.AmbiguousRate = r.ambiguousRate.p
	}
	return base
}

type latencyValue struct {
	l   Latency
	set bool
}

func (v *latencyValue) String() string { return v.l.String() }

func (v *latencyValue) Set(s string) error {
	l, err := ParseLatency(s)
	if err != nil {
		return err
	}
	v.l, v.set = l, true
	return nil
}

type rateValue struct {
	p   float64
	set bool
}

func (v *rateValue) String() string { return strconv.FormatFloat(v.p, 'g', -1, 64) }

func (v *rateValue) Set(s string) error {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p < 0 || p > 1 {
		return fmt.Errorf("rate %q: want a number in [0, 1]", s)
	}
	v.p, v.set = p, true
	return nil
}
