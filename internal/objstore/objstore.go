// Package objstore is the object-storage abstraction slate is built on: a
// flat namespace of immutable-by-convention objects with exactly the
// operations an LSM on object storage needs — put, create-if-absent, get,
// ranged get, list by prefix, delete and stat.
//
// Create-if-absent (PutIfAbsent) is the only conditional primitive moraine
// relies on: slate advances its manifest and fences zombie writers with it,
// so every backend must make it atomic across every process that can reach
// the same store, not just within one process.
package objstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned (wrapped) when the named object does not exist.
var ErrNotFound = errors.New("objstore: object not found")

// ErrExists is returned (wrapped) by PutIfAbsent when an object with the key
// already exists. Exactly one of several concurrent PutIfAbsent calls on the
// same key succeeds; every other one gets ErrExists.
var ErrExists = errors.New("objstore: object already exists")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("objstore: store closed")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is the interface every backend implements. Keys are slash-separated
// relative paths ("wal/00000000000000000001.wal"); they never begin with a
// slash and never contain "." or ".." segments.
//
// Implementations are safe for concurrent use.
type Store interface {
	// Put stores data under key, replacing any existing object. The object
	// is durable when Put returns nil.
	Put(ctx context.Context, key string, data []byte) error

	// PutIfAbsent stores data under key only if no object with that key
	// exists; otherwise it returns an error wrapping ErrExists and leaves the
	// existing object untouched. The check and the write are one atomic step.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)

	// GetRange returns length bytes starting at offset. A range that runs past
	// the end of the object returns the bytes that exist; an offset past the
	// end returns an empty slice. length < 0 means "to the end".
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)

	// List returns every object whose key begins with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// Delete removes the object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error

	// Stat returns the object's metadata, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Close releases the store's resources.
	Close() error
}
