package localdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A deleted object's file is recycled: Delete renames it into the root as
// a pool file and empties it, and once it has cooled for recycleCooldown
// the filler hands it to a later write, as PostgreSQL recycles its WAL
// segments. A store that writes an object per commit and deletes each
// one a GC grace later then creates and frees no inode once it has run
// that long. That matters beyond the system calls saved: ext4 without a
// journal skips every inode freed in the last minute (six while the inode
// table block is dirty) when it allocates one, reading the inode table for
// each, so a store that freed a GC round's worth of files pays for all of
// them on every file it creates.
//
// A reader may hold a deleted object's file open, and the file's bytes
// change when it is reused. read therefore checks, after opening, that the
// path still names the file it opened, and, after reading, that the file's
// size and modification time are those it opened with (sameObject,
// unchangedSince). An object file is never written in place, so only
// recycling changes them: emptying it changes its size (an empty object's
// bytes cannot be wrong), and the cooldown, far above a clock tick, makes
// the modification time of the write that reuses it differ from the
// object's.
//
// Only a lone regular file is recycled: a symbolic link at the key's path
// is removed, not followed, and a file with another hard link (a backup
// made with cp -al, say) keeps its bytes.

const (
	// recycleCooldown is how long a deleted object's file waits before
	// it is reused; a read that has it open has long finished.
	recycleCooldown = 10 * time.Second
	// maxRecycled bounds the deleted files waiting to be reused: a GC
	// round's worth at about 270 commits a second (slate collects once a
	// minute). A round deleting more removes the rest, and Close removes
	// those still waiting.
	maxRecycled = 16384
)

// recycledFile is a deleted object's file, renamed into the root under the
// pool's prefix.
type recycledFile struct {
	path    string
	deleted time.Time
}

// recycleTag returns a name part that no other process's pool uses.
func recycleTag() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// recycle moves the object file at path into the pool for later reuse,
// emptied, and reports whether it did; false means the caller removes the
// file as before (it is not a lone regular file, the pool is closed, has
// enough, or has never been used — a process that only deletes, such as
// an offline GC, would only remove the files at Close — or the rename
// failed).
func (p *pool) recycle(path string) bool {
	p.mu.Lock()
	room := p.mu.started && !p.mu.closed && len(p.mu.recycled) < p.mu.maxRecycled
	p.mu.seq++
	name := filepath.Join(p.root, fmt.Sprintf("%sr-%s-%d", poolPrefix, p.tag, p.mu.seq))
	p.mu.Unlock()
	if !room {
		return false
	}
	// Opened without following a symbolic link, and checked through the
	// descriptor: what is emptied is what was checked.
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || links(fi) != 1 {
		return false
	}
	// The rename is the delete: it takes the key's name away as unlink
	// would, and the caller makes that durable as before.
	if err := os.Rename(path, name); err != nil {
		return false
	}
	// Emptied now, so that a file waiting for reuse holds no blocks; a
	// reader that had it open sees its size change (unchangedSince).
	_ = f.Truncate(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed { // closed meanwhile: nothing will reuse it
		_ = os.Remove(name)
		return true
	}
	p.mu.recycled = append(p.mu.recycled, recycledFile{path: name, deleted: time.Now()})
	return true
}

// reuse returns the oldest recycled file that has cooled, truncated, open
// and locked as a pooled file; ok false when there is none.
func (p *pool) reuse() (pf pooledFile, ok bool) {
	for {
		p.mu.Lock()
		if len(p.mu.recycled) == 0 || time.Since(p.mu.recycled[0].deleted) < p.mu.cooldown {
			p.mu.Unlock()
			return pooledFile{}, false
		}
		r := p.mu.recycled[0]
		p.mu.recycled = p.mu.recycled[1:]
		p.mu.Unlock()
		f, err := prepareRecycled(r.path)
		if err != nil {
			// Gone (another process's sweep of temporary files), or
			// not reusable: it is not this pool's any more either way.
			if !errors.Is(err, fs.ErrNotExist) {
				_ = os.Remove(r.path)
			}
			continue
		}
		return pooledFile{path: r.path, f: f, created: time.Now()}, true
	}
}

// prepareRecycled opens the recycled file at path for writing, locks it
// as the pool's (removeOrphanedPoolFiles) and empties it if it is not
// empty already.
//
// A file recycle emptied is not truncated again: on ext4 a truncation to
// size zero, even of an empty file, marks the inode so that its next close
// starts writeback of what was written since (auto_da_alloc, a guard for
// programs that replace a file's contents without fsync). The write that
// reuses the file would then submit its pages in the commit that wrote it,
// where a fresh file's pages wait for the kernel's flusher; an object the
// journal makes durable gains nothing from the early write.
func prepareRecycled(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular() || links(fi) != 1:
		err = fmt.Errorf("recycled file %s is no longer a lone regular file", path)
	default:
		if err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil && fi.Size() != 0 {
			err = f.Truncate(0)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// dropRecycled removes the recycled files not yet reused.
// REQUIRES: p.mu held.
func (p *pool) dropRecycled() {
	for _, r := range p.mu.recycled {
		_ = os.Remove(r.path)
	}
	p.mu.recycled = nil
}

// links returns a file's hard link count.
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// sameObject reports whether path still names the file opened, whose
// FileInfo is fi: a file recycled after the open no longer has the name.
func sameObject(path string, fi os.FileInfo) bool {
	cur, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, cur)
}

// unchangedSince reports whether the open file f still has fi's size and
// modification time: a recycled file is truncated and rewritten.
func unchangedSince(f *os.File, fi os.FileInfo) bool {
	cur, err := f.Stat()
	return err == nil && cur.Size() == fi.Size() && cur.ModTime().Equal(fi.ModTime())
}
