// Package localdir is the objstore backend over a local directory (file://
// URLs). Each object is one file; key segments are directories.
//
// Guarantees:
//
//   - Put is atomic and durable: the bytes go to a temporary file (a
//     pre-created one from the pool in the root, see pool.go, or a fresh one
//     in the object's directory), which is renamed over the final name.
//     Readers see the old or the new object, never a torn one. A small
//     object is then made durable by a record in the store's journal
//     (journal.go: one fdatasync of a preallocated file); a large one was
//     fsynced before the rename, and its directory is fsynced after it.
//   - PutIfAbsent is atomic across processes, not only within this one: the
//     temporary file is moved to the final name with
//     renameat2(RENAME_NOREPLACE), which fails with EEXIST if any process
//     got there first. File systems without it fall back to link(2), which
//     is just as atomic. (gocloud's fileblob checks then renames under an in-process
//     mutex, which two processes can both pass.)
//   - Directories created for a key are fsynced into their parents, so a
//     durable object is reachable after a power loss.
//   - Delete takes the object's name away, durably; its file is reused by a
//     later write (recycle.go), and a reader that had it open gets
//     ErrNotFound, never the bytes written into it next.
//   - List never returns temporary files; a crash can leave them behind (as
//     ".objstore-tmp-*" files) and they are ignored. Keys whose segments
//     begin with that prefix are refused.
//
// Limits: a key cannot name both an object and a "directory" of other
// objects ("a" and "a/b"); such a write fails with ErrKeyConflict, where S3
// would accept it. slate's keyspace never does this. Symbolic links are
// not followed specially.
package localdir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moraine-db/moraine/internal/objstore"
)

// ErrKeyConflict is returned (wrapped) when a key would need a path that is
// a file where a directory is needed, or the reverse.
var ErrKeyConflict = errors.New("localdir: key conflicts with an object or directory on the same path")

// reservedPrefix starts the name of every file that is not an object
// (temporary files, journal segments); no key segment may begin with it.
const reservedPrefix = ".objstore-"

// tmpPrefix starts the name of every temporary file.
const tmpPrefix = reservedPrefix + "tmp-"

// Store is a directory-backed objstore.Store.
type Store struct {
	root      string   // absolute and clean
	pool      *pool    // pre-created temporary files (pool.go)
	journal   *journal // makes small writes durable (journal.go)
	recovered RecoveryStats
	mu        struct {
		sync.RWMutex
		closed bool
	}
}

var _ objstore.Store = (*Store)(nil)

// Create returns a store rooted at dir, creating the directory (and
// fsyncing it into its parent) if it does not exist.
func Create(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localdir: open %q: %w", dir, err)
	}
	if err := mkdirAllSync(abs); err != nil {
		return nil, fmt.Errorf("localdir: open %q: %w", dir, err)
	}
	return Open(abs)
}

// Open returns a store rooted at the existing directory dir. A directory
// that does not exist is an error wrapping fs.ErrNotExist: a typo must not
// become a new, empty store, and a read-only tool must not create one.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localdir: open %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("localdir: %w", err) // names the path
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("localdir: open %q: not a directory", dir)
	}
	st, err := recoverJournals(abs)
	if err != nil {
		return nil, fmt.Errorf("localdir: open %q: %w", dir, err)
	}
	j, err := newJournal(abs)
	if err != nil {
		return nil, fmt.Errorf("localdir: open %q: %w", dir, err)
	}
	return &Store{root: abs, pool: newPool(abs), journal: j, recovered: st}, nil
}

// Recovered says what Open did with the journals of processes that had
// the directory open and died without closing it.
func (s *Store) Recovered() RecoveryStats { return s.recovered }

// Root returns the absolute directory the store lives in.
func (s *Store) Root() string { return s.root }

// begin validates the key and checks the context and the closed flag. The
// caller must call s.mu.RUnlock when err is nil; holding the read lock
// keeps Close from completing under a running call.
func (s *Store) begin(ctx context.Context, op, key string) (path string, err error) {
	if err := checkKey(op, key); err != nil {
		return "", err
	}
	if err := s.enter(ctx, op, key); err != nil {
		return "", err
	}
	return s.path(key), nil
}

// checkKey is ValidateKey for a local store, which also refuses segments
// with the prefix of its own files.
func checkKey(op, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.OpError(op, key, err)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, reservedPrefix) {
			return objstore.OpError(op, key, fmt.Errorf("segment %q uses the reserved prefix %q: %w", seg, reservedPrefix, objstore.ErrInvalidKey))
		}
	}
	return nil
}

// enter checks ctx and that the store is open, and read-locks it; on nil
// error the caller must s.mu.RUnlock.
func (s *Store) enter(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return objstore.OpError(op, key, err)
	}
	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return objstore.OpError(op, key, objstore.ErrClosed)
	}
	return nil
}

// path is the file that holds key's object.
func (s *Store) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	path, err := s.begin(ctx, "put", key)
	if err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.put(key, path, data, false); err != nil {
		return objstore.OpError("put", key, err)
	}
	return nil
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	path, err := s.begin(ctx, "put-if-absent", key)
	if err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.put(key, path, data, true); err != nil {
		return objstore.OpError("put-if-absent", key, err)
	}
	return nil
}

// put moves data to path: through the journal (journal.go) when it is
// small enough, else by the synced path.
func (s *Store) put(key, path string, data []byte, ifAbsent bool) error {
	dir := filepath.Dir(path)
	if err := mkdirAllSync(dir); err != nil {
		return conflictOr(err)
	}
	j := s.journal
	if len(data) > maxInline {
		if err := s.putSynced(dir, path, data, ifAbsent); err != nil {
			return err
		}
		// A live segment may hold an older record for this key, which
		// recovery would otherwise replay over the new object.
		j.mu.Lock()
		defer j.mu.Unlock()
		if !j.live(key) {
			return nil
		}
		r := record{kind: recSynced, key: key}
		if err := j.reserve(recordLen(key, nil)); err != nil {
			return err
		}
		return j.appendLocked(r)
	}
	tmp, err := s.stage(dir, data, false)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	// Room first: once the object has its name, the record must follow.
	if err := j.reserve(recordLen(key, data)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := s.moveIntoPlace(tmp, path, dir, data, ifAbsent, false); err != nil {
		return err
	}
	return j.appendLocked(record{kind: recPut, key: key, data: data})
}

// putSynced writes data to a synced temporary file beside path, moves it
// into place and syncs the directory, so that it is durable without the
// journal.
func (s *Store) putSynced(dir, path string, data []byte, ifAbsent bool) error {
	tmp, err := s.stage(dir, data, true)
	if err != nil {
		return err
	}
	if err := s.moveIntoPlace(tmp, path, dir, data, ifAbsent, true); err != nil {
		return err
	}
	return syncDir(dir)
}

// stage writes data to a temporary file, pooled if one is ready, else
// fresh beside the object, and syncs it if asked.
func (s *Store) stage(dir string, data []byte, sync bool) (string, error) {
	tmp, pooled, err := s.pool.writePooled(data, sync)
	if err != nil || pooled {
		return tmp, err
	}
	return writeTemp(dir, data, sync)
}

// moveIntoPlace gives the temporary file tmp the name path: rename for a
// plain Put, rename-noreplace (or link) for create-if-absent. A pooled file
// that vanished or lives on another file system is replaced by a fresh one
// beside the object.
func (s *Store) moveIntoPlace(tmp, path, dir string, data []byte, ifAbsent, sync bool) error {
	// linked: the temporary name is still there after a create-if-absent
	// (a link, or a failure); a plain Put removes tmp on any failure.
	move := func(tmp, path string) (linked bool, err error) { return false, os.Rename(tmp, path) }
	if ifAbsent {
		move = linkNoReplace
	}
	linked, err := move(tmp, path)
	if retryFresh(err) {
		_ = os.Remove(tmp)
		if tmp, err = writeTemp(dir, data, sync); err != nil {
			return err
		}
		linked, err = move(tmp, path)
	}
	if ifAbsent {
		// After a rename the temporary name is gone; after a link (or a
		// failure) it must be removed.
		if linked || err != nil {
			if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
				err = fmt.Errorf("remove temporary file: %w", rmErr)
			}
		}
		if errors.Is(err, fs.ErrExist) {
			if fi, statErr := os.Lstat(path); statErr == nil && fi.IsDir() {
				return ErrKeyConflict
			}
			return objstore.ErrExists
		}
		return err
	}
	if err != nil {
		_ = os.Remove(tmp)
		return conflictOr(err)
	}
	return nil
}

// retryFresh reports a failure to move a pooled file into place that a
// fresh temporary file beside the object does not have.
func retryFresh(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EXDEV)
}

// writeTemp creates a temporary file in dir holding data, closed and
// fsynced if asked, and returns its path.
func writeTemp(dir string, data []byte, sync bool) (string, error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("create temporary file: %w", err)
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("write temporary file: %w", err)
	}
	return name, nil
}

// linkNoReplace gives the file at tmp the name final, failing with an error
// matching fs.ErrExist if final exists. Both ways are single system calls
// that the kernel makes atomic with respect to every process:
// renameat2(RENAME_NOREPLACE) moves the name (one directory update, and no
// unlink of the temporary name after it), and where the file system lacks
// it, link(2) adds the name. linked reports that tmp still has its name
// (a link, or a failure): the caller then removes it.
func linkNoReplace(tmp, final string) (linked bool, err error) {
	rerr := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	switch {
	case rerr == nil:
		return false, nil
	case errors.Is(rerr, unix.EEXIST):
		return true, fs.ErrExist
	case errors.Is(rerr, unix.ENOENT):
		return true, fs.ErrNotExist
	case !errors.Is(rerr, unix.EINVAL) && !errors.Is(rerr, unix.ENOSYS) && !errors.Is(rerr, unix.ENOTSUP) && !errors.Is(rerr, unix.EOPNOTSUPP):
		return true, conflictOr(rerr)
	}
	// No rename-noreplace here (some FUSE and network file systems).
	err = os.Link(tmp, final)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return true, err
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) || (errno != unix.EPERM && errno != unix.ENOTSUP && errno != unix.EOPNOTSUPP && errno != unix.EMLINK) {
		return true, conflictOr(err)
	}
	return true, fmt.Errorf("file system offers neither rename-noreplace (%v) nor link (%v): create-if-absent is impossible", rerr, err)
}

// conflictOr maps ENOTDIR and EISDIR (a file where a directory is needed or
// the reverse) to ErrKeyConflict.
func conflictOr(err error) error {
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("%w (%v)", ErrKeyConflict, err)
	}
	if errors.Is(err, fs.ErrExist) {
		// rename of a file over a directory reports EEXIST or ENOTEMPTY.
		return fmt.Errorf("%w (%v)", ErrKeyConflict, err)
	}
	if errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("%w (%v)", ErrKeyConflict, err)
	}
	return err
}

// missing reports whether err means "no object at this path": the file or a
// parent is absent, or a parent is a file.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.read(ctx, "get", key, 0, -1)
}

func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return s.read(ctx, "get-range", key, offset, length)
}

func (s *Store) read(ctx context.Context, op, key string, offset, length int64) ([]byte, error) {
	path, err := s.begin(ctx, op, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if offset < 0 {
		return nil, objstore.OpError(op, key, objstore.ErrInvalidRange)
	}
	for range maxReadAttempts {
		buf, err := readFile(path, offset, length)
		if errors.Is(err, errRecycled) {
			continue // deleted while read: look again
		}
		if err != nil {
			return nil, objstore.OpError(op, key, err)
		}
		return buf, nil
	}
	return nil, objstore.OpError(op, key, fmt.Errorf("read: the object was replaced or deleted %d times while being read", maxReadAttempts))
}

// maxReadAttempts bounds how often read looks again at a key whose file
// stopped being the object's while it read; each time is a Put or Delete
// of the key between two system calls.
const maxReadAttempts = 8

// errRecycled reports a file that stopped being the object's while read:
// the key was deleted (and the file perhaps reused) or replaced.
var errRecycled = errors.New("localdir: object file deleted or replaced while read")

// readFile reads the range of the object file at path. It fails with
// objstore.ErrNotFound if there is no object, and with errRecycled if the
// file it opened was deleted and reused meanwhile (recycle.go).
func readFile(path string, offset, length int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if missing(err) {
			return nil, objstore.ErrNotFound
		}
		return nil, err
	}
	defer f.Close()
	return readOpened(f, path, offset, length)
}

// readOpened reads the range of f, opened by the name path.
func readOpened(f *os.File, path string, offset, length int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, objstore.ErrNotFound
	}
	if !sameObject(path, fi) {
		return nil, errRecycled
	}
	return readChecked(f, fi, offset, length)
}

// readChecked reads the range of f, whose state when it still had its
// object's name was fi. Objects are replaced by rename, never written in
// place, so the open file's size is the object's size for as long as we
// read it, unless it is recycled, which unchangedSince sees.
func readChecked(f *os.File, fi os.FileInfo, offset, length int64) ([]byte, error) {
	start, end := objstore.ClampRange(fi.Size(), offset, length)
	buf := make([]byte, end-start)
	_, err := f.ReadAt(buf, start)
	if !unchangedSince(f, fi) {
		return nil, errRecycled
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(buf) == 0) {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf, nil
}

func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	path, err := s.begin(ctx, "stat", key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	defer s.mu.RUnlock()
	fi, err := os.Stat(path)
	if err != nil {
		if missing(err) {
			return objstore.ObjectInfo{}, objstore.OpError("stat", key, objstore.ErrNotFound)
		}
		return objstore.ObjectInfo{}, objstore.OpError("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return objstore.ObjectInfo{}, objstore.OpError("stat", key, objstore.ErrNotFound)
	}
	return objstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	return s.DeleteMany(ctx, []string{key})
}

// DeleteMany removes the objects one by one and then syncs each directory
// it removed from once, which is what makes a removal durable: a garbage
// collection round that deletes thousands of WAL objects syncs the WAL
// directory once, not once an object.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := checkKey("delete", k); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.enter(ctx, "delete", keys[0]); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	// Empty directories are left in place: removing them would race with a
	// concurrent Put creating a file inside. List ignores them.
	dirs := map[string]string{} // directory to sync → a key removed from it
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return objstore.OpError("delete", k, err)
		}
		removed, err := s.delete(k)
		if err != nil {
			return objstore.OpError("delete", k, err)
		}
		if removed {
			dirs[filepath.Dir(s.path(k))] = k
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := syncDir(dir); err != nil {
			return objstore.OpError("delete", dirs[dir], err)
		}
	}
	return nil
}

// delete takes key's object away and reports whether its directory must
// be synced for that to be durable (not when the journal's record of the
// delete is, nor when there was no object).
func (s *Store) delete(key string) (removed bool, err error) {
	path := s.path(key)
	gone := func(err error) bool {
		return missing(err) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) && isDir(path)
	}
	j := s.journal
	j.mu.Lock()
	if j.live(key) {
		// Recovery must not bring the object back: the delete record is
		// durable before the unlink, and replays it.
		defer j.mu.Unlock()
		if err := j.reserve(recordLen(key, nil)); err != nil {
			return false, err
		}
		if err := j.appendLocked(record{kind: recDelete, key: key}); err != nil {
			return false, err
		}
		if err := s.remove(path); err != nil && !gone(err) {
			return false, err
		}
		return false, nil
	}
	j.mu.Unlock()
	if err := s.remove(path); err != nil {
		if gone(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// remove takes the object file at path away: into the pool, to be reused
// (recycle.go), or else by unlink — not os.Remove, which would also rmdir
// an empty directory that shares the object's name.
func (s *Store) remove(path string) error {
	if s.pool.recycle(path) {
		return nil
	}
	return unix.Unlink(path)
}

func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, objstore.OpError("list", prefix, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, objstore.OpError("list", prefix, objstore.ErrClosed)
	}
	out := []objstore.ObjectInfo{}
	// Walk only the deepest directory the prefix names. If that directory
	// part is not itself a valid key, no valid key can start with prefix.
	base := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if objstore.ValidateKey(prefix[:i]) != nil {
			return out, nil
		}
		base = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil // base or a subdirectory vanished: nothing there
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if path == base {
				return nil
			}
			// Descend only where keys could still match the prefix.
			if dk := key + "/"; !strings.HasPrefix(dk, prefix) && !strings.HasPrefix(prefix, dk) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), reservedPrefix) || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if missing(err) {
				return nil // deleted while we walked
			}
			return err
		}
		out = append(out, objstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return out, nil
		}
		return nil, objstore.OpError("list", prefix, err)
	}
	// The walk is lexical per directory, which is not key order: "a/b/c"
	// is walked before "a/b-c" although '-' < '/'.
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Close marks the store closed after in-flight calls finish, makes every
// journaled object durable by itself and removes the journal (journal.go).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	s.pool.shutdown()
	if err := s.journal.close(); err != nil {
		return fmt.Errorf("localdir: close %s: %w", s.root, err)
	}
	return nil
}

// mkdirAllSync creates dir and any missing parents, fsyncing each new
// directory's parent so the new entries survive a crash.
func mkdirAllSync(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: %w", dir, unix.ENOTDIR)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory, making the entries created or removed in it
// durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
