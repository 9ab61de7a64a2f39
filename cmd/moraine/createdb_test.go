package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// TestCreatedbDropdb: moraine createdb and dropdb, and PostgreSQL's own
// createdb and dropdb, create and drop databases on a running server.
func TestCreatedbDropdb(t *testing.T) {
	ctx := context.Background()
	r := testserver.Start(t, "file://"+t.TempDir())
	defer r.Stop(t)
	datnames := func() []string {
		var out bytes.Buffer
		c := exec.Command("psql", "-X", "-At", r.Conninfo("postgres"), "-c", "SELECT datname FROM pg_database ORDER BY 1")
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("psql: %v\n%s", err, out.String())
		}
		return strings.Fields(out.String())
	}
	run := func(main func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := main(ctx, append([]string{"-addr", r.Addr}, args...), &out, &errb)
		return code, errb.String()
	}
	if code, msg := run(createdbMain, "d1"); code != 0 {
		t.Fatalf("createdb d1: exit %d: %s", code, msg)
	}
	if code, msg := run(createdbMain, "d1"); code != 1 || !strings.Contains(msg, `database "d1" already exists`) {
		t.Fatalf("createdb d1 again: exit %d: %s", code, msg)
	}
	if code, msg := run(dropdbMain, "-if-exists", "nosuch"); code != 0 || !strings.Contains(msg, `database "nosuch" does not exist, skipping`) {
		t.Fatalf("dropdb -if-exists nosuch: exit %d: %s", code, msg)
	}
	host, port, _ := net.SplitHostPort(r.Addr)
	for _, argv := range [][]string{
		{"createdb", "-h", host, "-p", port, "-U", "moraine", "d2"},
		{"dropdb", "-h", host, "-p", port, "-U", "moraine", "--force", "d1"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	if got := strings.Join(datnames(), " "); got != "d2 lake postgres" {
		t.Fatalf("databases after PostgreSQL's createdb d2 and dropdb d1: %s", got)
	}
	// Forks: moraine createdb -template, PostgreSQL's createdb -T; psql's
	// \l+ describes each branch.
	if code, msg := run(createdbMain, "-template", "d2", "b1"); code != 0 {
		t.Fatalf("createdb -template d2 b1: exit %d: %s", code, msg)
	}
	if code, msg := run(createdbMain, "-template", "d2", "-location", "/x/", "b3"); code != 1 || !strings.Contains(msg, "holds 0 DuckLake catalogs") {
		t.Fatalf("createdb -template d2 -location /x/ b3 (d2 holds no lake): exit %d: %s", code, msg)
	}
	if out, err := exec.Command("createdb", "-h", host, "-p", port, "-U", "moraine", "-T", "d2", "b2").CombinedOutput(); err != nil {
		t.Fatalf("createdb -T d2 b2: %v\n%s", err, out)
	}
	var list bytes.Buffer
	c := exec.Command("psql", "-X", "-At", r.Conninfo("postgres"), "-c", `\l+`)
	c.Stdout, c.Stderr = &list, &list
	if err := c.Run(); err != nil {
		t.Fatalf("psql \\l+: %v\n%s", err, list.String())
	}
	for _, b := range []string{"b1", "b2"} {
		found := false
		for _, line := range strings.Split(list.String(), "\n") {
			found = found || strings.HasPrefix(line, b+"|") && strings.HasSuffix(line, "|branch of d2 (read-only)")
		}
		if !found {
			t.Fatalf("\\l+ does not describe %s as a branch of d2:\n%s", b, list.String())
		}
	}
	// mergedb runs ALTER DATABASE … MERGE_INTO; a read-only branch has
	// nothing of its own to merge.
	if code, msg := run(mergedbMain, "-into", "d2", "b1"); code != 1 || !strings.Contains(msg, `database "b1" is not a writable branch`) {
		t.Fatalf("mergedb -into d2 b1 (read-only): exit %d: %s", code, msg)
	}
	if code, msg := run(mergedbMain, "b1"); code != 2 || !strings.Contains(msg, "-into") {
		t.Fatalf("mergedb b1 without -into: exit %d: %s", code, msg)
	}
	if code, msg := run(dropdbMain, "-force", "d2"); code != 1 || !strings.Contains(msg, "other objects depend on it") {
		t.Fatalf("dropdb d2 under its branches: exit %d: %s", code, msg)
	}
	for _, b := range []string{"b1", "b2"} {
		if code, msg := run(dropdbMain, b); code != 0 {
			t.Fatalf("dropdb %s: exit %d: %s", b, code, msg)
		}
	}
	if code, msg := run(dropdbMain, "-force", "d2"); code != 0 {
		t.Fatalf("dropdb d2: exit %d: %s", code, msg)
	}
	if got := strings.Join(datnames(), " "); got != "lake postgres" {
		t.Fatalf("databases after dropdb d2: %s", got)
	}
}
