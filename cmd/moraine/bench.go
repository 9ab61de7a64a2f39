package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sort"
)

// benchSubcommands holds the `moraine bench <name>` benchmarks. Each lives in
// its own bench_<name>.go file and adds itself with registerBench from init.
var benchSubcommands = map[string]func(ctx context.Context, args []string) int{}

// registerBench adds a `moraine bench <name>` subcommand. fn receives the
// arguments after the name and returns the exit code.
func registerBench(name string, fn func(ctx context.Context, args []string) int) {
	if _, dup := benchSubcommands[name]; dup {
		panic("moraine: duplicate bench subcommand " + name)
	}
	benchSubcommands[name] = fn
}

func init() {
	register(command{name: "bench", summary: "run a benchmark (moraine bench <name> [flags])", run: runBench})
}

func benchUsage() {
	names := make([]string, 0, len(benchSubcommands))
	for n := range benchSubcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: moraine bench <name> [flags]\n\nbenchmarks:")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %s\n", n)
	}
}

func runBench(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		benchUsage()
		return 2
	}
	fn, ok := benchSubcommands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "moraine bench: unknown benchmark %q\n", args[0])
		benchUsage()
		return 2
	}
	return fn(ctx, args[1:])
}

// startProfiles starts a CPU profile and an execution trace when their
// paths are set; the returned func stops both and closes the files.
func startProfiles(cpuPath, tracePath string) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return stop, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("--cpuprofile: %w", err)
		}
		closers = append(closers, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			stop()
			return func() {}, fmt.Errorf("--trace: %w", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, fmt.Errorf("--trace: %w", err)
		}
		closers = append(closers, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}

// processExe is the executable that --process runs as a child
// `moraine serve`: this one. It is "" when process is false (moraine runs
// in-process).
func processExe(process bool) (string, error) {
	if !process {
		return "", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("--process: %w", err)
	}
	return exe, nil
}
