package workload

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
)

// rowIDFieldID is the Parquet field id of `_ducklake_internal_row_id`
// (docs/reference/ducklake-catalog-protocol.md §5).
const rowIDFieldID = 2147483540

// writeDataFile writes a Parquet data file with the table's columns and
// records rows, as DuckLake would before committing it: values by position
// (the catalog's statistics are not checked against them). With embed set
// the file carries the given row ids in an OPTIONAL BIGINT column with
// field id 2147483540, as merged and rewritten files do; ids must then hold
// records values. It returns the file size.
func writeDataFile(path string, cols []column, records int64, embed []int64) (int64, error) {
	group := parquet.Group{}
	for _, c := range cols {
		if c.integer {
			group[c.name] = parquet.Optional(parquet.Int(64))
		} else {
			group[c.name] = parquet.Optional(parquet.String())
		}
	}
	const rowIDName = "_ducklake_internal_row_id"
	if embed != nil {
		group[rowIDName] = parquet.FieldID(parquet.Optional(parquet.Int(64)), rowIDFieldID)
	}
	schema := parquet.NewSchema("duckdb_schema", group)
	index := map[string]int{}
	for _, name := range append(columnNames(cols), rowIDName) {
		if leaf, ok := schema.Lookup(name); ok {
			index[name] = leaf.ColumnIndex
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, fmt.Errorf("workload: data file: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("workload: data file: %w", err)
	}
	w := parquet.NewWriter(f, schema)
	// A Row holds one value per leaf, in leaf (column index) order.
	rows := make([]parquet.Row, 0, records)
	for pos := int64(0); pos < records; pos++ {
		row := make(parquet.Row, len(index))
		for _, c := range cols {
			var v parquet.Value
			if c.integer {
				v = parquet.Int64Value(pos + c.id)
			} else {
				v = parquet.ByteArrayValue([]byte(c.value(pos)))
			}
			row[index[c.name]] = v.Level(0, 1, index[c.name])
		}
		if embed != nil {
			row[index[rowIDName]] = parquet.Int64Value(embed[pos]).Level(0, 1, index[rowIDName])
		}
		rows = append(rows, row)
	}
	if _, err := w.WriteRows(rows); err != nil {
		f.Close()
		return 0, fmt.Errorf("workload: data file %s: %w", path, err)
	}
	if err := w.Close(); err != nil {
		f.Close()
		return 0, fmt.Errorf("workload: data file %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("workload: data file %s: %w", path, err)
	}
	return st.Size(), f.Close()
}

func columnNames(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// expandSpans lists the ids of spans in order.
func expandSpans(spans []Span) []int64 {
	var out []int64
	for _, s := range spans {
		for id := s.Lo; id < s.Hi; id++ {
			out = append(out, id)
		}
	}
	return out
}
