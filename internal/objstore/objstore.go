// Package objstore is the object-storage abstraction slate is built on: a
// flat namespace of immutable-by-convention objects with exactly the
// operations an LSM on object storage needs — put, create-if-absent, get,
// ranged get, list by prefix, delete and stat.
//
// Create-if-absent (PutIfAbsent) is the only conditional primitive moraine
// relies on: slate advances its manifest and fences zombie writers with it,
// so every backend must make it atomic across every process that can reach
// the same store, not just within one process.
//
// Backends: Mem (this package), localdir (a directory), s3 (S3 and
// compatible servers, through blobstore over gocloud.dev/blob), and GCS and
// Azure in builds tagged gcs / azure. objurl opens any of them from a URL.
// Decorators: Counter (operation and byte counts) here, and fault (error,
// latency, ambiguous-write and crash injection). objstoretest holds the
// conformance suite every backend passes and an in-process S3 server.
//
// Errors: every error a backend returns names the operation and the key
// (`get "wal/00000000000000000007": objstore: object not found`) and wraps
// one of the sentinels below, a context error, or the backend's own error.
// Callers branch with errors.Is, never on the text.
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

// ErrClosed is returned (wrapped) by every call after Close.
var ErrClosed = errors.New("objstore: store closed")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is the interface every backend implements. Keys are slash-separated
// relative paths ("wal/00000000000000000001.wal"); they never begin with a
// slash and never contain "." or ".." segments (ValidateKey states the rules;
// a key that breaks them fails with ErrInvalidKey). List prefixes are free
// strings.
//
// Implementations are safe for concurrent use, and copy: the caller may
// reuse a buffer it passed in, and owns every slice it gets back.
//
// Every method honours its context: one that is already done makes the call
// fail with an error wrapping ctx.Err() and without effect. A write whose
// context ends while it is in flight may or may not have happened.
type Store interface {
	// Put stores data under key, replacing any existing object. The object
	// is durable when Put returns nil. Readers see the old or the new
	// object, never a mix.
	Put(ctx context.Context, key string, data []byte) error

	// PutIfAbsent stores data under key only if no object with that key
	// exists; otherwise it returns an error wrapping ErrExists and leaves the
	// existing object untouched. The check and the write are one atomic step
	// for every process that can reach the store: of N concurrent calls on
	// one key, exactly one returns nil. The object is durable when it
	// returns nil.
	//
	// An error other than ErrExists is ambiguous: the object may have been
	// written (a response lost to a timeout, after which a transport retry
	// can even report ErrExists against this caller's own object). A caller
	// that must know reads the object back and compares.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)

	// GetRange returns length bytes starting at offset. A range that runs past
	// the end of the object returns the bytes that exist; an offset past the
	// end returns an empty slice. length < 0 means "to the end". A negative
	// offset fails with ErrInvalidRange; a missing object with ErrNotFound.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)

	// List returns every object whose key begins with prefix, sorted by key
	// (byte order). It is not a snapshot: objects written or deleted while
	// it runs may or may not appear.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// Delete removes the object. Deleting a missing object is not an error.
	// The removal is durable when Delete returns nil.
	Delete(ctx context.Context, key string) error

	// DeleteMany removes the objects keys name, each as Delete would, and
	// all of them are durable when it returns nil. A key that is not valid
	// fails the call before anything is removed; on any other error, any of
	// the objects may be gone. Backends do the removals together where they
	// can (one directory sync for a local directory, requests in parallel
	// to a bucket): a garbage collector deletes thousands at a time.
	DeleteMany(ctx context.Context, keys []string) error

	// Stat returns the object's metadata, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Close releases the store's resources; later calls fail with ErrClosed.
	// Closing twice is harmless. Decorators document whether they close
	// what they wrap.
	Close() error
}
