package catalog

import (
	"bytes"
	"context"
	"fmt"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// OpKind is the kind of a staged operation.
type OpKind uint8

const (
	OpInsert OpKind = iota + 1
	OpUpdate
	OpDelete
	OpCreateSchema
	OpCreateTable
	OpDropTable
	OpAddColumn
	OpRenameColumn
	OpDropColumn
	OpRenameTable
	// OpCreateDatabase and OpDropDatabase are each the only op of their
	// transaction (Server.CreateDatabase, Server.DropDatabase): they change
	// no version, and tell the committer to record or erase the database.
	OpCreateDatabase
	OpDropDatabase
	// OpForkDatabase is the only op of the commit that creates a branch
	// (branch.go).
	OpForkDatabase
)

var opNames = [...]string{"?", "insert", "update", "delete", "create-schema", "create-table", "drop-table", "add-column", "rename-column", "drop-column", "rename-table", "create-database", "drop-database", "fork-database"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", k)
}

// Op is one staged operation of a transaction, in the order it was made.
// The commit pipeline translates row operations into keyspace operations
// (it has the table definition at the base version, or from the preceding
// DDL op, to decode Old and New).
//
//	kind           fields used
//	insert         Schema, Table, NewCTID, New
//	update         Schema, Table, CTID, Old, NewCTID, New
//	delete         Schema, Table, CTID, Old
//	create-schema  Schema, CatalogID
//	create-table   Schema, Table, Def
//	drop-table     Schema, Table, Def (the definition dropped)
//	add-column     Schema, Table, Column (Def, Default)
//	rename-column  Schema, Table, Column (Def.Name: the old name, NewName)
//	drop-column    Schema, Table, Column (Def.Name)
//	rename-table   Schema, Table (the old name), Column (NewName)
//	create-database  (none: the database is the transaction's)
//	drop-database    (none)
//
// CTIDs are those the transaction saw. Rows are the encodings under the
// table's column set at the time of the op.
type Op struct {
	Kind      OpKind
	Schema    string
	Table     string
	CTID      CTID
	NewCTID   CTID
	Old, New  datum.Row
	Def       *keyspace.TableDef
	Column    *ColumnChange
	CatalogID uint32
}

// ColumnChange is what an add-column or rename-column op changes. It is
// kept apart from Op because every DuckLake commit stages a few dozen row
// ops and no column change: an Op is half the size without it.
type ColumnChange struct {
	Def     keyspace.ColumnDef
	Default datum.Value
	NewName string
}

func (o Op) String() string {
	switch o.Kind {
	case OpInsert:
		return fmt.Sprintf("insert %s.%s %s", o.Schema, o.Table, o.NewCTID)
	case OpUpdate:
		return fmt.Sprintf("update %s.%s %s->%s", o.Schema, o.Table, o.CTID, o.NewCTID)
	case OpDelete:
		return fmt.Sprintf("delete %s.%s %s", o.Schema, o.Table, o.CTID)
	case OpCreateSchema:
		return fmt.Sprintf("create-schema %s catalog=%d", o.Schema, o.CatalogID)
	case OpCreateTable:
		return fmt.Sprintf("create-table %s", o.Def)
	case OpDropTable:
		return fmt.Sprintf("drop-table %s.%s", o.Schema, o.Table)
	case OpAddColumn:
		return fmt.Sprintf("add-column %s.%s %s %s", o.Schema, o.Table, o.Column.Def.Name, o.Column.Def.Type)
	case OpRenameColumn:
		return fmt.Sprintf("rename-column %s.%s %s->%s", o.Schema, o.Table, o.Column.Def.Name, o.Column.NewName)
	case OpDropColumn:
		return fmt.Sprintf("drop-column %s.%s %s", o.Schema, o.Table, o.Column.Def.Name)
	case OpRenameTable:
		return fmt.Sprintf("rename-table %s.%s->%s", o.Schema, o.Table, o.Column.NewName)
	}
	return o.Kind.String()
}

// Txn is a REPEATABLE READ transaction over one database: it pins the
// version current at Begin and stages its writes in a private working
// version that its own reads see. A Txn is not safe for concurrent use;
// different Txns are independent.
//
// A failed write returns an error and changes nothing; whether the
// transaction may continue (PostgreSQL aborts it) is the caller's policy.
type Txn struct {
	db       *Database
	base     *Version
	b        *builder // nil until the first write, and while sealed
	sealed   *Version // the writes so far, sealed (Seal); nil once written again
	ops      []Op
	done     bool
	followed bool
	// consumes is the branch a merge commit erases (merge.go); its
	// commit lock is held by the merge.
	consumes *Database
}

// SetFollowed tells the commit that another writer is waiting to commit
// after it (Commit.Followed): the SQL layer knows, the store does not.
func (t *Txn) SetFollowed(followed bool) { t.followed = followed }

// Base returns the version the transaction pinned.
func (t *Txn) Base() *Version { return t.base }

// Database returns the transaction's database.
func (t *Txn) Database() *Database { return t.db }

// View returns the version the transaction's reads see: the pinned version
// plus its staged writes. The result must be used only while no further
// write is made through t (it is then stale, not corrupt: tables returned
// from it stay as they were).
func (t *Txn) View() *Version {
	if t.b == nil {
		if t.sealed != nil {
			return t.sealed
		}
		return t.base
	}
	return t.b.v
}

// Table returns an immutable view of schema.table as the transaction sees
// it now (a later write in the transaction does not change it).
func (t *Txn) Table(schema, name string) (*Table, error) { return t.View().Table(schema, name) }

// Peek returns schema.table as the transaction sees it now, without
// freezing it. It is for a statement that reads the table it writes and
// finishes reading before its first write: a table the transaction has
// written changes in place, so what Peek returned must not be read after
// the transaction's next write. Why not Table: freezing a table the
// transaction owns makes its next write copy every B-tree node on its path,
// and DuckLake's commits update the same stats table many times in a row.
func (t *Txn) Peek(schema, name string) (*Table, error) {
	if t.b == nil {
		return t.View().Table(schema, name)
	}
	return t.b.peek(schema, name)
}

// Schema returns the named schema as the transaction sees it.
func (t *Txn) Schema(name string) (*Schema, bool) { return t.View().Schema(name) }

// Ops returns the staged operations in order. The slice must not be
// modified.
func (t *Txn) Ops() []Op { return t.ops }

// Dirty reports whether the transaction staged anything.
func (t *Txn) Dirty() bool { return len(t.ops) > 0 }

func (t *Txn) writer() (*builder, error) {
	if t.done {
		return nil, ErrTxnDone
	}
	switch {
	case t.b != nil:
	case t.sealed != nil:
		t.b = t.unseal()
	case t.db.branch != nil && !t.db.branch.Writable():
		return nil, errBranchReadOnly(t.db)
	default:
		t.b = newBuilder(t.base)
		if t.ops == nil {
			// A DuckLake data-file commit stages about twenty operations;
			// growing the slice from nothing would copy them five times.
			t.ops = make([]Op, 0, 32)
		}
	}
	return t.b, nil
}

// InsertRow stages an INSERT of one full row (a value per column, in
// physical order) and returns its ctid. A duplicate primary key is an
// *Error with Kind ErrDuplicateKey and Constraint "<table>_pkey".
func (t *Txn) InsertRow(schema, table string, vals []datum.Value) (CTID, error) {
	b, err := t.writer()
	if err != nil {
		return 0, err
	}
	c, row, err := b.insert(schema, table, vals)
	if err != nil {
		return 0, err
	}
	t.ops = append(t.ops, Op{Kind: OpInsert, Schema: schema, Table: table, NewCTID: c, New: row})
	return c, nil
}

// UpdateRow stages an UPDATE of the row at c to the full row vals and
// returns the new version's ctid (PostgreSQL gives every update a new one).
func (t *Txn) UpdateRow(schema, table string, c CTID, vals []datum.Value) (CTID, error) {
	b, err := t.writer()
	if err != nil {
		return 0, err
	}
	nc, old, row, err := b.update(schema, table, c, vals)
	if err != nil {
		return 0, err
	}
	t.ops = append(t.ops, Op{Kind: OpUpdate, Schema: schema, Table: table, CTID: c, NewCTID: nc, Old: old, New: row})
	return nc, nil
}

// DeleteRow stages a DELETE of the row at c.
func (t *Txn) DeleteRow(schema, table string, c CTID) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	old, err := b.delete(schema, table, c)
	if err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpDelete, Schema: schema, Table: table, CTID: c, Old: old})
	return nil
}

// CreateSchema stages CREATE SCHEMA; the schema gets an OID and a catalog
// id from the database's server. IF NOT EXISTS is the caller's business
// (ErrSchemaExists).
func (t *Txn) CreateSchema(name string) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	if _, ok := b.v.schemas[name]; ok {
		return errSchemaExists(name)
	}
	id := t.db.srv.allocCatalogID()
	if _, err := b.createSchema(name, id); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpCreateSchema, Schema: name, CatalogID: id})
	return nil
}

// CreateTable stages CREATE TABLE def (in def.Schema). IF NOT EXISTS is the
// caller's business (ErrTableExists).
func (t *Txn) CreateTable(def keyspace.TableDef) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	tb, err := b.createTable(def)
	if err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpCreateTable, Schema: def.Schema, Table: def.Name, Def: &tb.info.Def})
	return nil
}

// DropTable stages DROP TABLE.
func (t *Txn) DropTable(schema, name string) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	tb, err := b.dropTable(schema, name)
	if err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpDropTable, Schema: schema, Table: name, Def: &tb.info.Def})
	return nil
}

// AddColumn stages ALTER TABLE … ADD COLUMN col [DEFAULT dflt]. Existing
// rows keep their ctids and read the default (NULL when dflt is NULL).
func (t *Txn) AddColumn(schema, table string, col keyspace.ColumnDef, dflt datum.Value) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	if err := b.addColumn(schema, table, col, dflt); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpAddColumn, Schema: schema, Table: table, Column: &ColumnChange{Def: col, Default: dflt}})
	return nil
}

// RenameColumn stages ALTER TABLE … RENAME COLUMN from TO to.
func (t *Txn) RenameColumn(schema, table, from, to string) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	if err := b.renameColumn(schema, table, from, to); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpRenameColumn, Schema: schema, Table: table, Column: &ColumnChange{Def: keyspace.ColumnDef{Name: from}, NewName: to}})
	return nil
}

// RenameTable stages ALTER TABLE from RENAME TO to.
func (t *Txn) RenameTable(schema, from, to string) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	if err := b.renameTable(schema, from, to); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpRenameTable, Schema: schema, Table: from, Column: &ColumnChange{NewName: to}})
	return nil
}

// DropColumn stages ALTER TABLE … DROP COLUMN name. Existing rows keep
// their ctids and lose the column's value.
func (t *Txn) DropColumn(schema, table, name string) error {
	b, err := t.writer()
	if err != nil {
		return err
	}
	if err := b.dropColumn(schema, table, name); err != nil {
		return err
	}
	t.ops = append(t.ops, Op{Kind: OpDropColumn, Schema: schema, Table: table, Column: &ColumnChange{Def: keyspace.ColumnDef{Name: name}}})
	return nil
}

// Commit makes the transaction's writes the database's current version
// (through the server's Committer when one is configured). A transaction
// that wrote nothing commits trivially. After Commit, the Txn is done
// whatever the outcome.
//
// A transaction without writes that read a version not yet durable
// (BeginLatest) returns once that version is durable, or with an error if
// it never will be: what it read must not be acknowledged before then.
func (t *Txn) Commit(ctx context.Context) error { return t.CommitThen(ctx, nil) }

// CommitThen is Commit, calling published (if set and the transaction
// wrote) as soon as the commit is visible to later writers, which with a
// Committer is before it is durable and before CommitThen returns.
func (t *Txn) CommitThen(ctx context.Context, published func()) error {
	if t.done {
		return ErrTxnDone
	}
	t.done = true
	if len(t.ops) == 0 {
		return t.db.WaitDurable(ctx, t.base)
	}
	if err := ctx.Err(); err != nil {
		t.drop()
		return err
	}
	return t.db.commit(ctx, t, published)
}

// Rollback discards the transaction's writes. It is idempotent.
func (t *Txn) Rollback() {
	t.done = true
	t.drop()
}

// drop discards the staged writes; a sealed version of them fails.
func (t *Txn) drop() {
	t.b = nil
	if t.sealed != nil {
		t.sealed.resolve(false)
		t.sealed = nil
	}
}

// Apply replays ops (a transaction's Ops, whose base may be an older
// version) on v and returns the next version; v is unchanged. On v equal to
// the transaction's base the result has the same ctids the transaction saw.
// On a newer v, inserted rows get v's next ctids, and a row the ops update
// or delete must still be at its ctid with the same bytes, else the result
// is an ErrSerialization error (PostgreSQL's "could not serialize access due
// to concurrent update" under REPEATABLE READ). Primary keys are checked
// against v.
func (v *Version) Apply(ops []Op) (*Version, error) {
	b := newBuilder(v)
	// moved maps a ctid the transaction saw to the one it has in the result.
	type tkey struct {
		schema, table string
		c             CTID
	}
	moved := map[tkey]CTID{}
	at := func(o *Op) (CTID, bool) {
		c, ok := moved[tkey{o.Schema, o.Table, o.CTID}]
		if ok {
			return c, true
		}
		return o.CTID, false
	}
	decode := func(o *Op, r datum.Row) ([]datum.Value, error) {
		t, err := b.peek(o.Schema, o.Table)
		if err != nil {
			return nil, err
		}
		vals, err := r.Decode(t.info.types, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: op %s: %v", ErrCorrupt, o, err)
		}
		return vals, nil
	}
	// checkOld verifies the row the op saw is still there, unchanged.
	checkOld := func(o *Op, c CTID, mine bool) error {
		if mine {
			return nil
		}
		t, err := b.peek(o.Schema, o.Table)
		if err != nil {
			return err
		}
		r, ok := t.Lookup(c)
		if !ok || !bytes.Equal(r, o.Old) {
			return errSerialization(o.Table, c)
		}
		return nil
	}
	for i := range ops {
		o := &ops[i]
		var err error
		switch o.Kind {
		case OpInsert:
			var vals []datum.Value
			if vals, err = decode(o, o.New); err == nil {
				var c CTID
				if c, _, err = b.insert(o.Schema, o.Table, vals); err == nil && c != o.NewCTID {
					moved[tkey{o.Schema, o.Table, o.NewCTID}] = c
				}
			}
		case OpUpdate:
			c, mine := at(o)
			if err = checkOld(o, c, mine); err != nil {
				break
			}
			var vals []datum.Value
			if vals, err = decode(o, o.New); err == nil {
				var nc CTID
				if nc, _, _, err = b.update(o.Schema, o.Table, c, vals); err == nil && nc != o.NewCTID {
					moved[tkey{o.Schema, o.Table, o.NewCTID}] = nc
				}
			}
		case OpDelete:
			c, mine := at(o)
			if err = checkOld(o, c, mine); err == nil {
				_, err = b.delete(o.Schema, o.Table, c)
			}
		case OpCreateSchema:
			_, err = b.createSchema(o.Schema, o.CatalogID)
		case OpCreateTable:
			_, err = b.createTable(*o.Def)
		case OpDropTable:
			_, err = b.dropTable(o.Schema, o.Table)
		case OpAddColumn:
			err = b.addColumn(o.Schema, o.Table, o.Column.Def, o.Column.Default)
		case OpRenameColumn:
			err = b.renameColumn(o.Schema, o.Table, o.Column.Def.Name, o.Column.NewName)
		case OpDropColumn:
			err = b.dropColumn(o.Schema, o.Table, o.Column.Def.Name)
		case OpRenameTable:
			err = b.renameTable(o.Schema, o.Table, o.Column.NewName)
		case OpCreateDatabase, OpDropDatabase, OpForkDatabase:
			// The database's existence is the server's registry, not a
			// version's content.
		default:
			err = fmt.Errorf("catalog: unknown op kind %d", o.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("apply op %d (%s): %w", i, o, err)
		}
	}
	return b.finish(), nil
}
