package pgcatalog

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire/pgcopy"
)

// sysdata holds PostgreSQL 15.18's own catalog rows for the pg_catalog,
// pg_toast and information_schema namespaces (pg_class, pg_attribute,
// pg_type, pg_constraint and pg_indexes), dumped from a freshly initialised
// cluster with COPY. The postgres extension's introspection batch without a
// schema filter lists them, so serving them makes moraine's answer the one
// PostgreSQL gives. Their OIDs are fixed by initdb.
//
//go:embed sysdata/*.tsv
var sysdataFS embed.FS

var sysCache struct {
	sync.Mutex
	rows map[string][][]datum.Value
}

// sysRows returns the static rows of a system relation, parsed with the
// relation's column types. The result is shared and must not be modified.
func sysRows(name string, cols []col) [][]datum.Value {
	sysCache.Lock()
	defer sysCache.Unlock()
	if r, ok := sysCache.rows[name]; ok {
		return r
	}
	if sysCache.rows == nil {
		sysCache.rows = map[string][][]datum.Value{}
	}
	rows, err := loadSys(name, cols)
	if err != nil {
		// The embedded files are part of the build; a bad one is a bug
		// that the tests catch (TestSysdata).
		rows = nil
	}
	sysCache.rows[name] = rows
	return rows
}

// withSysRows is a new row slice holding PostgreSQL's own rows of catalog
// name, with room for extra rows of the lake's: the shared rows are copied
// once, as headers, never appended to.
func withSysRows(name string, cols []col, extra int) [][]datum.Value {
	sys := sysRows(name, cols)
	rows := make([][]datum.Value, len(sys), len(sys)+extra)
	copy(rows, sys)
	return rows
}

// sysAttributes is PostgreSQL's pg_attribute rows with attstorage and
// attcompression appended (the dump's layout ends before them), made once.
func sysAttributes(cols []col) [][]datum.Value {
	sysAttrOnce.Do(func() {
		for _, row := range sysRows("pg_attribute", cols) {
			sysAttr = append(sysAttr, append(row[:16:16], nameV(attStorage(int(row[3].I))), nameV("")))
		}
	})
	return sysAttr
}

var (
	sysAttrOnce sync.Once
	sysAttr     [][]datum.Value
)

// attStorage is attstorage for a column of length attlen: varlena types
// (-1) are extended, fixed-length ones plain.
func attStorage(attlen int) string {
	if attlen == -1 {
		return "x"
	}
	return "p"
}

func loadSys(name string, cols []col) ([][]datum.Value, error) {
	data, err := sysdataFS.ReadFile("sysdata/" + name + ".tsv")
	if err != nil {
		return nil, err
	}
	r := pgcopy.NewTextCopyReader(bytes.NewReader(data))
	var out [][]datum.Value
	for line := 1; ; line++ {
		cells, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("sysdata %s line %d: %w", name, line, err)
		}
		if len(cells) != len(cols) {
			return nil, fmt.Errorf("sysdata %s line %d: %d fields for %d columns", name, line, len(cells), len(cols))
		}
		row := make([]datum.Value, len(cols))
		for i, c := range cells {
			if c == nil {
				continue
			}
			v, err := datum.ParseText(cols[i].typ, string(c))
			if err != nil {
				return nil, fmt.Errorf("sysdata %s line %d column %s: %w", name, line, cols[i].name, err)
			}
			row[i] = v
		}
		out = append(out, row)
	}
}
