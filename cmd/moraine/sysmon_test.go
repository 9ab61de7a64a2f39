package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/testenv"
)

func TestSysmonAwakeEnv(t *testing.T) {
	base := []string{"HOME=/root", "PATH=/bin"}
	for _, tc := range []struct {
		godebug string // "-": no GODEBUG variable
		want    string // the GODEBUG after; "" when nothing changes
	}{
		{"-", sysmonAwakeSetting},
		{"", sysmonAwakeSetting},
		{"gctrace=1", "gctrace=1," + sysmonAwakeSetting},
		{"madvdontneed=1,gctrace=1", "madvdontneed=1,gctrace=1," + sysmonAwakeSetting},
		{"schedtrace=1000", ""},         // the operator's trace wins
		{"gctrace=1, schedtrace=0", ""}, // an explicit 0 too
		{sysmonAwakeSetting, ""},        // after the restart
		{"schedtracex=1", "schedtracex=1," + sysmonAwakeSetting},
	} {
		env := slices.Clone(base)
		if tc.godebug != "-" {
			env = append(env, "GODEBUG="+tc.godebug)
		}
		got, restart := sysmonAwakeEnv(env)
		if restart != (tc.want != "") {
			t.Errorf("GODEBUG %q: restart %v", tc.godebug, restart)
			continue
		}
		if !restart {
			if !slices.Equal(got, env) {
				t.Errorf("GODEBUG %q: env changed to %q", tc.godebug, got)
			}
			continue
		}
		if want := append(slices.Clone(base), "GODEBUG="+tc.want); !slices.Equal(got, want) {
			t.Errorf("GODEBUG %q: env %q, want %q", tc.godebug, got, want)
		}
	}
}

// TestServeKeepsSysmonAwake: `moraine serve` restarts itself in place with
// the setting in GODEBUG (same pid, still serving, exits cleanly), leaves an
// operator's schedtrace alone, and does nothing with --sysmon-awake=false.
func TestServeKeepsSysmonAwake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		env     string // added to the child's environment
		args    []string
		godebug string // the GODEBUG the serving process must have; "" none
	}{
		{"default", "", nil, sysmonAwakeSetting},
		{"operator's trace", "GODEBUG=gctrace=0,schedtrace=600000", nil, "gctrace=0,schedtrace=600000"},
		{"off", "", []string{"--sysmon-awake=false"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			cmd, out := moraineCmd(ctx, append([]string{"serve", "--store", "file://" + t.TempDir(), "--listen", addr}, tc.args...)...)
			cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "GODEBUG=") })
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			waitServing(t, ctx, addr, out)
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, e := range strings.Split(string(environ), "\x00") {
				if v, ok := strings.CutPrefix(e, "GODEBUG="); ok {
					got = v
				}
			}
			if got != tc.godebug {
				t.Errorf("serving process %d has GODEBUG %q, want %q\n%s", cmd.Process.Pid, got, tc.godebug, out)
			}
			cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); exitCode(err) != 0 {
				t.Errorf("after SIGINT: exit %d\n%s", exitCode(err), out)
			}
		})
	}
}
