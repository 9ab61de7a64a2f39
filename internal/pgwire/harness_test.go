package pgwire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Test users: one per auth method. Passwords are stored the way an
// operator would store them (verifiers, never plaintext for SCRAM).
const (
	pwBob   = "bob-secret"
	pwCarol = "carol-secret"
	pwDave  = "dave-secret"
)

func testUsers(t testing.TB) []User {
	v, err := SCRAMVerifier(pwDave)
	if err != nil {
		t.Fatal(err)
	}
	return []User{
		{Name: "alice", Method: AuthTrust},
		{Name: "bob", Method: AuthPassword, Secret: pwBob},
		{Name: "carol", Method: AuthMD5, Secret: MD5Verifier("carol", pwCarol)},
		{Name: "dave", Method: AuthSCRAM, Secret: v},
	}
}

// selfSignedTLS makes a server certificate for 127.0.0.1/localhost.
func selfSignedTLS(t testing.TB) *tls.Config {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

type testServer struct {
	srv     *Server
	exec    *toyExec
	host    string
	port    int
	sockDir string
	done    chan struct{}
}

// startServer serves a toy executor on 127.0.0.1:<random> and on a Unix
// socket for the same port in a temp dir. Cleanup shuts it down and checks
// that no connection goroutine and no session is left behind.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	baseline := runtime.NumGoroutine()
	if cfg.Users == nil {
		cfg.Users = testUsers(t)
	}
	exec := &toyExec{}
	srv, err := New(cfg, exec)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	// Unix socket paths are limited to ~108 bytes; t.TempDir can be long.
	sockDir, err := os.MkdirTemp("", "pgw")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := ListenUnix(sockDir, port)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, exec: exec, host: "127.0.0.1", port: port, sockDir: sockDir, done: make(chan struct{})}
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(l) }()
	go func() { errs <- srv.Serve(ul) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		for range 2 {
			if err := <-errs; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		}
		os.RemoveAll(sockDir)
		if n := srv.panics.Load(); n != 0 {
			t.Errorf("%d connection goroutines panicked", n)
		}
		if n := exec.liveSessions(); n != 0 {
			t.Errorf("%d sessions not closed", n)
		}
		waitGoroutines(t, baseline)
	})
	return ts
}

// waitGoroutines fails if the goroutine count does not come back to
// baseline (plus slack for runtime helpers) within a few seconds.
func waitGoroutines(t testing.TB, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutines: %d, baseline %d\n%s", n, baseline, buf)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ts *testServer) connString(user, password, sslmode string) string {
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=lake sslmode=%s connect_timeout=10", ts.host, ts.port, user, sslmode)
	if password != "" {
		s += " password=" + password
	}
	return s
}

// rawClient speaks the protocol by hand through pgproto3.Frontend, so tests
// can assert exact message sequences.
type rawClient struct {
	t      testing.TB
	conn   net.Conn
	fe     *pgproto3.Frontend
	pid    uint32 // from BackendKeyData
	secret []byte
}

// cancel sends a CancelRequest for this client's backend on a new
// connection.
func (rc *rawClient) cancel(ts *testServer) {
	rc.t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort(ts.host, fmt.Sprint(ts.port)))
	if err != nil {
		rc.t.Fatal(err)
	}
	defer c.Close()
	b, _ := (&pgproto3.CancelRequest{ProcessID: rc.pid, SecretKey: rc.secret}).Encode(nil)
	if _, err := c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
	expectClosed(rc.t, c)
}

func dialRaw(t testing.TB, ts *testServer) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort(ts.host, fmt.Sprint(ts.port)))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, fe: pgproto3.NewFrontend(c, c)}
}

// startup logs in as alice (trust) and reads up to ReadyForQuery.
func (rc *rawClient) startup() []string {
	rc.t.Helper()
	rc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "alice", "database": "lake"}})
	if err := rc.fe.Flush(); err != nil {
		rc.t.Fatal(err)
	}
	return rc.until('Z')
}

func (rc *rawClient) send(msgs ...pgproto3.FrontendMessage) {
	rc.t.Helper()
	for _, m := range msgs {
		rc.fe.Send(m)
	}
	if err := rc.fe.Flush(); err != nil {
		rc.t.Fatal(err)
	}
}

// until reads messages up to and including one of type stop (a
// ReadyForQuery 'Z', typically) and returns them as compact strings.
func (rc *rawClient) until(stop byte) []string {
	rc.t.Helper()
	var out []string
	for {
		msg, err := rc.fe.Receive()
		if err != nil {
			rc.t.Fatalf("receive after %v: %v", out, err)
		}
		if k, ok := msg.(*pgproto3.BackendKeyData); ok {
			rc.pid, rc.secret = k.ProcessID, append([]byte(nil), k.SecretKey...)
		}
		s, typ := describeMsg(msg)
		out = append(out, s)
		if typ == stop {
			return out
		}
	}
}

// describeMsg renders a backend message compactly: its type letter plus
// the interesting payload.
func describeMsg(msg pgproto3.BackendMessage) (string, byte) {
	switch m := msg.(type) {
	case *pgproto3.ReadyForQuery:
		return "Z " + string(m.TxStatus), 'Z'
	case *pgproto3.RowDescription:
		names := []string{}
		for _, f := range m.Fields {
			names = append(names, fmt.Sprintf("%s:%d/%d", f.Name, f.DataTypeOID, f.Format))
		}
		return "T " + strings.Join(names, ","), 'T'
	case *pgproto3.DataRow:
		vals := []string{}
		for _, v := range m.Values {
			if v == nil {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, fmt.Sprintf("%q", v))
			}
		}
		return "D " + strings.Join(vals, ","), 'D'
	case *pgproto3.CommandComplete:
		return "C " + string(m.CommandTag), 'C'
	case *pgproto3.ErrorResponse:
		return "E " + m.Severity + " " + m.Code + " " + m.Message, 'E'
	case *pgproto3.NoticeResponse:
		return "N " + m.Severity + " " + m.Message, 'N'
	case *pgproto3.EmptyQueryResponse:
		return "I", 'I'
	case *pgproto3.ParseComplete:
		return "1", '1'
	case *pgproto3.BindComplete:
		return "2", '2'
	case *pgproto3.CloseComplete:
		return "3", '3'
	case *pgproto3.NoData:
		return "n", 'n'
	case *pgproto3.PortalSuspended:
		return "s", 's'
	case *pgproto3.ParameterDescription:
		return fmt.Sprintf("t %v", m.ParameterOIDs), 't'
	case *pgproto3.ParameterStatus:
		return "S " + m.Name + "=" + m.Value, 'S'
	case *pgproto3.BackendKeyData:
		return "K", 'K'
	case *pgproto3.AuthenticationOk:
		return "R ok", 'R'
	case *pgproto3.AuthenticationCleartextPassword:
		return "R cleartext", 'R'
	case *pgproto3.CopyOutResponse:
		return fmt.Sprintf("H %d", m.OverallFormat), 'H'
	case *pgproto3.CopyInResponse:
		return fmt.Sprintf("G %d", m.OverallFormat), 'G'
	case *pgproto3.CopyData:
		return fmt.Sprintf("d %x", m.Data), 'd'
	case *pgproto3.CopyDone:
		return "c", 'c'
	case *pgproto3.NegotiateProtocolVersion:
		return fmt.Sprintf("v %d %v", m.NewestMinorProtocol, m.UnrecognizedOptions), 'v'
	}
	return fmt.Sprintf("%T", msg), '?'
}

// expectClosed asserts the server closes the connection (after whatever
// it sent) within a few seconds.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server did not close the connection")
	}
}

// startupBytes builds a raw startup packet for any protocol version.
func startupBytes(version uint32, params ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, version)
	for _, p := range params {
		body = append(body, p...)
		body = append(body, 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
