package pgwire

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// authLimiter counts failed authentications per client address over a
// sliding minute, so that password guessing from one address stops at
// Config.AuthFailuresPerMinute attempts a minute.
type authLimiter struct {
	limit int
	mu    sync.Mutex
	fails map[netip.Addr][]time.Time // failure times within the last minute, oldest first
	now   func() time.Time
}

const authWindow = time.Minute

func newAuthLimiter(limit int) *authLimiter {
	return &authLimiter{limit: limit, fails: map[netip.Addr][]time.Time{}, now: time.Now}
}

// addrKey is the address a connection's failures count against; false for
// connections without one (Unix sockets), which are never limited.
func addrKey(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ip.Unmap(), ok
}

// blocked reports whether addr has used up its failures, and until when.
func (l *authLimiter) blocked(a net.Addr) (time.Time, bool) {
	ip, ok := addrKey(a)
	if l == nil || l.limit <= 0 || !ok {
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.prune(ip)
	if len(f) < l.limit {
		return time.Time{}, false
	}
	return f[0].Add(authWindow), true
}

// failed records a failed authentication from addr.
func (l *authLimiter) failed(a net.Addr) {
	ip, ok := addrKey(a)
	if l == nil || l.limit <= 0 || !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails[ip] = append(l.prune(ip), l.now())
}

// prune drops failures older than the window; an address with none left
// is forgotten, so the map holds only addresses that failed in the last
// minute.
func (l *authLimiter) prune(ip netip.Addr) []time.Time {
	f := l.fails[ip]
	cut := l.now().Add(-authWindow)
	i := 0
	for i < len(f) && !f[i].After(cut) {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.fails, ip)
		return nil
	}
	l.fails[ip] = f
	return f
}
