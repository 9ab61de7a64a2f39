package keyspace

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatKey renders any keyspace key for people: inspection tools, logs and
// error messages. It never fails; bytes it cannot read are shown in hex
// after a "!".
//
//	1 file/current table_id=3 data_file_id=10
//	1 table/history table_id=4 begin_snapshot=2 end_snapshot=6
//	0 registry database="lake" schema="public"
func FormatKey(key []byte) string {
	var b strings.Builder
	r := NewKeyReader(key)
	cat, kind := r.Uint32(), Kind(r.Byte())
	if r.Err() != nil {
		return "!" + fmt.Sprintf("%x", key)
	}
	fmt.Fprintf(&b, "%d %v", cat, kind)
	str := func(name string) {
		s, null := r.String()
		if r.Err() != nil {
			return
		}
		if null {
			fmt.Fprintf(&b, " %s=NULL", name)
		} else {
			fmt.Fprintf(&b, " %s=%q", name, s)
		}
	}
	num := func(name string) {
		v, null := r.Int()
		if r.Err() != nil {
			return
		}
		if null {
			fmt.Fprintf(&b, " %s=NULL", name)
		} else {
			fmt.Fprintf(&b, " %s=%d", name, v)
		}
	}
	switch {
	case kind == KindRegistry:
		str("database")
		str("schema")
	case kind == KindMeta || kind == KindTableDef || kind == KindBranch:
		str("name")
	case kind.IsRowKind():
		sub := SubNone
		if kind.Versioned() {
			switch sub = Subspace(r.Byte()); sub {
			case SubCurrent:
				b.WriteString("/current")
			case SubHistory:
				b.WriteString("/history")
			default:
				if r.Err() == nil {
					fmt.Fprintf(&b, "/sub(%d)", sub)
				}
			}
		}
		var spec *TableSpec
		if name := kinds[kind].table; name != "" {
			spec = fixedByName[name]
		} else {
			num("table_id")
			if kind == KindInlinedRow {
				num("schema_version")
				spec, _ = Known(InlinedDataTableName(0, 0))
			} else {
				spec, _ = Known(InlinedDeleteTableName(0))
			}
		}
		cols := append([]int(nil), spec.EntityKey...)
		if spec.keyHasBegin() {
			cols = append(cols, spec.Begin)
		}
		if sub == SubHistory {
			cols = append(cols, spec.End)
		}
		for _, c := range cols {
			name := "begin_snapshot"
			isStr := false
			switch {
			case spec.Columns != nil:
				name = spec.Columns[c].Name
				isStr = spec.Columns[c].Type == tStr
			case c == spec.End:
				name = "end_snapshot"
			case c == 0:
				name = "row_id"
			}
			if isStr {
				str(name)
			} else {
				num(name)
			}
		}
	}
	if r.Err() != nil || len(r.Rest()) > 0 {
		b.WriteString(" !" + strconv.Quote(string(r.Rest())))
		if r.Err() != nil {
			b.WriteString(" (" + r.Err().Error() + ")")
		}
	}
	return b.String()
}
