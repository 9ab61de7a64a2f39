package slate

import (
	"errors"
	"fmt"
)

// ErrFenced is returned when a newer writer has opened the same store: this
// DB's next WAL object or manifest would collide with the newer writer's, so
// it stops writing for good. The caller must not retry on this handle.
var ErrFenced = errors.New("slate: writer fenced by a newer writer")

// ErrCorrupt marks a stored object that fails its checksum, is torn, is
// malformed, or is missing although the manifest or WAL sequence says it must
// exist. It is always wrapped with the object's name. slate never returns
// data from an object it could not verify.
var ErrCorrupt = errors.New("slate: corrupt or missing object")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("slate: db closed")

// ErrFailed is returned (wrapped together with the original cause) by every
// write after a WAL write failed. The outcome of the failed write is unknown,
// so the DB refuses further writes; reopen it to recover.
var ErrFailed = errors.New("slate: db failed after a write error; reopen it")

// ErrReadOnly is returned by write operations on a reader.
var ErrReadOnly = errors.New("slate: read-only db")

// corruptf wraps ErrCorrupt with the object name and a reason.
func corruptf(object, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", object, fmt.Sprintf(format, args...), ErrCorrupt)
}

// ErrNotFound is returned by Get when the key has no live value.
var ErrNotFound = errors.New("slate: key not found")

// errRetry means a manifest update lost a race with our own earlier,
// ambiguous attempt; the caller re-plans against the adopted manifest.
var errRetry = errors.New("slate: manifest changed; retry")

// ErrNoDB is returned by OpenReader when the store holds no database yet.
var ErrNoDB = errors.New("slate: the store is empty (no manifest: no writer has opened it)")
