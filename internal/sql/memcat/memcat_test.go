package memcat

import (
	"context"
	"errors"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

func snapshotTable(t *testing.T, db *DB) {
	t.Helper()
	tx := begin(t, db)
	def := TableDef{Columns: []Column{{Name: "snapshot_id", Type: datum.Int8, NotNull: true}, {Name: "schema_version", Type: datum.Int8}}, PK: []int{0}}
	if _, err := tx.CreateTable("public", "ducklake_snapshot", def); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func row(id, v int64) []datum.Value { return []datum.Value{datum.IntValue(id), datum.IntValue(v)} }

// TestClaims pins the primary-key claims across live transactions: a
// second inserter of a key fails at once, the claim goes away with a
// rollback, and a key committed after a snapshot is refused too.
func TestClaims(t *testing.T) {
	ctx := context.Background()
	db := NewServer("lake").Database("lake")
	snapshotTable(t, db)
	a, b := begin(t, db), begin(t, db)
	if _, err := a.Insert("public", "ducklake_snapshot", row(1, 1)); err != nil {
		t.Fatal(err)
	}
	var ue *catalog.Error
	if _, err := b.Insert("public", "ducklake_snapshot", row(1, 2)); !errors.As(err, &ue) || !errors.Is(err, catalog.ErrDuplicateKey) || ue.Constraint != "ducklake_snapshot_pkey" {
		t.Fatalf("second inserter: %v", err)
	}
	a.Rollback()
	if _, err := b.Insert("public", "ducklake_snapshot", row(1, 2)); err != nil {
		t.Fatalf("after the first rolled back: %v", err)
	}
	c := begin(t, db) // snapshot before b commits
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert("public", "ducklake_snapshot", row(1, 3)); !errors.As(err, &ue) {
		t.Fatalf("key committed after the snapshot: %v", err)
	}
	c.Rollback()
	// The head has exactly b's row.
	tb, ok := db.Head().Lookup("public", "ducklake_snapshot")
	if !ok {
		t.Fatal("table missing")
	}
	var got [][2]int64
	if err := tb.Scan(func(_ int64, v []datum.Value) bool { got = append(got, [2]int64{v[0].I, v[1].I}); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != [2]int64{1, 2} {
		t.Fatalf("head rows %v", got)
	}
}

// TestUpdateMovesRow pins PostgreSQL's row versions: an update gives the
// row a new ctid and a delete of the old ctid then fails.
func TestUpdateMovesRow(t *testing.T) {
	ctx := context.Background()
	db := NewServer("lake").Database("lake")
	snapshotTable(t, db)
	tx := begin(t, db)
	c1, err := tx.Insert("public", "ducklake_snapshot", row(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tx.Update("public", "ducklake_snapshot", c1, row(1, 5))
	if err != nil {
		t.Fatal(err)
	}
	if c2 == c1 {
		t.Fatalf("update kept ctid %d", c1)
	}
	if err := tx.Delete("public", "ducklake_snapshot", c1); err == nil {
		t.Fatal("delete of the old row version succeeded")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func begin(t *testing.T, db *DB) *Txn {
	t.Helper()
	tx, err := db.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}
