package keyspace

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// The lifecycle model: DuckLake-shaped histories of row operations (create
// and rename tables, add and alter columns, register, end, rebase and merge
// data files with partition values and stats, repartition, re-sort, inline,
// update and delete rows) are applied to a key/value map exactly as the
// commit pipeline applies them — insert puts the row's key, update deletes
// the old key and puts the new one, hard delete deletes the row's key — and
// to a model that is just the list of rows of every table. After every step
// the map decodes to exactly the model's rows, and no insert ever lands on an
// existing key: the key choices are unique under DuckLake's own usage.

type entity struct {
	table    string
	vals     []datum.Value
	children [][]datum.Value
}

type lifecycle struct {
	t     *rapid.T
	kv    map[string][]byte
	model []*entity // live model rows (current and history)
	snap  int64
	next  int64 // id allocator (DuckLake's next_catalog_id / next_file_id)
	defs  map[string]*Table
}

func (m *lifecycle) table(name string) *Table {
	if t, ok := m.defs[name]; ok {
		return t
	}
	t, ok := StaticTable(name)
	if !ok {
		m.t.Fatalf("no table %s", name)
	}
	return t
}

func (m *lifecycle) encode(e *entity) (string, []byte) {
	tbl := m.table(e.table)
	var kids []datum.Row
	for _, c := range e.children {
		kids = append(kids, datum.EncodeRow(nil, tbl.ChildTable().Types(), c))
	}
	k, v, err := tbl.Encode(9, datum.EncodeRow(nil, tbl.Types(), e.vals), kids)
	if err != nil {
		m.t.Fatalf("encode %s: %v", e.table, err)
	}
	return string(k), v
}

func (m *lifecycle) insert(e *entity) {
	k, v := m.encode(e)
	if _, dup := m.kv[k]; dup {
		m.t.Fatalf("insert of %s %v lands on an existing key %x", e.table, e.vals, k)
	}
	m.kv[k] = v
	m.model = append(m.model, e)
}

// update replaces e's values (and children) with the result of fn.
func (m *lifecycle) update(e *entity, fn func(vals []datum.Value)) {
	old, _ := m.encode(e)
	delete(m.kv, old)
	fn(e.vals)
	k, v := m.encode(e)
	if _, dup := m.kv[k]; dup {
		m.t.Fatalf("update of %s moves onto an existing key", e.table)
	}
	m.kv[k] = v
}

func (m *lifecycle) hardDelete(e *entity) {
	k, _ := m.encode(e)
	if _, ok := m.kv[k]; !ok {
		m.t.Fatalf("hard delete of %s %v: key absent", e.table, e.vals)
	}
	delete(m.kv, k)
	for i, x := range m.model {
		if x == e {
			m.model = append(m.model[:i], m.model[i+1:]...)
			return
		}
	}
}

// endAndInsert ends e (end_snapshot column end) and inserts its new
// version, in either order: DuckLake's batch may insert the new version
// before it ends the old one, and both are current in between.
func (m *lifecycle) endAndInsert(t *rapid.T, e *entity, end int, nv *entity) {
	if rapid.Bool().Draw(t, "insert first") {
		m.insert(nv)
		m.update(e, func(v []datum.Value) { v[end] = I(m.snap) })
		return
	}
	m.update(e, func(v []datum.Value) { v[end] = I(m.snap) })
	m.insert(nv)
}

// find returns the model rows of table that match (current rows only when
// current is set).
func (m *lifecycle) find(table string, current bool, match func([]datum.Value) bool) []*entity {
	var out []*entity
	tbl := m.table(table)
	for _, e := range m.model {
		if e.table != table || (current && tbl.Spec.Versioned() && !e.vals[tbl.Spec.End].IsNull()) {
			continue
		}
		if match == nil || match(e.vals) {
			out = append(out, e)
		}
	}
	return out
}

func I(v int64) datum.Value  { return datum.IntValue(v) }
func S(s string) datum.Value { return datum.TextValue(s) }

var N = datum.Null

func (m *lifecycle) id() int64 { m.next++; return m.next }

// check decodes the whole map and compares it with the model.
func (m *lifecycle) check() {
	var got, want []string
	render := func(table string, r datum.Row) string {
		tbl := m.table(table)
		types := tbl.Types()
		if tbl.Spec.Embedded() {
			types = m.table(tbl.Spec.Parent).ChildTable().Types()
		}
		vals, err := r.Decode(types, nil)
		if err != nil {
			m.t.Fatal(err)
		}
		return fmt.Sprintf("%s%v", table, vals)
	}
	keys := make([]string, 0, len(m.kv))
	for k := range m.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, err := DecodeKV([]byte(k), m.kv[k], func(_ uint32, name string) (*Table, bool) { return m.table(name), true })
		if err != nil {
			m.t.Fatalf("decode: %v", err)
		}
		got = append(got, render(e.Table, e.Row))
		for _, c := range e.Children {
			got = append(got, render(e.ChildTable, c))
		}
	}
	for _, e := range m.model {
		tbl := m.table(e.table)
		want = append(want, render(e.table, datum.EncodeRow(nil, tbl.Types(), e.vals)))
		for _, c := range e.children {
			want = append(want, render(tbl.ChildTable().Def.Name, datum.EncodeRow(nil, tbl.ChildTable().Types(), c)))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		m.t.Fatalf("store holds\n%v\nmodel holds\n%v", got, want)
	}
	// Per-table ranges hold exactly their table's rows.
	for _, tid := range []int64{1, 2} {
		p, _ := TablePrefix(9, KindDataFile, SubCurrent, tid)
		n := 0
		for _, k := range keys {
			if bytes.HasPrefix([]byte(k), p) {
				n++
			}
		}
		if live := len(m.find("ducklake_data_file", true, func(v []datum.Value) bool { return v[1].I == tid })); n != live {
			m.t.Fatalf("table %d: %d keys in its current file range, %d live files", tid, n, live)
		}
	}
}

func TestLifecycleModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &lifecycle{t: t, kv: map[string][]byte{}, next: 10, defs: map[string]*Table{}}
		inl, err := NewTable(InlinedDataDef("public", Version11, 1, 1, []ColumnDef{{Name: "v", Type: datum.Varchar}}))
		if err != nil {
			t.Fatal(err)
		}
		m.defs[inl.Def.Name] = inl
		uuid := datum.UUIDValue([16]byte{1})
		for _, tid := range []int64{1, 2} {
			m.insert(&entity{table: "ducklake_table", vals: []datum.Value{I(tid), uuid, I(0), N, I(0), S(fmt.Sprint("t", tid)), S("t/"), datum.BoolValue(true)}})
			m.insert(&entity{table: "ducklake_table_stats", vals: []datum.Value{I(tid), I(0), I(0), I(0)}})
		}
		rowID := int64(0)
		t.Repeat(map[string]func(*rapid.T){
			"rename": func(t *rapid.T) {
				m.snap++
				for _, e := range m.find("ducklake_table", true, nil) {
					if rapid.Bool().Draw(t, "pick") {
						nv := append([]datum.Value(nil), e.vals...)
						nv[2], nv[3], nv[5] = I(m.snap), N, S(fmt.Sprint("r", m.snap))
						m.endAndInsert(t, e, 3, &entity{table: "ducklake_table", vals: nv})
					}
				}
			},
			"column": func(t *rapid.T) {
				m.snap++
				tid := rapid.Int64Range(1, 2).Draw(t, "tid")
				cols := m.find("ducklake_column", true, func(v []datum.Value) bool { return v[3].I == tid })
				if len(cols) > 0 && rapid.Bool().Draw(t, "alter") {
					e := rapid.SampledFrom(cols).Draw(t, "col")
					nv := append([]datum.Value(nil), e.vals...)
					nv[1], nv[2], nv[6] = I(m.snap), N, S("int64")
					m.endAndInsert(t, e, 2, &entity{table: "ducklake_column", vals: nv})
					return
				}
				m.insert(&entity{table: "ducklake_column", vals: []datum.Value{I(m.id()), I(m.snap), N, I(tid), I(0), S("c"), S("int32"), N, N, datum.BoolValue(true), N, N, N}})
			},
			"file": func(t *rapid.T) {
				m.snap++
				tid := rapid.Int64Range(1, 2).Draw(t, "tid")
				fid := m.id()
				e := &entity{table: "ducklake_data_file", vals: []datum.Value{I(fid), I(tid), I(m.snap), N, N, S("f.parquet"), datum.BoolValue(true), S("parquet"), I(10), I(100), I(10), I(0), N, N, N, N, I(1)}}
				if specs := m.find("ducklake_partition_info", true, func(v []datum.Value) bool { return v[1].I == tid }); len(specs) == 1 {
					e.vals[12] = specs[0].vals[0]
					for i := range specs[0].children {
						e.children = append(e.children, []datum.Value{I(fid), I(tid), I(int64(i)), S(rapid.SampledFrom(nastyStrings).Draw(t, "pv"))})
					}
				}
				m.insert(e)
				for c := int64(1); c <= 2; c++ {
					m.insert(&entity{table: "ducklake_file_column_stats", vals: []datum.Value{I(fid), I(tid), I(c), I(1), I(1), I(0), S("a"), S("z"), datum.BoolValue(false), N}})
				}
			},
			"end or rebase file": func(t *rapid.T) {
				m.snap++
				files := m.find("ducklake_data_file", true, nil)
				if len(files) == 0 {
					t.Skip("no live file")
				}
				e := rapid.SampledFrom(files).Draw(t, "file")
				if rapid.Bool().Draw(t, "rebase") {
					m.update(e, func(v []datum.Value) { v[2] = I(m.snap) })
				} else {
					m.update(e, func(v []datum.Value) { v[3] = I(m.snap) })
				}
			},
			"merge": func(t *rapid.T) {
				// RFC 0008: hard-delete the sources (current or history) and
				// their stats, insert the merged file backdated.
				m.snap++
				tid := rapid.Int64Range(1, 2).Draw(t, "tid")
				files := m.find("ducklake_data_file", false, func(v []datum.Value) bool { return v[1].I == tid })
				if len(files) < 2 {
					t.Skip("nothing to merge")
				}
				begin := files[0].vals[2]
				for _, f := range files[:2] {
					for _, s := range m.find("ducklake_file_column_stats", false, func(v []datum.Value) bool { return v[0].I == f.vals[0].I }) {
						m.hardDelete(s)
					}
					m.hardDelete(f)
				}
				m.insert(&entity{table: "ducklake_data_file", vals: []datum.Value{I(m.id()), I(tid), begin, N, N, S("m.parquet"), datum.BoolValue(true), S("parquet"), I(20), I(200), I(10), I(0), N, N, N, N, I(1)}})
			},
			"repartition": func(t *rapid.T) {
				m.snap++
				tid := rapid.Int64Range(1, 2).Draw(t, "tid")
				for _, e := range m.find("ducklake_partition_info", true, func(v []datum.Value) bool { return v[1].I == tid }) {
					m.update(e, func(v []datum.Value) { v[3] = I(m.snap) })
				}
				if rapid.Bool().Draw(t, "clear") {
					return
				}
				pid := m.id()
				e := &entity{table: "ducklake_partition_info", vals: []datum.Value{I(pid), I(tid), I(m.snap), N}}
				for i, n := 0, rapid.IntRange(0, 3).Draw(t, "ncols"); i < n; i++ {
					e.children = append(e.children, []datum.Value{I(pid), I(tid), I(int64(i)), I(int64(i + 1)), S(rapid.SampledFrom([]string{"identity", "bucket(16)", "year", "truncate(10)"}).Draw(t, "transform"))})
				}
				m.insert(e)
			},
			"resort": func(t *rapid.T) {
				m.snap++
				tid := rapid.Int64Range(1, 2).Draw(t, "tid")
				for _, e := range m.find("ducklake_sort_info", true, func(v []datum.Value) bool { return v[1].I == tid }) {
					m.update(e, func(v []datum.Value) { v[3] = I(m.snap) })
				}
				if rapid.Bool().Draw(t, "clear") {
					return
				}
				sid := m.id()
				m.insert(&entity{table: "ducklake_sort_info", vals: []datum.Value{I(sid), I(tid), I(m.snap), N},
					children: [][]datum.Value{{I(sid), I(tid), I(0), S(`"a b" || 'it''s'`), S("duckdb"), S("DESC"), S("NULLS_FIRST")}}})
			},
			"inline": func(t *rapid.T) {
				m.snap++
				rows := m.find(inl.Def.Name, true, nil)
				if len(rows) > 0 && rapid.Bool().Draw(t, "update") {
					// UPDATE keeps the row id: end the old version, insert
					// the new one.
					e := rapid.SampledFrom(rows).Draw(t, "row")
					m.endAndInsert(t, e, 2, &entity{table: inl.Def.Name, vals: []datum.Value{e.vals[0], I(m.snap), N, S(genString(t, "v"))}})
					return
				}
				rowID++
				m.insert(&entity{table: inl.Def.Name, vals: []datum.Value{I(rowID), I(m.snap), N, S(genString(t, "v"))}})
			},
			"schedule": func(t *rapid.T) {
				// The deletion schedule is a queue: a file may be scheduled
				// again by a later transaction (each with its own NOW()),
				// and cleanup deletes every entry of a file at once.
				m.snap++
				fid := rapid.Int64Range(1, 3).Draw(t, "fid")
				if rapid.Bool().Draw(t, "cleanup") {
					for _, e := range m.find("ducklake_files_scheduled_for_deletion", false, func(v []datum.Value) bool { return v[0].I == fid }) {
						m.hardDelete(e)
					}
					return
				}
				m.insert(&entity{table: "ducklake_files_scheduled_for_deletion", vals: []datum.Value{I(fid), S(fmt.Sprint("f", fid, ".parquet")), datum.BoolValue(true), datum.TimestampTZValue(m.snap * 1e6)}})
			},
			"tag": func(t *rapid.T) {
				m.snap++
				key := rapid.SampledFrom([]string{"comment", "owner"}).Draw(t, "key")
				for _, e := range m.find("ducklake_tag", true, func(v []datum.Value) bool { return v[3].S == key }) {
					m.update(e, func(v []datum.Value) { v[2] = I(m.snap) })
				}
				m.insert(&entity{table: "ducklake_tag", vals: []datum.Value{I(1), I(m.snap), N, S(key), S(genString(t, "value"))}})
			},
			"": func(t *rapid.T) { m.check() },
		})
	})
}
