package verbs

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// specModel is what the verbs were asked to do, snapshot by snapshot: the
// partition spec and sort spec in force and the schema version, plus each
// data file's partition_id and values.
type specModel struct {
	partition map[int64][]string // snapshot → "column_id:transform" keys; nil: no spec
	hasPart   map[int64]bool
	sorting   map[int64][]string // snapshot → "expr|dir|nulls" keys
	schemaVer map[int64]int64
	files     map[int64]string // data_file_id → "partition_id=[values]"
}

// visible is DuckLake's visibility predicate.
func visible(s int64, begin, end datum.Value) bool {
	return begin.Int() <= s && (end.IsNull() || s < end.Int())
}

func rowsOf(t *testing.T, v *catalog.Version, table string) [][]datum.Value {
	tb, err := v.Table("public", table)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]datum.Value
	tb.Scan(func(_ catalog.CTID, r datum.Row) bool {
		vals, err := r.Decode(tb.Types(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
		return true
	})
	return out
}

// checkSpecs reconstructs, from the served rows only, the specs in force at
// every snapshot and each file's partition data, and compares with m.
func checkSpecs(t *testing.T, v *catalog.Version, tableID int64, last int64, m *specModel) {
	t.Helper()
	pinfo := rowsOf(t, v, "ducklake_partition_info")
	pcols := rowsOf(t, v, "ducklake_partition_column")
	sinfo := rowsOf(t, v, "ducklake_sort_info")
	sexprs := rowsOf(t, v, "ducklake_sort_expression")
	snaps := rowsOf(t, v, "ducklake_snapshot")
	for s := int64(0); s <= last; s++ {
		var live []int64
		for _, r := range pinfo {
			if r[1].Int() == tableID && visible(s, r[2], r[3]) {
				live = append(live, r[0].Int())
			}
		}
		if len(live) > 1 {
			t.Fatalf("snapshot %d: %d partition specs in force", s, len(live))
		}
		if (len(live) == 1) != m.hasPart[s] {
			t.Fatalf("snapshot %d: spec in force %v, want %v", s, live, m.hasPart[s])
		}
		var got []string
		for _, id := range live {
			type kc struct {
				idx int64
				s   string
			}
			var keys []kc
			for _, r := range pcols {
				if r[0].Int() == id && r[1].Int() == tableID {
					keys = append(keys, kc{r[2].Int(), fmt.Sprintf("%d:%s", r[3].Int(), r[4].Text())})
				}
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].idx < keys[j].idx })
			for _, k := range keys {
				got = append(got, k.s)
			}
		}
		if !reflect.DeepEqual(got, m.partition[s]) {
			t.Fatalf("snapshot %d: partition spec %q, want %q", s, got, m.partition[s])
		}
		var sorts []string
		for _, r := range sinfo {
			if r[1].Int() != tableID || !visible(s, r[2], r[3]) {
				continue
			}
			for _, e := range sexprs {
				if e[0].Int() == r[0].Int() {
					sorts = append(sorts, fmt.Sprintf("%d|%s|%s|%s|%s", e[2].Int(), e[3].Text(), e[4].Text(), e[5].Text(), e[6].Text()))
				}
			}
		}
		sort.Strings(sorts)
		if !reflect.DeepEqual(sorts, m.sorting[s]) {
			t.Fatalf("snapshot %d: sort spec %q, want %q", s, sorts, m.sorting[s])
		}
		for _, r := range snaps {
			if r[0].Int() == s && r[2].Int() != m.schemaVer[s] {
				t.Fatalf("snapshot %d: schema_version %d, want %d", s, r[2].Int(), m.schemaVer[s])
			}
		}
	}
	pvals := rowsOf(t, v, "ducklake_file_partition_value")
	for _, f := range rowsOf(t, v, "ducklake_data_file") {
		var vals []string
		for _, p := range pvals {
			if p[0].Int() == f[0].Int() {
				vals = append(vals, fmt.Sprintf("%d=%s", p[2].Int(), p[3].Text()))
			}
		}
		pid := "NULL"
		if !f[12].IsNull() {
			pid = fmt.Sprint(f[12].Int())
		}
		if got := pid + fmt.Sprint(vals); got != m.files[f[0].Int()] {
			t.Fatalf("file %d reports %s, want %s", f[0].Int(), got, m.files[f[0].Int()])
		}
	}
}

// TestRFC0013SpecEvolution: set → change → clear a table's partitioning and
// sorting across snapshots through the verbs; at every snapshot the
// visibility predicate over the served rows reconstructs the specs in force
// (partition changes bump schema_version, sort changes do not), and every
// data file reports the spec it was written under and its values — in
// memory and after a reload from the keyspace form.
func TestRFC0013SpecEvolution(t *testing.T) {
	db := catalog.NewServer(catalog.Options{}).Database("lake")
	l, err := Init(ctx, db, "public", "s3://b/")
	if err != nil {
		t.Fatal(err)
	}
	l.Now = func() time.Time { return time.Date(2026, 7, 9, 0, 0, 0, 0, time.UTC) }
	m := &specModel{partition: map[int64][]string{}, hasPart: map[int64]bool{}, sorting: map[int64][]string{},
		schemaVer: map[int64]int64{0: 0}, files: map[int64]string{}}
	var part []string
	hasPart := false
	var sorting []string
	record := func(s int64) {
		m.partition[s], m.hasPart[s], m.sorting[s], m.schemaVer[s] = part, hasPart, sorting, l.SchemaVersion()
	}
	c := l.Begin()
	tid, cols := c.CreateTable(0, "main", "t", []Column{{"ts", "timestamp"}, {"k", "varchar"}, {"v", "int64"}})
	record(must(c.Commit(ctx)))
	files := func(pid *int64, vals ...string) {
		c := l.Begin()
		for i := 0; i < 2; i++ {
			id := c.AddDataFile(DataFile{TableID: tid, RecordCount: 5, FileSize: 100, Path: fmt.Sprintf("p%d.parquet", i),
				PartitionID: pid, PartitionValues: vals})
			var kv []string
			for j, v := range vals {
				kv = append(kv, fmt.Sprintf("%d=%s", j, v))
			}
			p := "NULL"
			if pid != nil {
				p = fmt.Sprint(*pid)
			}
			m.files[id] = p + fmt.Sprint(kv)
		}
		record(must(c.Commit(ctx)))
	}
	files(nil)

	c = l.Begin()
	p1 := c.SetPartitioning(tid, []PartitionColumn{{cols[0], "year"}, {cols[0], "month"}})
	c.SetSorting(tid, []SortExpression{{`"k"`, "ASC", "NULLS_LAST"}})
	part, hasPart = []string{fmt.Sprintf("%d:year", cols[0]), fmt.Sprintf("%d:month", cols[0])}, true
	sorting = []string{`0|"k"|duckdb|ASC|NULLS_LAST`}
	svBefore := l.SchemaVersion()
	record(must(c.Commit(ctx)))
	if l.SchemaVersion() != svBefore+1 {
		t.Fatalf("set partitioning did not bump schema_version")
	}
	files(&p1, "2026", "7")

	c = l.Begin()
	p2 := c.SetPartitioning(tid, []PartitionColumn{{cols[1], "bucket(16)"}})
	c.SetSorting(tid, []SortExpression{{`lower("k") COLLATE "it's"`, "DESC", "NULLS_FIRST"}, {`"v"`, "ASC", "NULLS_LAST"}})
	part = []string{fmt.Sprintf("%d:bucket(16)", cols[1])}
	sorting = []string{`0|lower("k") COLLATE "it's"|duckdb|DESC|NULLS_FIRST`, `1|"v"|duckdb|ASC|NULLS_LAST`}
	record(must(c.Commit(ctx)))
	files(&p2, "11")

	// A sort-only change: an alter that does not bump schema_version.
	c = l.Begin()
	c.ClearSorting(tid)
	sorting = nil
	svBefore = l.SchemaVersion()
	record(must(c.Commit(ctx)))
	if l.SchemaVersion() != svBefore {
		t.Fatalf("clear sorting bumped schema_version")
	}
	c = l.Begin()
	c.SetSorting(tid, []SortExpression{{`"ts"`, "ASC", "NULLS_LAST"}})
	sorting = []string{`0|"ts"|duckdb|ASC|NULLS_LAST`}
	record(must(c.Commit(ctx)))
	if l.SchemaVersion() != svBefore {
		t.Fatalf("set sorting bumped schema_version")
	}

	// RESET PARTITIONED BY: set-to-empty.
	c = l.Begin()
	p3 := c.ClearPartitioning(tid)
	part = nil
	record(must(c.Commit(ctx)))
	if l.SchemaVersion() != svBefore+1 {
		t.Fatalf("clear partitioning did not bump schema_version")
	}
	files(&p3)

	last := l.Snapshot()
	checkSpecs(t, db.Current(), tid, last, m)

	var pairs [][2][]byte
	if err := db.Server().Pairs(func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(pairs, func(i, j int) bool { return bytes.Compare(pairs[i][0], pairs[j][0]) < 0 })
	re, err := catalog.Load(ctx, &catalog.SliceIterator{Pairs: pairs}, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db2, _ := re.Lookup("lake")
	checkSpecs(t, db2.Current(), tid, last, m)
}
