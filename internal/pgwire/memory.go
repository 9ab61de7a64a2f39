package pgwire

import (
	"runtime/debug"
	"sync/atomic"
	"time"
)

// largeRequest is the message size from which the connection hands the
// memory its request took back to the operating system once it is done.
const largeRequest = 8 << 20

// lastRelease is when ReleaseMemory last ran (Unix nanoseconds).
var lastRelease atomic.Int64

// ReleaseMemory returns freed heap memory to the operating system after a
// request that needed a lot of it (a bulk INSERT of tens of megabytes, a
// statement that materialized many rows). Go's scavenger gives memory back
// only gradually, so a server that once answered a large request would hold
// its peak size for minutes with no client connected. It runs at most once
// every ten seconds, in the background: the collection it forces is the
// price of a large request, not of every statement.
func ReleaseMemory() {
	now := time.Now().UnixNano()
	last := lastRelease.Load()
	if now-last < int64(10*time.Second) || !lastRelease.CompareAndSwap(last, now) {
		return
	}
	go debug.FreeOSMemory()
}
