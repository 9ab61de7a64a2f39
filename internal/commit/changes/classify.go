package changes

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrConflict is matched (errors.Is) by every *Conflict.
var ErrConflict = errors.New("conflict")

// Conflict is a true conflict under DuckLake's matrix (CheckForConflicts,
// docs/reference/ducklake-catalog-protocol.md §4.4): the transaction must not retry on the
// newer base. Its message contains "conflict" (DuckLake and its retry loop
// scan for that word) and names the class, e.g.
//
//	Transaction conflict - attempting to insert into table 3 but another transaction has dropped it
type Conflict struct {
	Mine   Entry // the entry of this transaction that conflicts
	Theirs Entry // the committed entry it conflicts with
}

func (c *Conflict) Error() string {
	return "Transaction conflict - " + c.Against("another transaction")
}

// Against describes the conflict with who as the author of Theirs:
// "attempting to insert into table 3 but <who> has dropped table 3".
func (c *Conflict) Against(who string) string {
	return "attempting to " + mineAction(c.Mine) + " but " + who + " has " + theirAction(c.Mine, c.Theirs)
}

// Class names the conflict's kind by the two entries' kinds, without their
// ids and names ("inserted_into_table / dropped_table"): a bounded set, for
// counting conflicts by class.
func (c *Conflict) Class() string { return c.Mine.Kind.String() + " / " + c.Theirs.Kind.String() }

// Is makes errors.Is(err, ErrConflict) true for any *Conflict.
func (c *Conflict) Is(target error) bool { return target == ErrConflict }

// SchemaNames maps schema ids to names as of the transaction's base
// snapshot. Classification needs it for the matrix rows that compare a schema
// dropped by id with an object created by (schema) name. A schema missing
// from the map (for example one created by this very transaction) cannot
// have been dropped by anyone else, so those rows then never fire.
type SchemaNames map[int64]string

func (m SchemaNames) idOf(name string) (int64, bool) {
	for id, n := range m {
		if n == name {
			return id, true
		}
	}
	return 0, false
}

type idKey struct {
	kind Kind
	id   int64
}

type nameKey struct {
	kind         Kind
	schema, name string
}

// index is theirs, arranged for lookups.
type index struct {
	ids   map[idKey]Entry
	names map[nameKey]Entry
	// createdIn lists, per schema name, one table/view created in it.
	createdIn map[string]Entry
}

func newIndex(theirs Set) *index {
	ix := &index{ids: map[idKey]Entry{}, names: map[nameKey]Entry{}, createdIn: map[string]Entry{}}
	for _, e := range theirs {
		if e.Kind.HasID() {
			if _, dup := ix.ids[idKey{e.Kind, e.ID}]; !dup {
				ix.ids[idKey{e.Kind, e.ID}] = e
			}
			continue
		}
		k := e.Kind
		// Tables and views share one namespace per schema.
		if k == CreatedView {
			k = CreatedTable
		}
		if _, dup := ix.names[nameKey{k, e.Schema, e.Name}]; !dup {
			ix.names[nameKey{k, e.Schema, e.Name}] = e
		}
		if k == CreatedTable {
			if _, dup := ix.createdIn[e.Schema]; !dup {
				ix.createdIn[e.Schema] = e
			}
		}
	}
	return ix
}

// firstID returns theirs' entry of one of kinds carrying id, if any.
func (ix *index) firstID(id int64, kinds ...Kind) (Entry, bool) {
	for _, k := range kinds {
		if e, ok := ix.ids[idKey{k, id}]; ok {
			return e, true
		}
	}
	return Entry{}, false
}

// Classify applies DuckLake's conflict matrix to mine (this transaction's
// change set) against theirs (the union of the change sets committed after
// its base snapshot). It returns nil when the transaction may retry on the
// newer base, or a *Conflict for the first conflicting entry of mine.
//
// Not conflicts, by design: two inserts into one table (the retry rebases
// its row-id ranges); insert vs. flush; insert vs. compaction (appends never
// abort a compaction, and a compaction never aborts an append); anything vs.
// theirs' legacy compacted_table. When both sides deleted from the same
// table DuckLake additionally runs a file-level overlap check that needs
// catalog rows; DeleteOverlap names the tables that need it.
func Classify(mine, theirs Set, schemas SchemaNames) error {
	if len(mine) == 0 || len(theirs) == 0 {
		return nil
	}
	ix := newIndex(theirs)
	for _, m := range mine {
		if t, ok := conflictFor(m, ix, schemas); ok {
			return &Conflict{Mine: m, Theirs: t}
		}
	}
	return nil
}

// ClassifyAll is Classify reporting every entry of mine that conflicts,
// each with the first entry of theirs it conflicts with.
func ClassifyAll(mine, theirs Set, schemas SchemaNames) []*Conflict {
	if len(mine) == 0 || len(theirs) == 0 {
		return nil
	}
	ix := newIndex(theirs)
	var out []*Conflict
	for _, m := range mine {
		if t, ok := conflictFor(m, ix, schemas); ok {
			out = append(out, &Conflict{Mine: m, Theirs: t})
		}
	}
	return out
}

func conflictFor(m Entry, ix *index, schemas SchemaNames) (Entry, bool) {
	switch m.Kind {
	case DroppedTable:
		return ix.firstID(m.ID, DroppedTable)
	case DroppedView:
		return ix.firstID(m.ID, DroppedView)
	case DroppedScalarMacro:
		return ix.firstID(m.ID, DroppedScalarMacro)
	case DroppedTableMacro:
		return ix.firstID(m.ID, DroppedTableMacro)
	case DroppedSchema:
		if t, ok := ix.firstID(m.ID, DroppedSchema); ok {
			return t, true
		}
		if name, ok := schemas[m.ID]; ok {
			if t, ok := ix.createdIn[name]; ok {
				return t, true
			}
		}
	case CreatedSchema:
		t, ok := ix.names[nameKey{CreatedSchema, "", m.Name}]
		return t, ok
	case CreatedTable, CreatedView:
		if t, ok := droppedSchemaNamed(m.Schema, ix, schemas); ok {
			return t, true
		}
		t, ok := ix.names[nameKey{CreatedTable, m.Schema, m.Name}]
		return t, ok
	case CreatedScalarMacro, CreatedTableMacro:
		if t, ok := droppedSchemaNamed(m.Schema, ix, schemas); ok {
			return t, true
		}
		t, ok := ix.names[nameKey{m.Kind, m.Schema, m.Name}]
		return t, ok
	case InsertedIntoTable, InlinedInsert:
		return ix.firstID(m.ID, DroppedTable, AlteredTable, DeletedFromTable, InlinedDelete)
	case DeletedFromTable:
		return ix.firstID(m.ID, DroppedTable, AlteredTable, MergeAdjacent, RewriteDelete,
			InsertedIntoTable, InlinedInsert)
	case InlinedDelete:
		return ix.firstID(m.ID, DroppedTable, AlteredTable, InlinedDelete, InlineFlush,
			InsertedIntoTable, InlinedInsert)
	case InlineFlush:
		return ix.firstID(m.ID, DroppedTable, InlinedDelete, InlineFlush)
	case MergeAdjacent, RewriteDelete:
		return ix.firstID(m.ID, DroppedTable, DeletedFromTable, MergeAdjacent, RewriteDelete)
	case AlteredTable:
		return ix.firstID(m.ID, DroppedTable, AlteredTable)
	case AlteredView:
		return ix.firstID(m.ID, DroppedView, AlteredView)
	case CompactedTable:
		// Legacy entry, never written by a current writer: no row of the
		// matrix applies to it on either side.
	}
	return Entry{}, false
}

func droppedSchemaNamed(name string, ix *index, schemas SchemaNames) (Entry, bool) {
	id, ok := schemas.idOf(name)
	if !ok {
		return Entry{}, false
	}
	return ix.firstID(id, DroppedSchema)
}

// DeleteOverlap returns the tables both mine and theirs deleted from (by
// delete files or dropped files). For those DuckLake runs its file-level
// check (docs/reference/ducklake-catalog-protocol.md §3.7): a data file this transaction
// deletes from or drops that another transaction also did is a conflict.
func DeleteOverlap(mine, theirs Set) []int64 {
	ix := newIndex(theirs)
	var out []int64
	for _, id := range mine.Tables(DeletedFromTable) {
		if _, ok := ix.ids[idKey{DeletedFromTable, id}]; ok {
			out = append(out, id)
		}
	}
	return out
}

func mineAction(m Entry) string {
	id := strconv.FormatInt(m.ID, 10)
	switch m.Kind {
	case DroppedSchema:
		return "drop schema " + id
	case DroppedTable:
		return "drop table " + id
	case DroppedView:
		return "drop view " + id
	case DroppedScalarMacro:
		return "drop scalar macro " + id
	case DroppedTableMacro:
		return "drop table macro " + id
	case CreatedSchema:
		return fmt.Sprintf("create schema %q", m.Name)
	case CreatedTable:
		return fmt.Sprintf("create table %q in schema %q", m.Name, m.Schema)
	case CreatedView:
		return fmt.Sprintf("create view %q in schema %q", m.Name, m.Schema)
	case CreatedScalarMacro:
		return fmt.Sprintf("create scalar macro %q in schema %q", m.Name, m.Schema)
	case CreatedTableMacro:
		return fmt.Sprintf("create table macro %q in schema %q", m.Name, m.Schema)
	case InsertedIntoTable:
		return "insert into table " + id
	case InlinedInsert:
		return "insert inlined rows into table " + id
	case DeletedFromTable:
		return "delete from table " + id
	case InlinedDelete:
		return "delete inlined rows from table " + id
	case InlineFlush:
		return "flush inlined data of table " + id
	case MergeAdjacent:
		return "compact (merge adjacent files of) table " + id
	case RewriteDelete:
		return "compact (rewrite data files of) table " + id
	case AlteredTable:
		return "alter table " + id
	case AlteredView:
		return "alter view " + id
	}
	return m.String()
}

func theirAction(m, t Entry) string {
	id := strconv.FormatInt(t.ID, 10)
	switch t.Kind {
	case DroppedSchema:
		if m.Kind == DroppedSchema {
			return "dropped it"
		}
		return "dropped schema " + id
	case DroppedTable, DroppedView, DroppedScalarMacro, DroppedTableMacro:
		return "dropped it"
	case CreatedSchema:
		return "created a schema with the same name"
	case CreatedTable, CreatedView:
		if m.Kind == DroppedSchema {
			return fmt.Sprintf("created %q in it", t.Name)
		}
		return "created a table or view with the same name"
	case CreatedScalarMacro, CreatedTableMacro:
		return "created a macro with the same name"
	case InsertedIntoTable:
		return "inserted into it"
	case InlinedInsert:
		return "inserted inlined rows into it"
	case DeletedFromTable:
		return "deleted from it"
	case InlinedDelete:
		return "deleted inlined rows from it"
	case InlineFlush:
		return "flushed its inlined data"
	case MergeAdjacent:
		return "compacted it (merge adjacent files)"
	case RewriteDelete:
		return "compacted it (rewrite data files)"
	case AlteredTable, AlteredView:
		return "altered it"
	}
	return t.String()
}
