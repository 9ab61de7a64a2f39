package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: `moraine --help`, `moraine help` and every command's --help
// (and every benchmark's) print a usage on standard output and exit 0,
// with nothing on standard error; `moraine` alone, an unknown command and
// a bad flag print a usage on standard error and exit 2.
func TestHelp(t *testing.T) {
	var cmds [][]string
	for _, c := range commands {
		cmds = append(cmds, []string{c.name, "--help"}, []string{c.name, "-h"})
	}
	for _, b := range benchmarks {
		cmds = append(cmds, []string{"bench", b.name, "--help"})
	}
	cmds = append(cmds, []string{"--help"}, []string{"help"}, []string{"-h"}, []string{"bench", "--help"}, []string{"repair", "drop-table", "--help"}, []string{"user", "add", "--help"})
	for _, args := range cmds {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "usage: moraine") || errb.Len() != 0 {
			t.Errorf("moraine %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
	for _, args := range [][]string{nil, {"no-such-command"}, {"verify", "--no-such-flag"}, {"verify", "extra"}, {"bench"}, {"bench", "nope"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: moraine") || out.Len() != 0 {
			t.Errorf("moraine %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
}

// TestVersion: `moraine version` and `moraine --version` name the build.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if code := run(args, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "moraine ") {
			t.Errorf("moraine %s: exit %d, %q", args[0], code, out.String())
		}
	}
}

// TestReadOnlyToolsCreateNothing: a read-only tool pointed at a store that
// does not exist says so and creates nothing; so does serve with an
// explicit store, unless asked to create it; a plain path gets a hint.
func TestReadOnlyToolsCreateNothing(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no", "such", "store")
	for _, tool := range []struct {
		name string
		main mainFunc
	}{{"verify", verifyMain}, {"inspect", inspectMain}, {"snapshots", snapshotsMain}, {"gc", gcMain}} {
		var errb bytes.Buffer
		if code := tool.main(ctx, []string{"--store", "file://" + missing}, io.Discard, &errb); code == 0 || !strings.Contains(errb.String(), "no such file or directory") {
			t.Errorf("%s of a missing store: exit %d: %s", tool.name, code, errb.String())
		}
	}
	var errb bytes.Buffer
	if code := serveMain(ctx, []string{"--store", "file://" + missing, "--listen", "127.0.0.1:0", "--sysmon-awake=false"}, io.Discard, &errb); code == 0 || !strings.Contains(errb.String(), "no such file or directory") {
		t.Errorf("serve of an explicit missing store: exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("a tool created %s", filepath.Dir(missing))
	}
	errb.Reset()
	if code := verifyMain(ctx, []string{"--store", "./data"}, io.Discard, &errb); code == 0 || !strings.Contains(errb.String(), "a directory is a file:// URL, e.g. file://./data") {
		t.Errorf("verify of a plain path: exit %d: %s", code, errb.String())
	}
}
