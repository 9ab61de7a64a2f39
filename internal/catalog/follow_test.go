package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"
	"weak"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/catalog/verbs"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// pairsOf is every keyspace pair the server's state is stored as.
func pairsOf(t testing.TB, s *catalog.Server) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := s.Pairs(func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

type sliceIter struct {
	keys []string
	m    map[string]string
	i    int
}

func (it *sliceIter) Next() bool    { it.i++; return it.i <= len(it.keys) }
func (it *sliceIter) Key() []byte   { return []byte(it.keys[it.i-1]) }
func (it *sliceIter) Value() []byte { return []byte(it.m[it.keys[it.i-1]]) }
func (it *sliceIter) Err() error    { return nil }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// loadPairs loads a server from pairs, as a replica's start does (with
// follow, indexing rows for ApplyCommitted as it loads them).
func loadPairs(t testing.TB, m map[string]string, follow bool) *catalog.Server {
	t.Helper()
	s, err := catalog.Load(context.Background(), &sliceIter{keys: sortedKeys(m), m: m}, catalog.Options{Follow: follow})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batchOf is the committed batch that takes a store from before to after:
// a put for every new or changed pair, a delete for every removed key, in
// key order (as the commit layer writes it).
func batchOf(before, after map[string]string) []catalog.PairOp {
	var ops []catalog.PairOp
	for _, k := range sortedKeys(after) {
		if v, ok := before[k]; !ok || v != after[k] {
			ops = append(ops, catalog.PairOp{Key: []byte(k), Value: []byte(after[k])})
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			ops = append(ops, catalog.PairOp{Key: []byte(k), Delete: true})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return bytes.Compare(ops[i].Key, ops[j].Key) < 0 })
	return ops
}

// diffPairs describes how two stores differ, "" when they hold the same.
func diffPairs(a, b map[string]string) string {
	for k, v := range a {
		if w, ok := b[k]; !ok {
			return fmt.Sprintf("writer has %s, follower not", keyspace.FormatKey([]byte(k)))
		} else if v != w {
			return fmt.Sprintf("%s differs", keyspace.FormatKey([]byte(k)))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return fmt.Sprintf("follower has %s, writer not", keyspace.FormatKey([]byte(k)))
		}
	}
	return ""
}

// TestApplyCommitted: a follower loaded from a writer's store and fed each
// commit's batch holds, after every commit, exactly the store the writer
// holds — over DuckLake-shaped commits: tables created, data and delete
// files added, ended and hard-deleted (with stats and partition values),
// partition and sort specs replaced.
func TestApplyCommitted(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		w := catalog.NewServer(catalog.Options{})
		lake, err := verbs.Init(ctx, w.Database("lake"), "public", "s3://lake/")
		if err != nil {
			rt.Fatal(err)
		}
		before := pairsOf(t, w)
		f := loadPairs(t, before, rapid.Bool().Draw(rt, "follow load"))
		type table struct {
			id   int64
			cols []int64
		}
		var tables []table
		var dbs []string                 // databases created since
		var live []int64                 // current data files
		fileTable := map[int64]int64{}   // data file → table
		delFiles := map[int64][2]int64{} // current delete file → (table, data file)
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := range steps {
			c := lake.Begin()
			what := rapid.IntRange(0, 9).Draw(rt, "what")
			if len(tables) == 0 {
				what = 0
			}
			switch what {
			case 0:
				id, cols := c.CreateTable(0, "main", fmt.Sprintf("t%d", step), []verbs.Column{{Name: "ts", Type: "timestamp"}, {Name: "k", Type: "varchar"}})
				tables = append(tables, table{id, cols})
			case 1, 2:
				tb := rapid.SampledFrom(tables).Draw(rt, "table")
				for i, n := 0, rapid.IntRange(1, 3).Draw(rt, "files"); i < n; i++ {
					df := verbs.DataFile{TableID: tb.id, RecordCount: 10, FileSize: 100, Path: fmt.Sprintf("f%d-%d.parquet", step, i),
						Stats: []verbs.ColumnStats{{ColumnID: tb.cols[0], Min: "1", Max: "9"}}}
					if rapid.Bool().Draw(rt, "partitioned") {
						p := int64(0)
						df.PartitionID, df.PartitionValues = &p, []string{fmt.Sprint(step)}
					}
					id := c.AddDataFile(df)
					live = append(live, id)
					fileTable[id] = tb.id
				}
			case 3:
				if len(live) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "end")
				c.EndDataFile(fileTable[live[i]], live[i])
				live = append(live[:i], live[i+1:]...)
			case 4:
				if len(live) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "hard delete")
				c.DeleteDataFile(live[i])
				live = append(live[:i], live[i+1:]...)
			case 5:
				if len(live) == 0 {
					continue
				}
				df := rapid.SampledFrom(live).Draw(rt, "delete file of")
				id := c.AddDeleteFile(verbs.DeleteFile{TableID: fileTable[df], DataFileID: df, DeleteCount: 1, FileSize: 10, Path: fmt.Sprintf("d%d.parquet", step)})
				delFiles[id] = [2]int64{fileTable[df], df}
			case 6:
				tb := rapid.SampledFrom(tables).Draw(rt, "table")
				c.SetPartitioning(tb.id, []verbs.PartitionColumn{{ColumnID: tb.cols[0], Transform: "year"}, {ColumnID: tb.cols[1], Transform: "bucket(16)"}})
			case 7:
				tb := rapid.SampledFrom(tables).Draw(rt, "table")
				if rapid.Bool().Draw(rt, "clear") {
					c.ClearSorting(tb.id)
				} else {
					c.SetSorting(tb.id, []verbs.SortExpression{{Expression: "k", Direction: "ASC", NullOrder: "NULLS_LAST"}})
				}
			}
			if what >= 8 {
				// A database created or dropped is a commit of its own.
				if what == 8 || len(dbs) == 0 {
					name := fmt.Sprintf("db%d", step)
					if _, err := w.CreateDatabase(ctx, name); err != nil {
						rt.Fatal(err)
					}
					if rapid.Bool().Draw(rt, "lake in it") {
						if _, err := verbs.Init(ctx, w.Database(name), "public", "s3://"+name+"/"); err != nil {
							rt.Fatal(err)
						}
					}
					dbs = append(dbs, name)
				} else {
					i := rapid.IntRange(0, len(dbs)-1).Draw(rt, "drop")
					if err := w.DropDatabase(ctx, dbs[i]); err != nil {
						rt.Fatal(err)
					}
					dbs = append(dbs[:i], dbs[i+1:]...)
				}
				after := pairsOf(t, w)
				if err := f.ApplyCommitted(batchOf(before, after)); err != nil {
					rt.Fatalf("step %d (%d): %v", step, what, err)
				}
				if d := diffPairs(after, pairsOf(t, f)); d != "" {
					rt.Fatalf("step %d (%d): %s", step, what, d)
				}
				if got, want := fmt.Sprint(f.Databases()), fmt.Sprint(w.Databases()); got != want {
					rt.Fatalf("step %d: databases %s, writer's %s", step, got, want)
				}
				before = after
				continue
			}
			for id, tf := range delFiles {
				if rapid.IntRange(0, 3).Draw(rt, "end delete file") == 0 {
					c.EndDeleteFile(tf[0], id)
					delete(delFiles, id)
				}
			}
			if _, err := c.Commit(ctx); err != nil {
				rt.Fatalf("step %d: %v", step, err)
			}
			after := pairsOf(t, w)
			if rapid.IntRange(0, 9).Draw(rt, "reload") == 0 {
				// A follower loaded here, mid-history, follows from here.
				f = loadPairs(t, before, rapid.Bool().Draw(rt, "follow reload"))
			}
			if err := f.ApplyCommitted(batchOf(before, after)); err != nil {
				rt.Fatalf("step %d (%d): %v", step, what, err)
			}
			if d := diffPairs(after, pairsOf(t, f)); d != "" {
				rt.Fatalf("step %d (%d): %s", step, what, d)
			}
			before = after
		}
	})
}

// TestApplyCommittedRefuses: a batch that alters a table definition in
// place is refused with ErrCannotFollow, and nothing of it is published.
// followedLake makes a fresh lake's catalog and a follower loaded from its
// pairs; it returns the pairs, the follower and its database.
func followedLake(t *testing.T) (map[string]string, *catalog.Server, *catalog.Database) {
	t.Helper()
	w := catalog.NewServer(catalog.Options{})
	if _, err := verbs.Init(context.Background(), w.Database("lake"), "public", "s3://lake/"); err != nil {
		t.Fatal(err)
	}
	before := pairsOf(t, w)
	f := loadPairs(t, before, true)
	db, _ := f.Lookup("lake")
	return before, f, db
}

func TestApplyCommittedRefuses(t *testing.T) {
	before, f, db := followedLake(t)
	v := db.Current()
	var ops []catalog.PairOp
	for _, k := range sortedKeys(before) {
		if len(k) > 4 && keyspace.Kind(k[4]) == keyspace.KindTableDef {
			cid, def, err := keyspace.DecodeTableDef([]byte(k), []byte(before[k]))
			if err != nil {
				t.Fatal(err)
			}
			if def.Name != "ducklake_data_file" || cid == 0 {
				continue
			}
			def.Columns = def.Columns[:len(def.Columns)-1]
			ops = append(ops, catalog.PairOp{Key: []byte(k), Value: keyspace.EncodeTableDef(&def)})
		}
	}
	if len(ops) != 1 {
		t.Fatalf("%d definitions of ducklake_data_file", len(ops))
	}
	// A row put ahead of it in the same batch must not land either.
	for _, k := range sortedKeys(before) {
		if len(k) > 4 && keyspace.Kind(k[4]) == keyspace.KindSnapshot {
			ops = append([]catalog.PairOp{{Key: []byte(k), Delete: true}}, ops...)
			break
		}
	}
	if err := f.ApplyCommitted(ops); !errors.Is(err, catalog.ErrCannotFollow) {
		t.Fatalf("altered definition: %v", err)
	}
	if db.Current() != v {
		t.Fatal("a refused batch published a version")
	}
	if d := diffPairs(before, pairsOf(t, f)); d != "" {
		t.Fatal(d)
	}
}

// TestFollowIndexSort: a follower index big enough to be sorted in buckets
// offers every entry under its hash, repeated hashes included.
func TestFollowIndexSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	hs := make([]uint64, 200_000)
	for i := range hs {
		hs[i] = r.Uint64()
		if i%1000 == 1 {
			hs[i] = hs[i-1] // a repeated hash
		}
	}
	if !catalog.FollowIndexFindsAll(hs) {
		t.Fatal("an entry is not found")
	}
}

// TestApplyCommittedRefusesRename: a batch that renames a table to the
// other name of its kind (0.2's column statistics table) is refused, and
// the follower reloads, rather than filing the rows under the old table.
func TestApplyCommittedRefusesRename(t *testing.T) {
	before, f, db := followedLake(t)
	v := db.Current()
	var ops []catalog.PairOp
	for _, k := range sortedKeys(before) {
		if len(k) > 4 && keyspace.Kind(k[4]) == keyspace.KindTableDef {
			cid, def, err := keyspace.DecodeTableDef([]byte(k), []byte(before[k]))
			if err != nil {
				t.Fatal(err)
			}
			if def.Name != "ducklake_file_column_stats" || cid == 0 {
				continue
			}
			def.Name = "ducklake_file_column_statistics"
			ops = append(ops, catalog.PairOp{Key: []byte(k), Delete: true},
				catalog.PairOp{Key: keyspace.TableDefKey(cid, def.Name), Value: keyspace.EncodeTableDef(&def)})
		}
	}
	if len(ops) != 2 {
		t.Fatalf("%d ops for the rename", len(ops))
	}
	if err := f.ApplyCommitted(ops); !errors.Is(err, catalog.ErrCannotFollow) {
		t.Fatalf("renamed table: %v", err)
	}
	if db.Current() != v {
		t.Fatal("a refused batch published a version")
	}
}

// TestFollowerReleasesDroppedDatabase: once a follower applies the drop of a
// database whose rows it followed (deletes and updates searched through its
// row indexes), nothing it keeps holds that database's tables.
func TestFollowerReleasesDroppedDatabase(t *testing.T) {
	ctx := context.Background()
	w := catalog.NewServer(catalog.Options{})
	before := pairsOf(t, w)
	f := loadPairs(t, before, true)
	apply := func() {
		t.Helper()
		after := pairsOf(t, w)
		if err := f.ApplyCommitted(batchOf(before, after)); err != nil {
			t.Fatal(err)
		}
		before = after
	}
	lake, err := verbs.Init(ctx, w.Database("lake"), "public", "s3://lake/")
	if err != nil {
		t.Fatal(err)
	}
	apply()
	c := lake.Begin()
	id, cols := c.CreateTable(0, "main", "t", []verbs.Column{{Name: "k", Type: "varchar"}})
	var files []int64
	for i := range 3 {
		files = append(files, c.AddDataFile(verbs.DataFile{TableID: id, RecordCount: 1, FileSize: 10, Path: fmt.Sprintf("f%d.parquet", i),
			Stats: []verbs.ColumnStats{{ColumnID: cols[0], Min: "a", Max: "z"}}}))
	}
	if _, err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	apply()
	c = lake.Begin()
	c.EndDataFile(id, files[0])
	c.DeleteDataFile(files[1])
	c.AddDeleteFile(verbs.DeleteFile{TableID: id, DataFileID: files[2], DeleteCount: 1, FileSize: 10, Path: "d.parquet"})
	if _, err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	apply()

	db, ok := f.Lookup("lake")
	if !ok {
		t.Fatal("the follower has no database lake")
	}
	var infos []weak.Pointer[catalog.TableInfo]
	for _, sc := range db.Current().Schemas() {
		for _, tb := range sc.Tables() {
			infos = append(infos, weak.Make(tb.Info()))
		}
	}
	db = nil
	if err := w.DropDatabase(ctx, "lake"); err != nil {
		t.Fatal(err)
	}
	apply()
	if _, ok := f.Lookup("lake"); ok {
		t.Fatal("the follower still has database lake")
	}
	runtime.GC()
	runtime.GC()
	for _, p := range infos {
		if ti := p.Value(); ti != nil {
			t.Errorf("table %s.%s of the dropped database is still reachable", ti.Def.Schema, ti.Def.Name)
		}
	}
	runtime.KeepAlive(f)
}
