package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/moraine-db/moraine/internal/server"
)

// versionMain is `moraine version` (and `moraine --version`).
func versionMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr)
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	fmt.Fprintf(stdout, "moraine %s (%s, %s/%s)\n", server.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
