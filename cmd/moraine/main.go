// Command moraine is the DuckLake catalog server and its operator tools.
//
// Every subcommand is one entry of the commands table below, with its body
// in a file of its own; each parses its flags with newFlags, so that every
// command answers -h and --help the same way (usage on standard output,
// exit 0) and a bad flag the same way (the error and usage on standard
// error, exit 2).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// mainFunc is a subcommand's body with its output streams as arguments, so
// that tests run it in-process; it returns the exit code.
type mainFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// command is one `moraine <name>`.
type command struct {
	name, summary string
	main          mainFunc
}

// commands is every subcommand, in the order `moraine help` lists them.
var commands = []command{
	{"serve", "run the catalog server (PostgreSQL wire protocol over the configured store)", serveMain},
	{"verify", "check every persisted DuckLake catalog for dangling files, dropped tombstones, unscheduled removals, snapshot gaps and row-id overlap", verifyMain},
	{"inspect", "report a store: head snapshots, tables with row counts, files, resident size, objects", inspectMain},
	{"snapshots", "list a store's DuckLake snapshots with their changes", snapshotsMain},
	{"erasure", "report how long deleted rows of a table stay recoverable", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return erasureMain(ctx, args, time.Now(), stdout, stderr)
	}},
	{"checkpoint", "pin a consistent point of the store for backup; list and delete checkpoints", checkpointMain},
	{"backup", "copy a checkpoint of the store to another, empty store", backupMain},
	{"restore", "copy a backup (or a checkpoint) into an empty store to serve it", restoreMain},
	{"gc", "delete store objects no manifest reaches; safe beside a live server", gcMain},
	{"repair", "repair a store the catalog loader refuses (drop-table)", repairMain},
	{"user", "manage the users file (user add; the password on standard input)", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return userMain(args, os.Stdin, stdout, stderr)
	}},
	{"import", "copy a DuckLake catalog from PostgreSQL into a new database of a running server", importMain},
	{"export", "copy a database's DuckLake catalog into an empty PostgreSQL database", exportMain},
	{"createdb", "create a database on a running server (as PostgreSQL's createdb)", createdbMain},
	{"dropdb", "drop a database on a running server (as PostgreSQL's dropdb)", dropdbMain},
	{"mergedb", "merge a writable branch into its parent on a running server (ALTER DATABASE … MERGE_INTO …)", mergedbMain},
	{"replay", "replay captured client conversations against a server and compare the answers", replayMain},
	{"bench", "run a benchmark beside PostgreSQL (bench commits|catalog|store)", benchMain},
	{"version", "print moraine's version", versionMain},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: moraine <command> [flags]   (moraine <command> --help for its flags)\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches one command line; it is main without the process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "--version", "-version":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.main(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "moraine: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}
