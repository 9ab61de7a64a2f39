package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestVerifyCommand: moraine verify on a live server's store (as a
// reader, while the writer keeps it open) says "consistent" and exits 0;
// after the writer hard-deletes a file that a stats row still names
// without scheduling it, it prints the violations and exits 1; an empty
// store and bad usage exit 2.
func TestVerifyCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, conn := serveLake(ctx, t)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := verifyMain(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run("--store", url); code != 0 || strings.TrimSpace(out) != "consistent" {
		t.Fatalf("fresh catalog: exit %d:\n%s", code, out)
	}
	// A stats row for file 7, which has no data-file row and is not scheduled.
	if _, err := conn.Exec(ctx, `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;
		INSERT INTO "public".ducklake_file_column_stats VALUES (7, 1, 1, 8, 1, 0, '1', '1', NULL, NULL);
		COMMIT;`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	code, out := run("--store", url)
	if code != 1 || !strings.Contains(out, "lake.public: dangling-file-stats: ducklake_file_column_stats row names data file 7") ||
		!strings.Contains(out, "lake.public: unscheduled-file: file 7") || !strings.Contains(out, "2 violation(s)") {
		t.Fatalf("broken catalog: exit %d:\n%s", code, out)
	}
	if code, out := run("--store", "mem://"); code != 2 || !strings.Contains(out, "the store is empty") {
		t.Fatalf("empty store: exit %d: %s", code, out)
	}
	if code, _ := run("extra"); code != 2 {
		t.Fatalf("stray argument: exit %d", code)
	}
}
