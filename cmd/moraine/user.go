package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moraine-db/moraine/internal/server"
)

// userMain is `moraine user add`: the password is read from the first line
// of stdin (never from the command line, where ps would show it), and only
// its SCRAM-SHA-256 verifier is stored.
func userMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const synopsis = "user add --users-file FILE NAME   (the password on the first line of standard input)"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, "usage: moraine "+synopsis)
		return 0
	}
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprintln(stderr, "usage: moraine "+synopsis)
		return 2
	}
	fs := newFlags(synopsis, stdout, stderr)
	file := fs.String("users-file", os.Getenv("MORAINE_USERS_FILE"), "users `FILE` to create or update [env MORAINE_USERS_FILE]")
	fs.Bool("password-stdin", true, "read the password from the first line of stdin (the only way; accepted for clarity)")
	if code, ok := fs.parse(args[1:], 1); !ok {
		return code
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
