package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moraine-db/moraine/internal/replay"
)

// replayMain is `moraine replay [flags] <transcript.jsonl>…`. Transcripts run
// one after another, in the order given, against the same server (so a
// transcript that continues another's lake, like s07 after s01, follows it
// on the command line). One line per transcript, then "N passed, M failed".
// Exit status 0 only if all passed; 2 on usage errors (-h included).
func replayMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("replay [flags] <transcript.jsonl>…", stdout, stderr)
	addr := fs.String("addr", replay.DefaultAddr, "server: host:port, a conninfo (host=… port=…) or a postgres:// URL")
	verbose := fs.Bool("v", false, "show the first differing message with context")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for each expected server message")
	recreate := fs.Bool("recreate", true, "drop and create each transcript's databases before their first use, through the admin database (-addr's, or postgres); false replays into databases as they are")
	settle := fs.Duration("settle", 20*time.Millisecond, "longest wait for another connection's answer before sending a racing message")
	if code, ok := fs.parse(args, anyArgs); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "moraine replay: name at least one transcript")
		fs.Usage()
		return 2
	}
	opts := replay.Options{Addr: *addr, Timeout: *timeout, Settle: *settle}
	passed, failed := 0, 0
	var fresh *replay.Fresh
	if *recreate {
		admin, err := replay.AdminConninfo(*addr)
		if err != nil {
			fmt.Fprintf(stderr, "moraine replay: %v\n", err)
			return 2
		}
		fresh = &replay.Fresh{Admin: admin}
	}
	for _, path := range fs.Args() {
		tr, err := replay.Load(path)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %v\n", path, err)
			failed++
			continue
		}
		if fresh != nil {
			if err := fresh.Prepare(ctx, tr); err != nil {
				fmt.Fprintf(stdout, "FAIL %s: %v\n", tr.Name, err)
				failed++
				continue
			}
		}
		res := replay.Replay(ctx, tr, opts)
		if res.Passed() {
			passed++
			fmt.Fprintf(stdout, "PASS %s (%d server messages, %v)\n", tr.Name, res.Compared, res.Elapsed.Round(time.Millisecond))
			continue
		}
		failed++
		fmt.Fprintf(stdout, "FAIL %s: %v (after %d matching server messages)\n", tr.Name, res.Err, res.Compared)
		if *verbose {
			fmt.Fprint(stdout, replay.Explain(res.Err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
