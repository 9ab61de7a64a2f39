package pgwire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// FuzzStartupPacket feeds arbitrary startup-phase packet bodies to the
// decoder: it must never panic, and a decoded 3.x StartupMessage must
// re-encode to the same parameters.
func FuzzStartupPacket(f *testing.F) {
	f.Add(startupBytes(protocol30, "user", "alice", "database", "lake")[4:])
	f.Add([]byte{0x04, 0xd2, 0x16, 0x2f})                               // SSLRequest
	f.Add([]byte{0x04, 0xd2, 0x16, 0x30})                               // GSSENCRequest
	f.Add([]byte{0x04, 0xd2, 0x16, 0x2e, 0, 0, 0x03, 0xe9, 1, 2, 3, 4}) // CancelRequest
	f.Add(startupBytes(2<<16, "user", "x")[4:])                         // protocol 2
	f.Add(startupBytes(3<<16|2, "user", "x", "_pq_.opt", "v")[4:])      // protocol 3.2
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeStartupPacket(body)
		if err != nil || p.kind != packetStartup || p.version>>16 != 3 {
			return
		}
		var re []string
		for _, kv := range p.params {
			re = append(re, kv[0], kv[1])
		}
		again, err := decodeStartupPacket(startupBytes(p.version, re...)[4:])
		if err != nil || len(again.params) != len(p.params) {
			t.Fatalf("re-decode: %v %v vs %v", err, again.params, p.params)
		}
		for i := range p.params {
			if again.params[i] != p.params[i] {
				t.Fatalf("param %d: %q vs %q", i, again.params[i], p.params[i])
			}
		}
	})
}

// fuzzServer is shared by FuzzConnection iterations.
var fuzzServer *Server

// FuzzConnection logs in and then feeds arbitrary bytes as the frontend
// message stream. Whatever the bytes, the connection goroutine must end
// (once the client hangs up), without a panic, and the session must be
// closed.
func FuzzConnection(f *testing.F) {
	f.Add(encode(&pgproto3.Query{String: "SELECT 1; SELECT * FROM t"}))
	f.Add(encode(&pgproto3.Parse{Query: "SELECT $1::int8"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("1")}, ResultFormatCodes: []int16{1}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{}))
	f.Add(encode(&pgproto3.Query{String: "COPY t FROM STDIN (FORMAT binary)"}, &pgproto3.CopyData{Data: []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x05\xff\xff")}, &pgproto3.CopyDone{}))
	f.Add(encode(&pgproto3.Query{String: "COPY t TO STDOUT (FORMAT binary)"}, &pgproto3.Terminate{}))
	f.Add([]byte{'B', 0, 0, 0, 12, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0})
	f.Add([]byte{'Q', 0x7f, 0xff, 0xff, 0xff})
	f.Add(encode(&pgproto3.Query{String: "BEGIN"}, &pgproto3.Query{String: "bogus"}, &pgproto3.Query{String: "ROLLBACK"}))
	f.Fuzz(func(t *testing.T, stream []byte) {
		srv := fuzzSrv(t, &fuzzServer, Config{StatementTimeout: 200 * time.Millisecond, MaxMessageSize: 1 << 16, AuthTimeout: 2 * time.Second})
		fuzzConn(t, srv, io.Discard, startupBytes(protocol30, "user", "alice", "database", "lake"), stream)
	})
}

// fuzzSrv returns *p, first creating it with cfg over a toyExec: one
// server serves every iteration of a fuzz target.
func fuzzSrv(t *testing.T, p **Server, cfg Config) *Server {
	t.Helper()
	if *p == nil {
		srv, err := New(cfg, &toyExec{})
		if err != nil {
			t.Fatal(err)
		}
		*p = srv
	}
	return *p
}

// fuzzConn serves one connection of srv over an in-memory pipe: the client
// writes login and then stream and hangs up. The connection goroutine must
// end within 5s and nothing may have panicked. What the server sent is
// copied to out.
func fuzzConn(t *testing.T, srv *Server, out io.Writer, login, stream []byte) {
	t.Helper()
	client, server := net.Pipe()
	c, ok := srv.admit(server)
	if !ok {
		t.Fatal("the server refused a connection")
	}
	done := make(chan struct{})
	go func() { srv.serveConn(c); close(done) }()
	read := make(chan struct{})
	go func() { _, _ = io.Copy(out, client); close(read) }()
	_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = client.Write(append(login, stream...))
	client.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("connection goroutine did not exit")
	}
	<-read
	if n := srv.panics.Load(); n != 0 {
		t.Fatalf("%d panics", n)
	}
}

// TestHostileStreams runs a few adversarial streams that the fuzzer
// would take long to find, through a real socket.
func TestHostileStreams(t *testing.T) {
	ts := startServer(t, Config{MaxMessageSize: 1 << 20})
	streams := map[string][]byte{
		"negative length":       {'Q', 0xff, 0xff, 0xff, 0xff},
		"length below header":   {'Q', 0, 0, 0, 3},
		"bind with huge count":  {'B', 0, 0, 0, 10, 0, 0, 0x7f, 0xff, 0, 0},
		"parse without nul":     {'P', 0, 0, 0, 6, 'a', 'b'},
		"copy data when idle":   {'d', 0, 0, 0, 5, 'x', 'S', 0, 0, 0, 4},
		"sasl message after ok": {'p', 0, 0, 0, 5, 0},
	}
	for name, s := range streams {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, ts)
			rc.startup()
			if _, err := rc.conn.Write(s); err != nil {
				t.Fatal(err)
			}
			// Either a FATAL error and a close or, for the harmless ones,
			// an answer to the query that follows.
			_, _ = rc.conn.Write(encode(&pgproto3.Query{String: "SELECT 1"}))
			_ = rc.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var got []byte
			buf := make([]byte, 4096)
			for {
				n, err := rc.conn.Read(buf)
				got = append(got, buf[:n]...)
				if bytes.Contains(got, []byte("SELECT 1\x00")) {
					return // answered
				}
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("neither answered nor closed: %q", got)
					}
					if !bytes.Contains(got, []byte("FATAL")) {
						t.Fatalf("closed without a FATAL error: %q", got)
					}
					return
				}
			}
		})
	}
}

// encode is the wire form of msgs, one after another (a fuzz seed).
func encode(msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		b, _ = m.Encode(b)
	}
	return b
}

// fuzzAuthServer is shared by FuzzAuth iterations.
var fuzzAuthServer *Server

// FuzzAuth logs in as a password, md5 or SCRAM user and feeds arbitrary
// bytes as the client's side of the authentication exchange: no panic, the
// connection ends once the client hangs up, and a login never succeeds
// without the password.
func FuzzAuth(f *testing.F) {
	f.Add(uint8(0), encode(&pgproto3.PasswordMessage{Password: "guess"}))
	f.Add(uint8(1), encode(&pgproto3.PasswordMessage{Password: "md5abcdef"}))
	f.Add(uint8(2), encode(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abcdefghijklmnop")}))
	f.Add(uint8(2), encode(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abc")},
		&pgproto3.SASLResponse{Data: []byte("c=biws,r=abc,p=AAAA")}))
	f.Add(uint8(2), []byte{'p', 0, 0, 0, 4})
	users := []string{"bob", "carol", "dave", "nobody"}
	f.Fuzz(func(t *testing.T, which uint8, stream []byte) {
		srv := fuzzSrv(t, &fuzzAuthServer, Config{Users: testUsers(t), AuthTimeout: 2 * time.Second})
		var got bytes.Buffer
		fuzzConn(t, srv, &got, startupBytes(protocol30, "user", users[int(which)%len(users)]), stream)
		// AuthenticationOk is R with int32 0; a guessed password must
		// never produce it.
		knowsPassword := bytes.Contains(stream, []byte(pwBob)) || bytes.Contains(stream, []byte(pwCarol))
		if !knowsPassword && bytes.Contains(got.Bytes(), []byte{'R', 0, 0, 0, 8, 0, 0, 0, 0}) {
			t.Fatalf("login succeeded for %s with %q", users[int(which)%len(users)], stream)
		}
	})
}
