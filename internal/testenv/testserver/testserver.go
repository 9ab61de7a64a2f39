// Package testserver starts `moraine serve` (internal/server, with the SQL
// executor over the resident catalog) in the test's process, for the tests
// of packages above the server: e2e, conformance, cmd/moraine.
//
// The server's own internal tests cannot import this package (it imports
// the server); they build their server themselves and share only the
// lifecycle, testenv.Start.
package testserver

import (
	"io"
	"log/slog"
	"testing"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/testenv"
)

// Running is a server started by Start; Srv reaches its stack and metrics.
type Running struct {
	*testenv.Running
	Srv *server.Server
}

// Start runs moraine serve on store, listening on a free loopback port,
// with extra appended to the command-line flags, and returns once it is
// ready. The log is discarded.
func Start(t testing.TB, store string, extra ...string) *Running {
	t.Helper()
	args := append([]string{"--store", store, "--listen", "127.0.0.1:0"}, extra...)
	cfg, err := server.ParseConfig(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(cfg, slog.New(slog.DiscardHandler))
	return &Running{Running: testenv.Start(t, srv), Srv: srv}
}
