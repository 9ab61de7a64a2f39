package memcat

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// Txn is one transaction: a pinned catalog version plus its own writes.
type Txn struct {
	writer bool // of a session that wrote before (Begin)
	// deferred: the snapshot is not taken yet (BeginDeferred, Pin);
	// readEarly: View was read while deferred.
	deferred, readEarly bool
	view                *Version // the last View built after a write
	viewOps             int      // len(tx.Ops()) when view was built
	claimed             []string
	db                  *DB
	tx                  *catalog.Txn
	wrote               bool
	// idleSince is when the transaction's last statement ended (Unix
	// nanoseconds), 0 while one runs: how long a lease holder or a
	// claimer has sat idle (leaseExpiryLocked, settleDeadlineLocked).
	idleSince atomic.Int64
}

// Busy marks the start of a statement and Idle its end: the SQL layer
// calls them around each statement of a transaction, so that the pin
// lease lapses, and new snapshots stop waiting for a claimer, only when
// the transaction stops sending requests, not while it runs them (see
// LeaseHold, SettleWait).
func (t *Txn) Busy() { t.idleSince.Store(0) }

// Idle marks the end of a statement (see Busy).
func (t *Txn) Idle() { t.idleSince.Store(time.Now().UnixNano()) }

// View is what the transaction reads: its base plus its own writes.
func (t *Txn) View() *Version {
	if t.deferred {
		t.readEarly = true
	}
	if !t.wrote {
		return t.db.versionOf(t.tx.Base())
	}
	// The builder's version changes in place as the transaction writes, so
	// a Version over it is only good until the next write. Every write
	// appends an op (a failed write changes nothing), so the op count says
	// whether the last view is still current.
	if n := len(t.tx.Ops()); t.view != nil && t.viewOps == n {
		return t.view
	}
	t.view, t.viewOps = newVersion(t.tx.View(), &t.db.defs, t.db.cat.Branch()), len(t.tx.Ops())
	return t.view
}

// Target returns schema.table for a statement about to write it: its
// definition, and rows that the statement must finish reading before its
// first write (catalog.Txn.Peek). Reads of other tables, and any read that
// outlives the statement's writes, go through View.
func (t *Txn) Target(schema, table string) (*Table, bool) {
	ct, err := t.tx.Peek(schema, table)
	if err != nil {
		return nil, false
	}
	return lakeTable(ct, &t.db.defs), true
}

// Base is the published version the transaction started from.
func (t *Txn) Base() *Version { return t.db.versionOf(t.tx.Base()) }

// DB returns the transaction's database.
func (t *Txn) DB() *DB { return t.db }

// HasWrites reports whether anything was staged.
func (t *Txn) HasWrites() bool { return t.tx.Dirty() }

// HasDDL reports whether the transaction staged a change of schemas,
// tables or columns: then what it sees of PostgreSQL's catalogs is its own.
func (t *Txn) HasDDL() bool {
	for _, o := range t.tx.Ops() {
		switch o.Kind {
		case catalog.OpInsert, catalog.OpUpdate, catalog.OpDelete:
		default:
			return true
		}
	}
	return false
}

// Rebase moves a transaction without writes to the newest version (READ
// COMMITTED statements, and the snapshot a REPEATABLE READ transaction takes
// at its first statement).
func (t *Txn) Rebase(ctx context.Context) error {
	if t.tx.Dirty() {
		return nil
	}
	if err := t.admit(ctx); err != nil {
		return err
	}
	t.tx.Rollback()
	t.tx = t.begin()
	t.view = nil
	return nil
}

// Insert stages a new row and returns its ctid.
func (t *Txn) Insert(schema, table string, vals []datum.Value) (int64, error) {
	if err := t.claim(schema, table, vals, nil); err != nil {
		return 0, err
	}
	c, err := t.tx.InsertRow(schema, table, vals)
	if err != nil {
		return 0, err
	}
	t.wrote = true
	return int64(c), nil
}

// Delete stages the removal of the row version at ctid.
func (t *Txn) Delete(schema, table string, ctid int64) error {
	if err := t.tx.DeleteRow(schema, table, catalog.CTID(ctid)); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// Update replaces the row version at ctid by a new version and returns the
// new ctid.
func (t *Txn) Update(schema, table string, ctid int64, vals []datum.Value) (int64, error) {
	tb, err := t.tx.Peek(schema, table) // read before the write; see claim
	if err != nil {
		return 0, err
	}
	if old, ok := tb.Lookup(catalog.CTID(ctid)); ok {
		if err := t.claim(schema, table, vals, old); err != nil {
			return 0, err
		}
	}
	nc, err := t.tx.UpdateRow(schema, table, catalog.CTID(ctid), vals)
	if err != nil {
		return 0, err
	}
	t.wrote = true
	return int64(nc), nil
}

// CreateSchema stages a new schema.
func (t *Txn) CreateSchema(name string) error {
	if err := t.tx.CreateSchema(name); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// CreateTable stages a new empty table.
func (t *Txn) CreateTable(schema, name string, def TableDef) (*Table, error) {
	kd := keyspace.TableDef{Schema: schema, Name: name, PrimaryKey: slices.Clone(def.PK)}
	for _, c := range def.Columns {
		kd.Columns = append(kd.Columns, keyspace.ColumnDef{Name: c.Name, Type: c.Type, NotNull: c.NotNull})
	}
	if err := t.tx.CreateTable(kd); err != nil {
		return nil, err
	}
	t.wrote = true
	tb, err := t.tx.Table(schema, name)
	if err != nil {
		return nil, err
	}
	return lakeTable(tb, nil), nil
}

// DropTable stages the removal of a table.
func (t *Txn) DropTable(schema, name string) error {
	if err := t.tx.DropTable(schema, name); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// AddColumn appends a column, c.Default in every existing row.
func (t *Txn) AddColumn(schema, table string, c Column) error {
	if err := t.tx.AddColumn(schema, table, keyspace.ColumnDef{Name: c.Name, Type: c.Type, NotNull: c.NotNull}, c.Default); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// RenameTable renames a table.
func (t *Txn) RenameTable(schema, from, to string) error {
	if err := t.tx.RenameTable(schema, from, to); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// DropColumn removes a column.
func (t *Txn) DropColumn(schema, table, name string) error {
	if err := t.tx.DropColumn(schema, table, name); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// RenameColumn renames a column.
func (t *Txn) RenameColumn(schema, table, from, to string) error {
	if err := t.tx.RenameColumn(schema, table, from, to); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// claim records the primary key of a row being written as this
// transaction's, failing if another live transaction claimed it first. old
// is the row being updated (nil for an insert): an update that keeps its key
// claims nothing.
func (t *Txn) claim(schema, table string, vals []datum.Value, old datum.Row) error {
	// Peek, not Table: only the definition is read, and freezing the
	// table would make the write that follows copy its pages and nodes.
	tb, err := t.tx.Peek(schema, table)
	if err != nil {
		return err
	}
	def := tb.Def()
	if len(def.PrimaryKey) == 0 {
		return nil
	}
	if old != nil {
		ov, err := old.Decode(tb.Types(), nil)
		if err == nil {
			same := true
			for _, i := range def.PrimaryKey {
				if !datum.Equal(ov[i], vals[i]) {
					same = false
				}
			}
			if same {
				return nil
			}
		}
	}
	var kb strings.Builder
	kb.WriteString(schema + "\x00" + table)
	for _, i := range def.PrimaryKey {
		if i >= len(vals) || vals[i].IsNull() {
			return nil // the catalog reports the NOT NULL violation
		}
		kb.WriteString("\x00" + datum.FormatText(def.Columns[i].Type, vals[i]))
	}
	key := kb.String()
	// PostgreSQL checks a new key against committed rows its snapshot does
	// not see too: a key another transaction committed meanwhile is a
	// unique violation now, not at COMMIT.
	if head, err := t.db.cat.Current().Table(schema, table); err == nil {
		pk := make([]datum.Value, len(def.PrimaryKey))
		for j, i := range def.PrimaryKey {
			pk[j] = vals[i]
		}
		if _, _, found := head.LookupKey(pk); found && !t.tx.Base().Extends(t.db.cat.Current()) {
			return uniqueError(schema, lakeTable(tb, nil), vals)
		}
	}
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if other, ok := db.claims[key]; ok && other != t {
		return uniqueError(schema, lakeTable(tb, nil), vals)
	}
	if db.claims == nil {
		db.claims = map[string]*Txn{}
	}
	db.claims[key] = t
	t.claimed = append(t.claimed, key)
	t.enlist(false)
	return nil
}

// Rollback releases what the transaction claimed; its writes vanish with it.
func (t *Txn) Rollback() {
	t.release()
	t.tx.Rollback()
}

func (t *Txn) release() {
	db := t.db
	db.mu.Lock()
	for _, k := range t.claimed {
		if db.claims[k] == t {
			delete(db.claims, k)
		}
	}
	t.claimed = nil
	w := db.writers[t]
	delete(db.writers, t)
	db.releaseLeaseLocked(t)
	db.mu.Unlock()
	if w != nil {
		close(w.done)
	}
}

// Commit hands the transaction to the catalog, which replays it onto the
// newest version if others committed meanwhile, persists it through the
// commit pipeline and publishes it. A transaction without writes commits
// once what it read is durable.
//
// The transaction stops counting as a write under way (settle) as soon as
// its commit is visible to later writers, before it is durable: they pin
// it and pipeline their commits behind it.
func (t *Txn) Commit(ctx context.Context) error {
	defer t.release()
	if t.tx.Dirty() {
		t.db.mu.Lock()
		t.enlist(true)
		t.db.mu.Unlock()
		// A writer waiting to pin will commit right after this one: the
		// store may hold this commit to write both in one object.
		t.tx.SetFollowed(t.db.admitting.Load() > 0)
	}
	if err := t.tx.CommitThen(ctx, t.release); err != nil {
		return err
	}
	return nil
}
