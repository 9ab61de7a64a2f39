package maint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/verify"
)

// TestVerifyChecksBranches: moraine verify checks a branch's catalogs as
// the branch reads them and the cross-branch file rule. A lake DuckLake
// built, forked, verifies clean; a store where the parent lost the row of
// a file the branch reads, and the snapshot it was forked at (written
// around the commit path, which refuses both), does not.
func TestVerifyChecksBranches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	st, _, tr := replayOnStack(t, ctx, filepath.Join(dir, "s11_commit_mix.jsonl"))
	lake := tr.Databases()[0]
	if _, err := st.Cat.ForkDatabase(ctx, "dev", lake, catalog.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func() []verify.Violation {
		t.Helper()
		sn, err := st.KV.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer sn.Close()
		vs, err := verify.CheckStore(ctx, sn)
		if err != nil {
			t.Fatal(err)
		}
		branches, err := commit.ReadBranches(ctx, sn)
		if err != nil {
			t.Fatal(err)
		}
		if len(branches) != 1 || len(branches[0].Catalogs) == 0 || len(branches[0].Catalogs[0].Rows["ducklake_data_file"]) == 0 {
			t.Fatalf("the store's branches: %+v", branches)
		}
		return vs
	}
	if vs := check(); len(vs) != 0 {
		t.Fatalf("a fresh fork: %v", vs)
	}

	// The parent's newest snapshot (the fork) and its first data file,
	// deleted straight from the store.
	lakeDB, _ := st.Cat.Lookup(lake)
	sc, _ := lakeDB.Current().Schema("public")
	var file, snap []byte
	if err := lakeDB.Current().CatalogPairs(lake, sc, func(k, _ []byte) error {
		switch keyspace.Kind(k[4]) {
		case keyspace.KindDataFile:
			if file == nil {
				file = append([]byte(nil), k...)
			}
		case keyspace.KindSnapshot:
			if snap == nil || string(k) > string(snap) {
				snap = append([]byte(nil), k...)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := slate.NewBatch()
	b.Delete(file)
	b.Delete(snap)
	if _, err := st.KV.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	got := map[verify.Kind]bool{}
	for _, v := range check() {
		if strings.HasPrefix(v.Catalog, "dev.") {
			got[v.Kind] = true
		}
	}
	for _, k := range []verify.Kind{verify.KindBranchFileUnknown, verify.KindBranchForkExpired} {
		if !got[k] {
			t.Errorf("verify did not report %s for the branch (got %v)", k, got)
		}
	}
}
