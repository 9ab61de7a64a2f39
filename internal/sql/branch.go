package sql

import (
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// branchDescription is the description of the database with pg_database
// oid: for a branch, its parent and fork snapshots.
func (x *exec) branchDescription(oid uint32) (string, bool) {
	cat := x.s.ex.cat.Catalog()
	for i, n := range cat.Databases() {
		if pgcatalog.DatabaseOID(i) != oid {
			continue
		}
		db, ok := cat.Lookup(n)
		if !ok || db.Branch() == nil {
			return "", false
		}
		return branchDescription(db.Branch()), true
	}
	return "", false
}

// branchDescription says what a branch reads: its parent and, per
// DuckLake catalog, the snapshot it was forked at.
func branchDescription(b *keyspace.Branch) string {
	var at []string
	for _, c := range b.Catalogs {
		if !c.HasSnapshot {
			continue
		}
		s := fmt.Sprintf("snapshot %d", c.Snapshot)
		if len(b.Catalogs) > 1 {
			s = c.Schema + " " + s
		}
		at = append(at, s)
	}
	d := "branch of " + b.Parent
	if len(at) > 0 {
		d += " at " + strings.Join(at, ", ")
	}
	if !b.Writable() {
		d += " (read-only)"
	}
	return d
}
