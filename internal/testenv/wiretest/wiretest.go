// Package wiretest serves a pgwire.Executor on a loopback port for tests
// that talk to an executor or a storage stack through real clients without
// running all of `moraine serve` (testenv/testserver does that).
package wiretest

import (
	"net"
	"net/netip"
	"testing"

	"github.com/moraine-db/moraine/internal/pgwire"
)

// Serve runs a pgwire server for exec on a free loopback port, trusting
// loopback clients as `moraine serve` does without a users file, with params
// as extra ParameterStatus values (nil: none). It returns the address
// ("127.0.0.1:port"); the server is closed when the test ends.
func Serve(t testing.TB, exec pgwire.Executor, params map[string]string) string {
	t.Helper()
	srv, err := pgwire.New(pgwire.Config{
		TrustedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Parameters:  params,
	}, exec)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
