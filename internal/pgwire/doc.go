// Package pgwire serves PostgreSQL's frontend/backend protocol (version 3)
// over TCP and Unix sockets: startup and TLS negotiation, authentication
// (trust, a cleartext password, md5, SCRAM-SHA-256), the simple
// and extended query protocols, COPY in both directions, cancel requests,
// ParameterStatus and notices. It knows nothing of SQL: every statement goes
// to an Executor (executor.go), which opens one Session per connection.
//
// Files: server.go (listeners, connection registry, shutdown, cancel and
// terminate by backend pid), startup.go and auth.go (the startup packet and
// authentication; authlimit.go bounds failures per address), conn.go (one
// connection's message loop), writer.go (buffered responses), peer.go
// (noticing a client that went away mid-statement), memory.go (returning
// large buffers), errors.go (ErrorResponse fields; an Executor's errors are
// *Error values carrying their SQLSTATE).
//
// Invariants: a connection's Session is never called concurrently; a
// message longer than Config.MaxMessageSize is refused before it is read
// (08P01); every connection that is closed by the server first gets a FATAL
// naming why (57P01 shutdown or termination, 53300 too many clients,
// 28P01/28000 authentication).
package pgwire
