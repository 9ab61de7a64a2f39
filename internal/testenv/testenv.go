// Package testenv holds the helpers that tests across moraine share: the
// test PostgreSQL's conninfo, the lifecycle of a server run in-process, and
// a buffer that a server's goroutines may write while the test reads it.
//
// It imports the standard library only, so that the internal tests of any
// package (keyspace, pgwire, server, …) can use it without an import cycle.
// Helpers that need moraine's own packages live in subpackages.
package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// PostgresEnv names the environment variable holding the conninfo of the
// PostgreSQL that differential tests compare against (.ci/run starts one).
const PostgresEnv = "MORAINE_TEST_POSTGRES"

// Postgres returns the conninfo of the test PostgreSQL, or reports it
// Unavailable.
func Postgres(t testing.TB) string {
	t.Helper()
	conninfo := os.Getenv(PostgresEnv)
	if conninfo == "" {
		Unavailable(t, "%s not set", PostgresEnv)
	}
	return conninfo
}

// Unavailable ends a test whose prerequisite (the test PostgreSQL, a
// client tool) is missing: it fails when CI=true,
// where everything is installed and every test must run, and is skipped
// elsewhere. The message says what is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (required under CI=true)", args...)
	}
	t.Skipf(format, args...)
}

// SyncBuffer is a bytes.Buffer safe for concurrent Write and String: a
// server's log or a child process's stderr goes to it while the test reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Psql returns the path of psql, the real libpq client: it fails the test
// under CI (where .ci/run installs it) and skips it elsewhere.
func Psql(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("psql")
	if err != nil {
		Unavailable(t, "psql not installed: %v", err)
	}
	return p
}
