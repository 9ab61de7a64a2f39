package pgwire

import (
	"runtime/debug"
	"sync"
	"time"
)

// largeRequest is the message size from which the connection hands the
// memory its request took back to the operating system once it is done.
const largeRequest = 8 << 20

// releaseEvery is the shortest time between two releases.
const releaseEvery = 10 * time.Second

var release struct {
	sync.Mutex
	last    time.Time
	pending bool // a release is scheduled for the end of the window
}

// ReleaseMemory returns freed heap memory to the operating system after a
// request that needed a lot of it (a bulk INSERT of tens of megabytes, a
// statement that materialized many rows). Go's scavenger gives memory back
// only gradually, so a server that once answered a large request would hold
// its peak size for minutes with no client connected. It runs in the
// background, at most once every releaseEvery: a request inside the window
// schedules one release at its end, so the last large request is always
// followed by one.
func ReleaseMemory() {
	release.Lock()
	defer release.Unlock()
	if release.pending {
		return
	}
	wait := releaseEvery - time.Since(release.last)
	if wait <= 0 {
		release.last = time.Now()
		go debug.FreeOSMemory()
		return
	}
	release.pending = true
	time.AfterFunc(wait, func() {
		release.Lock()
		release.pending = false
		release.last = time.Now()
		release.Unlock()
		debug.FreeOSMemory()
	})
}
