package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/objstore"
)

// ErrNoCreateIfAbsent is returned when the store does not honour
// create-if-absent.
var ErrNoCreateIfAbsent = errors.New("the object store does not honour create-if-absent")

// checkCreateIfAbsent proves, before a writer opens the store, that the
// store refuses a second create of the same key. The store's atomicity
// rests on it: the manifest advances, and zombie writers are fenced, by
// create-if-absent. An S3-compatible server that ignores If-None-Match
// would let two writers both "win" — so a writer refuses such a store
// outright. It costs two PUTs and a DELETE at a writer's start.
func checkCreateIfAbsent(ctx context.Context, store objstore.Store, name string) error {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	key := "writer/probe-" + hex.EncodeToString(nonce[:])
	if err := store.PutIfAbsent(ctx, key, []byte("1")); err != nil {
		return fmt.Errorf("probe create-if-absent: %w", err)
	}
	defer store.Delete(context.WithoutCancel(ctx), key)
	err := store.PutIfAbsent(ctx, key, []byte("2"))
	switch {
	case errors.Is(err, objstore.ErrExists):
		return nil
	case err != nil:
		return fmt.Errorf("probe create-if-absent: %w", err)
	}
	return fmt.Errorf("%w: a second create of %s at %s succeeded where it must fail; moraine's writer fencing and manifest rest on it. "+
		"Use a server that supports conditional writes (If-None-Match: * on PUT; AWS S3 does, as do MinIO and most S3-compatible servers of recent versions), "+
		"or check the store URL's endpoint setting", ErrNoCreateIfAbsent, key, name)
}
