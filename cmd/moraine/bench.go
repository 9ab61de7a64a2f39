package main

import (
	"context"
	"fmt"
	"os"
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
