// Package server wires moraine together: configuration, the object store,
// the slate store, the resident catalog loaded from it, the commit pipeline,
// the SQL executor and the PostgreSQL wire server, plus lifecycle (signals,
// clean shutdown, reopen after a store failure) and observability.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/localdir"
	"github.com/moraine-db/moraine/internal/objstore/objurl"
	"github.com/moraine-db/moraine/internal/pgcode"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

// Stack is the storage side of a running moraine: the object store, the KV
// store on it, the catalog loaded from it and (for a writer) the commit
// pipeline that persists the catalog's commits.
type Stack struct {
	Store objstore.Store
	KV    *slate.DB
	Cat   *catalog.Server
	Pipe  *commit.Pipeline // nil on a replica
	// Seq is the store sequence the catalog was loaded at.
	Seq uint64
	// followed is the store sequence a replica's catalog reflects (Seq,
	// then whatever follow last loaded).
	followed atomic.Uint64
	// closers release what the stack's commit path holds besides the
	// store (the row-id hold's data-path opener), after the store closes.
	closers []func() error
}

// StackOptions configure OpenStack.
type StackOptions struct {
	Replica bool
	// Create makes a file:// store's directory if it does not exist.
	Create bool
	// Takeover opens the store for writing even while another writer is
	// alive on it (it is fenced); otherwise such a store is refused with
	// ErrStoreHeld (holder.go). HeldWatch is how long a heartbeat is
	// watched (0: heartbeatWatch).
	Takeover  bool
	HeldWatch time.Duration
	// Name is the store as errors name it (its URL, credentials redacted).
	Name   string
	Slate  slate.Options
	Commit commit.Options
	Log    *slog.Logger
	// Metrics, when set, instruments the object store.
	Metrics *Metrics
}

// OpenStack opens the store at url as its writer (fencing any previous
// writer) or, with Replica, as a read-only follower, and loads the catalog.
func OpenStack(ctx context.Context, url string, opts StackOptions) (*Stack, error) {
	open := objurl.Open
	if opts.Create {
		open = objurl.Create
	}
	store, err := open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", url, err)
	}
	if ld, ok := store.(*localdir.Store); ok && opts.Log != nil {
		if r := ld.Recovered(); r.Segments > 0 {
			// A process that had the directory open died without closing
			// it; its journal was replayed (docs/objstore.md).
			opts.Log.Warn("local store: replayed the journal of a process that did not close the store",
				"segments", r.Segments, "records", r.Records, "restored", r.Restored, "deleted", r.Deleted,
				"skipped_live", r.Skipped)
		}
	}
	if opts.Slate.WALInFlight == 0 {
		opts.Slate.WALInFlight = walInFlightFor(store)
	}
	if opts.Metrics != nil {
		store = &instrumentedStore{Store: store, m: opts.Metrics}
	}
	if opts.Name == "" {
		opts.Name = storeName(url)
	}
	st, err := OpenStackOn(ctx, store, opts)
	if err != nil {
		store.Close()
		return nil, err
	}
	return st, nil
}

// walInFlightFor is the default Options.WALInFlight for a store. A local
// directory writes a WAL object in well under a millisecond, and its
// journal serializes the writes anyway: one at a time, each group commit
// gathering what arrived during the last. On an object store a PUT takes
// tens of milliseconds, and with one at a time every commit waits for the
// PUT under way and then its own.
func walInFlightFor(store objstore.Store) int {
	if _, local := store.(*localdir.Store); local {
		return 1
	}
	return slate.MaxWALInFlight
}

// logAndSlate are the options' logger (one that discards when unset) and
// their slate options, whose messages go to that logger.
func (o StackOptions) logAndSlate() (*slog.Logger, slate.Options) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	so := o.Slate
	// A branch record pins the store as of its own seq: the branch reads
	// its parent's catalogs there (keyspace.Branch).
	so.PinPrefix, so.PinValue = keyspace.BranchPrefix(), keyspace.BranchBase
	if so.Logf == nil {
		so.Logf = func(format string, args ...any) { log.Warn("store: " + fmt.Sprintf(format, args...)) }
	}
	return log, so
}

// OpenStackOn is OpenStack over an already open object store (tests, tools).
func OpenStackOn(ctx context.Context, store objstore.Store, opts StackOptions) (*Stack, error) {
	log, so := opts.logAndSlate()
	var kv *slate.DB
	var err error
	start := time.Now()
	if opts.Replica {
		if kv, err = slate.OpenReader(ctx, store, so); err == nil {
			// Before the load: its snapshot is then within the record,
			// and the replica follows commit by commit from it (follow.go).
			kv.RecordCommitted()
		}
	} else {
		if !opts.Takeover {
			watch := opts.HeldWatch
			if watch <= 0 {
				watch = heartbeatWatch
			}
			if err := checkNotHeld(ctx, store, watch); err != nil {
				return nil, err
			}
		}
		if err := checkCreateIfAbsent(ctx, store, opts.Name); err != nil {
			return nil, err
		}
		kv, err = slate.Open(ctx, store, so)
	}
	if err != nil {
		return nil, fmt.Errorf("open slate: %w", err)
	}
	st := &Stack{Store: store, KV: kv}
	restoreGC := boostGCForLoad()
	err = st.load(ctx, opts)
	restoreGC()
	if err != nil {
		kv.Close(context.Background())
		return nil, err
	}
	if !opts.Replica && len(st.Cat.Databases()) == 0 {
		if err := st.createDefaultDatabases(ctx); err != nil {
			kv.Close(context.Background())
			return nil, err
		}
	}
	log.Info("catalog loaded", "store_seq", st.Seq, "databases", len(st.Cat.Databases()), "elapsed", time.Since(start).Round(time.Millisecond))
	return st, nil
}

// load builds the catalog (and primes the pipeline) from one consistent
// snapshot of the store.
func (st *Stack) load(ctx context.Context, opts StackOptions) error {
	snap, err := st.KV.Snapshot()
	if err != nil {
		return fmt.Errorf("load catalog: %w", err)
	}
	defer snap.Close()
	copts := catalog.Options{Follow: opts.Replica}
	if !opts.Replica {
		co := opts.Commit
		co.CheckNew = checkNewCatalog
		st.Pipe = commit.New(st.KV, co)
		copts.Committer = st.Pipe
	}
	copts.ReadAt = st.readAt
	copts.BranchSeq = commit.BranchSeq(st.KV)
	it := snap.ScanPrefix(ctx, nil)
	cat, err := catalog.Load(ctx, it, copts)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("load catalog: %w", err)
	}
	if st.Pipe != nil {
		if err := st.Pipe.PrimeLoaded(ctx, cat, snap); err != nil {
			return fmt.Errorf("load catalog: %w", err)
		}
	}
	st.Cat = cat
	st.Seq = snap.Seq()
	st.followed.Store(st.Seq)
	return nil
}

// readAt reads the store as a branch record pins it (catalog.ReadAt).
func (st *Stack) readAt(ctx context.Context, seq uint64, prefix []byte) (catalog.Iterator, func() error, error) {
	return commit.PinnedReader(st.KV.SnapshotAt)(ctx, seq, prefix)
}

// checkNewCatalog refuses a commit that creates an inconsistent DuckLake
// catalog (an import of a broken one): the state it leaves must pass
// moraine verify, as every later commit keeps it passing step by step.
func checkNewCatalog(_ context.Context, c *commit.StoredCatalog) error {
	st, err := verify.FromStored(c)
	if err != nil {
		return &commit.Error{Kind: commit.ErrShape, Code: pgcode.InvalidTextRepresentation, Message: "the new catalog does not decode: " + err.Error()}
	}
	vs := verify.Check(st)
	if len(vs) == 0 {
		return nil
	}
	msgs := make([]string, 0, 3)
	for _, v := range vs[:min(len(vs), 3)] {
		msgs = append(msgs, string(v.Kind)+": "+v.Detail)
	}
	more := ""
	if len(vs) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(vs)-3)
	}
	return &commit.Error{Kind: commit.ErrIntegrity, Code: pgcode.IntegrityConstraintViolation,
		Message: fmt.Sprintf("the new DuckLake catalog is inconsistent (moraine verify): %s%s", strings.Join(msgs, "; "), more)}
}

// DefaultDatabases are the databases a writer creates in a store that
// holds none: PostgreSQL's maintenance database, where tools such as
// createdb and dropdb connect, and the lake the quick start attaches.
var DefaultDatabases = []string{"postgres", "lake"}

func (st *Stack) createDefaultDatabases(ctx context.Context) error {
	for _, name := range DefaultDatabases {
		if _, err := st.Cat.CreateDatabase(ctx, name); err != nil {
			return fmt.Errorf("create database %q: %w", name, err)
		}
	}
	return nil
}

// Close closes the KV store (flushing it, for a writer) and the object store.
func (st *Stack) Close(ctx context.Context) error {
	err := st.KV.Close(ctx)
	if cerr := st.Store.Close(); err == nil && cerr != nil && !errors.Is(cerr, objstore.ErrClosed) {
		err = cerr
	}
	for _, c := range st.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	return err
}
