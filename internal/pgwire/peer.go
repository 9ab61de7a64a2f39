package pgwire

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errClientGoneCause ends a statement whose client closed its connection:
// nobody will read the answer, so the work is abandoned (PostgreSQL's
// client_connection_check_interval).
var errClientGoneCause = errors.New("pgwire: client closed the connection")

// peerGone reports whether the client has closed or reset the connection,
// without reading from it: poll(2) for POLLRDHUP, as PostgreSQL's
// connection check does, so bytes the client pipelined stay unread.
func peerGone(sc syscall.Conn) bool {
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		gone = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return gone
}

// watchPeer checks, every interval while a statement runs, whether its
// client went away, and if so ends the statement with errClientGoneCause.
// It returns the function that stops the watch. A connection that is not a
// socket (a test's pipe) is not watched.
func watchPeer(nc net.Conn, interval time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	sc, ok := nc.(syscall.Conn)
	if !ok || interval <= 0 {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if peerGone(sc) {
			cancel(errClientGoneCause)
			return
		}
		t.Reset(interval)
	}
	mu.Lock()
	t = time.AfterFunc(interval, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
