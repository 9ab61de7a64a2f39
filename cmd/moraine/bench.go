package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// benchmarks are the `moraine bench <name>` subcommands.
var benchmarks = []command{
	{"replay", "the real client's captured conversations, replayed: server CPU per commit beside PostgreSQL", benchReplayMain},
	{"commits", "DuckLake's data-file commits at 1, 4, 16 writers, beside PostgreSQL", benchCommitsMain},
	{"catalog", "DuckLake's attach and first-query reads of a large catalog, beside PostgreSQL", benchCatalogMain},
	{"store", "durable commit latency on an object store, beside PostgreSQL on local disk", benchStoreMain},
	{"replica", "read replicas following a busy writer: lag, CPU per applied commit, start-up, at catalog sizes", benchReplicaMain},
	{"recorded", "serve captured conversations with PostgreSQL's recorded answers (bench replay's floor)", benchRecordedMain},
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: moraine bench <name> [flags]   (moraine bench <name> --help for its flags)\n\nbenchmarks:")
	for _, b := range benchmarks {
		fmt.Fprintf(w, "  %-8s %s\n", b.name, b.summary)
	}
}

// benchMain is `moraine bench <name> [flags]`.
func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		benchUsage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		benchUsage(stdout)
		return 0
	}
	for _, b := range benchmarks {
		if b.name == args[0] {
			return b.main(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "moraine bench: unknown benchmark %q\n", args[0])
	benchUsage(stderr)
	return 2
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
