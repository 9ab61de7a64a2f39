package localdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Creating a file is what makes a durable write to a local directory slow:
// on ext4 the new inode and directory entry cost a journal commit of their
// own, so "create, write, fsync, link, fsync the directory" is two full
// commits (~1.4 ms on the CI machines) where appending to an existing file
// and fdatasyncing it is one small one. The pool takes the creation off the
// write path: a background goroutine keeps a few empty temporary files
// ready (created, or recycled from deleted objects: recycle.go), open,
// and their creation durable (one fsync of the root for the lot); a
// write fills one, fdatasyncs it, links it to its final name and fsyncs
// that directory (~0.6 ms).
//
// Pool files are ordinary temporary files (tmpPrefix, in the root): List
// never shows them and RemoveStaleTemp may delete old ones. The pool only
// hands out files created or renewed (refresh) within poolMaxAge, far
// below any stale-temp cutoff, and a write whose pooled file vanished
// anyway starts over with a fresh temporary file. Durability does not depend on the pool: the data is
// fdatasynced before the file gets its final name, as on the fresh path.

const (
	// poolSize files are kept ready; the filler tops the pool up only once
	// it is half empty, so that one fsync of the root commits the creation
	// of poolSize/2 files (jbd2 commits are serial: a commit per created
	// file would queue behind, and delay, the writers' own).
	poolSize   = 32
	poolMaxAge = time.Minute
	poolPrefix = tmpPrefix + "pool-"
)

// removeOrphanedPoolFiles removes the pool files of processes that died
// without closing the store (a kill -9 leaves a pool's worth behind each
// time). Every pool file is flock(2)ed by its process while it lives, and
// the kernel drops the lock when the process dies: a file that can be
// locked has no owner. A live process's file lost to the small window
// between its creation and its lock costs that process only a fresh
// temporary file at its next write (take's caller falls back to one).
func removeOrphanedPoolFiles(root string) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), poolPrefix) {
			continue
		}
		path := filepath.Join(root, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil && os.Remove(path) == nil {
			removed++
		}
		f.Close()
	}
	return removed
}

// pooledFile is an empty temporary file, kept open so that a write does
// not pay for opening it again.
type pooledFile struct {
	path    string
	f       *os.File
	created time.Time
}

// discard closes and removes a pooled file that will not be used.
func (pf pooledFile) discard() {
	_ = pf.f.Close()
	_ = os.Remove(pf.path)
}

type pool struct {
	root  string
	tag   string // names this pool's recycled files (recycle.go)
	ready chan pooledFile
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{} // closed when fill returns
	mu    struct {
		sync.Mutex
		started     bool // fill is running (or ran)
		closed      bool
		recycled    []recycledFile // deleted objects' files, oldest first
		seq         uint64         // names recycled files
		cooldown    time.Duration  // before a recycled file is reused
		maxRecycled int            // recycled files kept waiting at most
	}
}

func newPool(root string) *pool {
	p := &pool{
		root:  root,
		tag:   recycleTag(),
		ready: make(chan pooledFile, poolSize),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	p.mu.cooldown, p.mu.maxRecycled = recycleCooldown, maxRecycled
	return p
}

// take returns a pooled empty file, or ok false when none is ready (the
// caller creates a fresh one). It starts the filler on first use, so a store
// that is only read creates no files.
func (p *pool) take() (f pooledFile, ok bool) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return pooledFile{}, false
	}
	if !p.mu.started {
		p.mu.started = true
		go p.fill()
	}
	p.mu.Unlock()
	defer p.wakeIfLow()
	for {
		select {
		case f = <-p.ready:
			if time.Since(f.created) < poolMaxAge {
				return f, true
			}
			f.discard()
		default:
			return pooledFile{}, false
		}
	}
}

// low reports whether the pool is down to the level at which fill tops it
// up.
func (p *pool) low() bool { return len(p.ready) <= cap(p.ready)/2 }

// wakeIfLow kicks the filler when it has work: waking it after every take
// only for it to find the pool above half full cost a goroutine wake-up —
// for an otherwise idle server a thread's, and on a small VM ~20 µs of CPU
// — per object written.
func (p *pool) wakeIfLow() {
	if p.low() {
		p.wake()
	}
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// fill keeps the pool topped up until shutdown. Errors (a full disk, a
// read-only directory) only leave the pool empty: writes then take the
// fresh path, which reports the error where it belongs.
func (p *pool) fill() {
	defer close(p.done)
	removeOrphanedPoolFiles(p.root)
	refresh := time.NewTicker(poolMaxAge / 2)
	defer refresh.Stop()
	for {
		if p.low() && p.topUp() > 0 {
			// Commit the creations now, off the write path.
			_ = syncDir(p.root)
		}
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-refresh.C:
			p.refresh()
		}
	}
}

// refresh renews the files about to age out, so that an idle store's next
// write still finds the pool ready: a new modification time keeps a file
// as far from any stale-temp cutoff as a new file would be, without an
// idle store creating and removing its whole pool every half minute.
func (p *pool) refresh() {
	for n := len(p.ready); n > 0; n-- {
		select {
		case f := <-p.ready:
			if time.Since(f.created) >= poolMaxAge/2 {
				now := time.Now()
				if err := os.Chtimes(f.path, now, now); err != nil {
					f.discard() // gone (a sweep of temporary files), or not ours to touch
					continue
				}
				f.created = now
			}
			p.ready <- f
		default:
		}
	}
}

// topUp fills the pool with empty temporary files, recycled ones first
// (recycle.go), and returns how many it added.
func (p *pool) topUp() int {
	n := 0
	for len(p.ready) < cap(p.ready) {
		pf, ok := p.reuse()
		if !ok {
			f, err := os.CreateTemp(p.root, poolPrefix+"*")
			if err != nil {
				return n
			}
			// The lock marks the file as this process's for as long as it
			// lives (removeOrphanedPoolFiles).
			_ = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			pf = pooledFile{path: f.Name(), f: f, created: time.Now()}
		}
		select {
		case p.ready <- pf:
			n++
		default: // only fill sends, but stay safe
			pf.discard()
			return n
		}
	}
	return n
}

// shutdown stops the filler and removes the files still pooled or
// waiting to be recycled.
func (p *pool) shutdown() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	started := p.mu.started
	p.dropRecycled()
	p.mu.Unlock()
	close(p.stop)
	if started {
		<-p.done
	}
	for {
		select {
		case f := <-p.ready:
			f.discard()
		default:
			return
		}
	}
}

// writePooled writes data into a pooled file and fdatasyncs it if asked, returning
// its path; ok false means no pooled file could be used (none ready, or it
// vanished) and the caller must write a fresh temporary file instead.
func (p *pool) writePooled(data []byte, sync bool) (path string, ok bool, err error) {
	pf, ok := p.take()
	if !ok {
		return "", false, nil
	}
	// The file may have been removed meanwhile (RemoveStaleTemp of another
	// process): the write then lands in an unlinked inode and moving the
	// name into place fails with ErrNotExist, which the caller retries
	// with a fresh file.
	f := pf.f
	_, err = f.Write(data)
	if err == nil && sync {
		// fdatasync: the data and the size, which is all a reader needs;
		// the inode's creation was committed by the filler.
		err = ignoringEINTR(func() error { return unix.Fdatasync(int(f.Fd())) })
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(pf.path)
		return "", true, fmt.Errorf("write temporary file: %w", err)
	}
	return pf.path, true, nil
}

func ignoringEINTR(fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
