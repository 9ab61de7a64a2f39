package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is moraine's version: the module version the binary was built
// from, else the source revision, else "devel".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel-" + rev
}

// versionMain is `moraine version` (and `moraine --version`).
func versionMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr)
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	fmt.Fprintf(stdout, "moraine %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
