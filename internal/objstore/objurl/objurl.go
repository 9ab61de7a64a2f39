// Package objurl opens an objstore.Store from a URL, the form in which
// stores appear in flags and configuration:
//
//	mem://                 a fresh, empty in-memory store
//	mem://name             a process-wide in-memory store shared by every
//	                       Open of the same name (tests "restart" on it)
//	file:///abs/path       a local directory (created if missing)
//	file://./rel/path      a directory relative to the working directory
//	s3://bucket/prefix?endpoint=…&region=…&use_path_style=true
//	                       S3 or an S3-compatible server (see package s3)
//	gs://bucket/prefix     Google Cloud Storage, in builds with -tags gcs
//	azblob://container/prefix
//	                       Azure Blob Storage, in builds with -tags azure
//
// An unknown scheme is an error that lists the schemes this build knows.
package objurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
	"github.com/moraine-db/moraine/internal/objstore/s3"
)

// ErrUnknownScheme is returned (wrapped) for a URL whose scheme no backend
// in this build handles.
var ErrUnknownScheme = errors.New("objurl: unknown object store scheme")

// Opener opens a store for a parsed URL of its scheme.
type Opener func(ctx context.Context, raw string, u *url.URL) (objstore.Store, error)

var openers = map[string]Opener{
	"mem":  openMem,
	"file": openFile,
	"s3": func(ctx context.Context, raw string, _ *url.URL) (objstore.Store, error) {
		return s3.OpenURL(ctx, raw)
	},
}

// register adds a scheme; build-tagged files call it from init.
func register(scheme string, o Opener) {
	if _, dup := openers[scheme]; dup {
		panic("objurl: scheme registered twice: " + scheme)
	}
	openers[scheme] = o
}

// Schemes lists the schemes this build can open, sorted.
func Schemes() []string {
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the store raw names.
func Open(ctx context.Context, raw string) (objstore.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("objurl: parse %q: %w", raw, err)
	}
	open, ok := openers[u.Scheme]
	if !ok {
		hint := ""
		if u.Scheme == "" {
			hint = fmt.Sprintf("; a directory is a file:// URL, e.g. file://%s", raw)
		}
		return nil, fmt.Errorf("%w %q (this build knows %s)%s", ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "), hint)
	}
	// The caller names the store: its errors do not repeat the URL.
	return open(ctx, raw, u)
}

func noQuery(u *url.URL) error {
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s URLs take no parameters", u.Scheme)
	}
	return nil
}

// FilePath returns the directory a file:// URL names.
func FilePath(u *url.URL) (string, error) {
	if err := noQuery(u); err != nil {
		return "", err
	}
	var p string
	switch {
	case u.Opaque != "": // file:rel/dir
		p = u.Opaque
	case u.Host == "" || u.Host == "localhost": // file:///abs/dir
		p = u.Path
	case u.Host == "." || u.Host == "..": // file://./rel/dir
		p = u.Host + u.Path
	default:
		return "", fmt.Errorf("file URL with host %q: use file:///abs/path or file://./rel/path", u.Host)
	}
	if p == "" {
		return "", errors.New("file URL without a path")
	}
	return filepath.FromSlash(p), nil
}

func openFile(_ context.Context, _ string, u *url.URL) (objstore.Store, error) {
	p, err := FilePath(u)
	if err != nil {
		return nil, err
	}
	return localdir.Open(p)
}

// Create is Open, except that a file:// store's directory is created if it
// does not exist (other schemes have nothing to create: a bucket is made
// by its owner, a prefix needs no making).
func Create(ctx context.Context, raw string) (objstore.Store, error) {
	if u, err := url.Parse(raw); err == nil && u.Scheme == "file" {
		p, err := FilePath(u)
		if err != nil {
			return nil, err
		}
		return localdir.Create(p)
	}
	return Open(ctx, raw)
}

// shared holds the named in-memory stores.
var shared struct {
	sync.Mutex
	stores map[string]*objstore.Mem
}

func openMem(_ context.Context, _ string, u *url.URL) (objstore.Store, error) {
	if err := noQuery(u); err != nil {
		return nil, err
	}
	name := u.Host + u.Path
	if u.Opaque != "" {
		name = u.Opaque
	}
	if name == "" {
		return objstore.NewMem(), nil
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.stores == nil {
		shared.stores = map[string]*objstore.Mem{}
	}
	m, ok := shared.stores[name]
	if !ok {
		m = objstore.NewMem()
		shared.stores[name] = m
	}
	return &handle{Store: m}, nil
}

// ForgetMem drops the named in-memory store, so the next mem://name starts
// empty. Handles already open keep working on the old store.
func ForgetMem(name string) {
	shared.Lock()
	defer shared.Unlock()
	delete(shared.stores, name)
}

// handle is one Open of a shared store: closing it closes only the handle,
// so other handles and later Opens still reach the objects.
type handle struct {
	objstore.Store
	mu     sync.RWMutex
	closed bool
}

// check returns ErrClosed once the handle is closed.
func (h *handle) check(op, key string) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return objstore.OpError(op, key, objstore.ErrClosed)
	}
	return nil
}

func (h *handle) Put(ctx context.Context, key string, data []byte) error {
	if err := h.check("put", key); err != nil {
		return err
	}
	return h.Store.Put(ctx, key, data)
}

func (h *handle) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := h.check("put-if-absent", key); err != nil {
		return err
	}
	return h.Store.PutIfAbsent(ctx, key, data)
}

func (h *handle) Get(ctx context.Context, key string) ([]byte, error) {
	if err := h.check("get", key); err != nil {
		return nil, err
	}
	return h.Store.Get(ctx, key)
}

func (h *handle) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := h.check("get-range", key); err != nil {
		return nil, err
	}
	return h.Store.GetRange(ctx, key, offset, length)
}

func (h *handle) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := h.check("list", prefix); err != nil {
		return nil, err
	}
	return h.Store.List(ctx, prefix)
}

func (h *handle) Delete(ctx context.Context, key string) error {
	if err := h.check("delete", key); err != nil {
		return err
	}
	return h.Store.Delete(ctx, key)
}

func (h *handle) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		if err := h.check("delete", keys[0]); err != nil {
			return err
		}
	}
	return h.Store.DeleteMany(ctx, keys)
}

func (h *handle) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := h.check("stat", key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return h.Store.Stat(ctx, key)
}

func (h *handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}
