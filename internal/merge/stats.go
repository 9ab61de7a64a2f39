package merge

import (
	"bytes"
	"math/big"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/datum"
)

// stats merges the table statistics: the parent's, plus what the branch
// added since the fork.
func (p *planner) stats() error {
	if err := p.tableStats(); err != nil {
		return err
	}
	return p.columnStats()
}

// keyedRows decodes t's rows by the key the columns cols form. move, if
// set, moves a row's values first (the branch's table ids to the
// parent's); raw stays the row as t holds it.
func keyedRows(t *catalog.Table, move func([]datum.Value), cols ...int) map[string]keyedRow {
	out := map[string]keyedRow{}
	if t == nil {
		return out
	}
	t.Scan(func(c catalog.CTID, r datum.Row) bool {
		v, err := r.Decode(t.Types(), nil)
		if err != nil {
			return true
		}
		if move != nil {
			move(v)
		}
		out[keyOf(v, cols)] = keyedRow{c, r, v}
		return true
	})
	return out
}

type keyedRow struct {
	ctid catalog.CTID
	raw  datum.Row
	vals []datum.Value
}

func keyOf(v []datum.Value, cols []int) string {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(strconv.FormatInt(v[c].I, 10))
		b.WriteByte('/')
	}
	return b.String()
}

// statsTables returns a stats table at the fork, on the branch and on the
// parent, and the columns of its key.
func (p *planner) statsTables(name string, key ...string) (fork, dev, lake map[string]keyedRow, cols []int, ok bool) {
	ft, _ := p.fork.Table(name)
	dt, ok1 := p.dev.Table(name)
	lt, ok2 := p.lakeTable(name)
	if !ok1 || !ok2 {
		return nil, nil, nil, nil, false
	}
	for _, k := range key {
		cols = append(cols, dt.Def().ColumnIndex(k))
	}
	// The branch's new tables' rows under the ids they take on the
	// parent.
	move := func(v []datum.Value) { v[cols[0]] = datum.IntValue(p.catalogOf(v[cols[0]].I)) }
	return keyedRows(ft, nil, cols...), keyedRows(dt, move, cols...), keyedRows(lt, nil, cols...), cols, true
}

// tableStats adds the branch's deltas of record_count, next_row_id and
// file_size_bytes to the parent's row.
func (p *planner) tableStats() error {
	const name = "ducklake_table_stats"
	fork, dev, lake, _, ok := p.statsTables(name, "table_id")
	if !ok {
		return nil
	}
	dt, _ := p.dev.Table(name)
	def := dt.Def()
	for k, f := range fork {
		if _, ok := dev[k]; !ok {
			p.r.unsupported1("%s: the statistics of table %d were removed on the branch", name, f.vals[def.ColumnIndex("table_id")].I)
		}
	}
	for k, d := range dev {
		f, hadF := fork[k]
		if hadF && bytes.Equal(f.raw, d.raw) {
			continue
		}
		l, hasL := lake[k]
		tid := d.vals[def.ColumnIndex("table_id")].I
		if !hasL {
			if hadF {
				p.r.conflict("%s: table %d: the branch changed its statistics, and the parent removed them", name, tid)
				continue
			}
			if _, err := p.lake().InsertRow(p.schema, name, d.vals); err != nil {
				return err
			}
			continue
		}
		nv := append([]datum.Value(nil), l.vals...)
		for _, c := range []string{"record_count", "next_row_id", "file_size_bytes"} {
			i := def.ColumnIndex(c)
			if i < 0 || d.vals[i].IsNull() {
				continue
			}
			base := int64(0)
			if hadF && !f.vals[i].IsNull() {
				base = f.vals[i].I
			}
			if l.vals[i].IsNull() {
				nv[i] = d.vals[i]
				continue
			}
			nv[i] = datum.IntValue(l.vals[i].I + d.vals[i].I - base)
		}
		if _, err := p.lake().UpdateRow(p.schema, name, l.ctid, nv); err != nil {
			return err
		}
	}
	return nil
}

// columnStats widens the parent's column statistics by the branch's:
// taken as they are where only the branch changed them, combined (either
// side's nulls and NaNs, the smaller minimum, the larger maximum) where
// both did. A bound that cannot be compared is dropped (NULL: unknown),
// which is always safe for DuckLake's pruning.
func (p *planner) columnStats() error {
	const name = "ducklake_table_column_stats"
	fork, dev, lake, cols, ok := p.statsTables(name, "table_id", "column_id")
	if !ok {
		return nil
	}
	dt, _ := p.dev.Table(name)
	def := dt.Def()
	types := p.columnTypes()
	for k, d := range dev {
		f, hadF := fork[k]
		if hadF && bytes.Equal(f.raw, d.raw) {
			continue
		}
		l, hasL := lake[k]
		switch {
		case !hasL && hadF:
			p.r.conflict("%s: column %d of table %d: the branch changed its statistics, and the parent removed them", name, d.vals[cols[1]].I, d.vals[cols[0]].I)
		case !hasL:
			if _, err := p.lake().InsertRow(p.schema, name, d.vals); err != nil {
				return err
			}
		case hadF && bytes.Equal(l.raw, f.raw):
			if _, err := p.lake().UpdateRow(p.schema, name, l.ctid, d.vals); err != nil {
				return err
			}
		default:
			typ := types[[2]int64{d.vals[cols[0]].I, d.vals[cols[1]].I}]
			nv := combineStats(def.ColumnIndex, l.vals, d.vals, typ)
			if _, err := p.lake().UpdateRow(p.schema, name, l.ctid, nv); err != nil {
				return err
			}
		}
	}
	return nil
}

// columnTypes maps (table_id, column_id) to the DuckLake type of the
// parent's current columns.
func (p *planner) columnTypes() map[[2]int64]string {
	out := map[[2]int64]string{}
	t, ok := p.lakeTable("ducklake_column")
	if !ok {
		return out
	}
	d := t.Def()
	ti, ci, ei, yi := d.ColumnIndex("table_id"), d.ColumnIndex("column_id"), d.ColumnIndex("end_snapshot"), d.ColumnIndex("column_type")
	t.Scan(func(_ catalog.CTID, r datum.Row) bool {
		v, err := r.Decode(t.Types(), nil)
		if err == nil && v[ei].IsNull() {
			out[[2]int64{v[ti].I, v[ci].I}] = v[yi].S
		}
		return true
	})
	return out
}

// combineStats is the union of two column statistics rows.
func combineStats(col func(string) int, a, b []datum.Value, typ string) []datum.Value {
	out := append([]datum.Value(nil), a...)
	for _, c := range []string{"contains_null", "contains_nan"} {
		if i := col(c); i >= 0 {
			switch {
			case a[i].IsNull() || b[i].IsNull():
				out[i] = datum.Null
			default:
				out[i] = datum.BoolValue(a[i].I != 0 || b[i].I != 0)
			}
		}
	}
	for _, c := range []struct {
		name string
		less bool
	}{{"min_value", true}, {"max_value", false}} {
		i := col(c.name)
		if i < 0 {
			continue
		}
		out[i] = datum.Null
		if a[i].IsNull() || b[i].IsNull() {
			continue
		}
		cmp, ok := compareStat(typ, a[i].S, b[i].S)
		if !ok {
			continue
		}
		if cmp <= 0 == c.less {
			out[i] = a[i]
		} else {
			out[i] = b[i]
		}
	}
	if i := col("extra_stats"); i >= 0 && !datum.Equal(a[i], b[i]) {
		out[i] = datum.Null
	}
	return out
}

// compareStat compares two statistics values of DuckLake type typ as
// DuckDB orders them; ok is false for a type it does not order here.
func compareStat(typ, a, b string) (int, bool) {
	switch {
	case typ == "int8" || typ == "int16" || typ == "int32" || typ == "int64":
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return cmpInt(x < y, x > y), true
	case typ == "uint8" || typ == "uint16" || typ == "uint32" || typ == "uint64":
		x, err1 := strconv.ParseUint(a, 10, 64)
		y, err2 := strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return cmpInt(x < y, x > y), true
	case typ == "float32" || typ == "float64" || typ == "int128" || typ == "uint128" || strings.HasPrefix(typ, "decimal"):
		x, ok1 := new(big.Rat).SetString(a)
		y, ok2 := new(big.Rat).SetString(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	case typ == "varchar" || typ == "uuid" || typ == "boolean":
		return strings.Compare(a, b), true
	case typ == "date" || strings.HasPrefix(typ, "timestamp") || typ == "time":
		// ISO text of one shape (four-digit years, AD) orders as its value.
		if len(a) != len(b) || a == "" || b == "" || a[0] == '-' || b[0] == '-' || strings.Contains(a+b, "BC") || strings.Contains(a+b, "infinity") {
			return 0, false
		}
		return strings.Compare(a, b), true
	}
	return 0, false
}

func cmpInt(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}
