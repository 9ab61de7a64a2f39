package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	register(command{
		name:    "user",
		summary: "manage the users file (user add --users-file F NAME; password on stdin)",
		run:     runUser,
	})
}

func runUser(_ context.Context, args []string) int {
	return userMain(args, os.Stdin, os.Stderr)
}

// userMain is `moraine user add`: the password is read from the first line
// of stdin (never from the command line, where ps would show it), and only
// its SCRAM-SHA-256 verifier is stored.
func userMain(args []string, stdin io.Reader, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprintln(stderr, "usage: moraine user add --users-file FILE [--password-stdin] NAME  (password on stdin)")
		return 2
	}
	fs := flag.NewFlagSet("moraine user add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("users-file", os.Getenv("MORAINE_USERS_FILE"), "users file to create or update [env MORAINE_USERS_FILE]")
	fs.Bool("password-stdin", true, "read the password from the first line of stdin (the only way; accepted for clarity)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *file == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "moraine user add: need --users-file and exactly one NAME")
		return 2
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(stderr, "moraine user add: reading the password:", err)
		return 1
	}
	password := strings.TrimRight(line, "\r\n")
	if err := server.AddUser(*file, fs.Arg(0), password); err != nil {
		fmt.Fprintln(stderr, "moraine user add:", err)
		if errors.Is(err, server.ErrBadUser) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stderr, "user %s written to %s (SCRAM-SHA-256 verifier)\n", fs.Arg(0), *file)
	return 0
}
