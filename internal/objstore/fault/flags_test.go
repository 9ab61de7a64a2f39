package fault_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moraine-db/moraine/internal/objstore/fault"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		want   fault.Config
		active bool
		bad    bool
	}{
		{name: "none", args: nil, want: fault.Config{}},
		{
			name:   "put latency only",
			args:   []string{"--store-put-latency=50ms"},
			want:   fault.Config{Ops: map[fault.Op]fault.Rule{fault.OpPut: {Latency: fault.Fixed(50 * time.Millisecond)}}},
			active: true,
		},
		{
			name: "defaults and an override",
			args: []string{"--store-fault-seed=9", "--store-latency=1ms-3ms", "--store-error-rate=0.1",
				"--store-put-if-absent-ambiguous-rate=0.5", "--store-get-error-rate=0"},
			want: fault.Config{
				Seed:    9,
				Default: fault.Rule{ErrorRate: 0.1, Latency: fault.Uniform(time.Millisecond, 3*time.Millisecond)},
				Ops: map[fault.Op]fault.Rule{
					fault.OpPutIfAbsent: {ErrorRate: 0.1, AmbiguousRate: 0.5, Latency: fault.Uniform(time.Millisecond, 3*time.Millisecond)},
					fault.OpGet:         {ErrorRate: 0, Latency: fault.Uniform(time.Millisecond, 3*time.Millisecond)},
				},
			},
			active: true,
		},
		{name: "rate out of range", args: []string{"--store-error-rate=1.5"}, bad: true},
		{name: "bad latency", args: []string{"--store-list-latency=soon"}, bad: true},
		{name: "bad seed", args: []string{"--store-fault-seed=-1"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := fault.NewFlags(fs, "store-")
			err := fs.Parse(tc.args)
			if tc.bad {
				if err == nil {
					t.Fatal("bad flags accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, active := f.Config()
			if active != tc.active {
				t.Fatalf("active = %v, want %v", active, tc.active)
			}
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b func(fault.Call) fault.Action) bool { return a == nil && b == nil })); d != "" {
				t.Fatalf("Config diff (-want +got):\n%s", d)
			}
		})
	}
}
