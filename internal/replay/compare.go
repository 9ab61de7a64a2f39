package replay

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The normalizer. Everything a server answers is compared exactly except the
// volatile fields listed here and in docs/replay.md:
//
//   - BackendKeyData: ProcessID and SecretKey.
//   - ParameterStatus: the value of server_version; a run of ParameterStatus
//     messages compares as a set (their order carries no meaning).
//   - ErrorResponse/NoticeResponse: File, Line and Routine (the server's
//     source location).
//   - Object OIDs ≥ FirstNormalObjectId (16384), which PostgreSQL allocates
//     from a cluster-wide counter: RowDescription.TableOID and values of
//     columns of type oid. They compare through a per-replay bijection
//     (recorded → actual), so the same table must keep the same OID and two
//     tables may not share one. A recorded OID the client quotes back in a
//     later statement ('18122', as psql's \d does) is rewritten to the
//     actual OID before sending.
//   - Timestamps written by NOW() (transaction start times): timestamptz
//     values in text results, and 8-byte binary COPY fields whose recorded
//     value is a timestamp in [2020, 2100) with a fractional second. They
//     compare through a per-replay function (recorded → actual): every
//     occurrence of one recorded time must come back as the same actual time.
//   - The text of version(), in results of a statement that calls it.
//   - pg_class.relpages (a physical-storage statistic VACUUM and ANALYZE
//     update): any non-NULL value matches any non-NULL value.
//   - Statements over pg_database (psql's \l) describe the whole server: only
//     rows whose first column is the connection's database compare, and the
//     row count in the command tag is ignored.
//   - Row order of a result whose statement does not fix it (no ORDER BY):
//     rows compare as a multiset.
//   - CopyData message boundaries: a COPY OUT compares as the concatenated
//     stream, decoded into header, tuples and trailer.

// FirstNormalObjectID is PostgreSQL's FirstNormalObjectId: OIDs below it are
// assigned at initdb and identical on every server.
const FirstNormalObjectID = 16384

// mapper holds the per-replay correspondences between recorded and actual
// volatile values.
type mapper struct {
	oid    map[string]string // recorded → actual
	oidRev map[string]string // actual → recorded (OIDs are a bijection)
	ts     map[string]string // recorded → actual (a function)
}

func newMapper() *mapper {
	return &mapper{oid: map[string]string{}, oidRev: map[string]string{}, ts: map[string]string{}}
}

// matchOID checks an OID pair, recording it on first sight.
func (m *mapper) matchOID(want, got string) error {
	n, err := strconv.ParseUint(want, 10, 32)
	if err != nil || n < FirstNormalObjectID {
		// A system OID fixed at initdb (or not an OID): equal is required.
		if want != got {
			return fmt.Errorf("oid %s, got %s", want, got)
		}
		return nil
	}
	if a, ok := m.oid[want]; ok {
		if a != got {
			return fmt.Errorf("oid %s was answered as %s before, now %s", want, a, got)
		}
		return nil
	}
	if r, ok := m.oidRev[got]; ok && r != want {
		return fmt.Errorf("oid %s answered as %s, which already stands for recorded oid %s", want, got, r)
	}
	m.oid[want], m.oidRev[got] = got, want
	return nil
}

// matchTime checks a pair of NOW()-written timestamps (text or hex form).
func (m *mapper) matchTime(want, got string) error {
	if a, ok := m.ts[want]; ok {
		if a != got {
			return fmt.Errorf("time %s was answered as %s before, now %s", want, a, got)
		}
		return nil
	}
	m.ts[want] = got
	return nil
}

var quotedOID = regexp.MustCompile(`'([0-9]{5,10})'`)

// rewriteOIDs replaces recorded OIDs the client quotes back ('18122') with
// the OIDs the replayed server assigned.
func (m *mapper) rewriteOIDs(sql string) string {
	if len(m.oid) == 0 {
		return sql
	}
	return quotedOID.ReplaceAllStringFunc(sql, func(s string) string {
		if a, ok := m.oid[s[1:len(s)-1]]; ok {
			return "'" + a + "'"
		}
		return s
	})
}

// generic decodes a pgproto3 JSON message for field-wise comparison.
func generic(b []byte) (map[string]any, error) {
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// compareSingle compares one server message of the same type.
func (m *mapper) compareSingle(typ string, want, got []byte) error {
	// Equal JSON stays equal through every normalization below; only a
	// RowDescription's comparison also learns the OID mapping.
	if typ != "RowDescription" && bytes.Equal(want, got) {
		return nil
	}
	w, err := generic(want)
	if err != nil {
		return fmt.Errorf("recorded %s: %w", typ, err)
	}
	g, err := generic(got)
	if err != nil {
		return fmt.Errorf("actual %s: %w", typ, err)
	}
	switch typ {
	case "BackendKeyData":
		for _, k := range []string{"ProcessID", "SecretKey"} {
			delete(w, k)
			delete(g, k)
		}
	case "ParameterStatus":
		if w["Name"] == "server_version" && g["Name"] == "server_version" {
			delete(w, "Value")
			delete(g, "Value")
		}
	case "ErrorResponse", "NoticeResponse":
		for _, k := range []string{"File", "Line", "Routine", "UnknownFields"} {
			delete(w, k)
			delete(g, k)
		}
	case "RowDescription":
		wf, _ := w["Fields"].([]any)
		gf, _ := g["Fields"].([]any)
		if len(wf) == len(gf) {
			for i := range wf {
				wm, _ := wf[i].(map[string]any)
				gm, _ := gf[i].(map[string]any)
				if wm == nil || gm == nil {
					continue
				}
				wo, go_ := fmt.Sprint(wm["TableOID"]), fmt.Sprint(gm["TableOID"])
				if (wo == "0") != (go_ == "0") {
					return fmt.Errorf("column %v: table oid %s, got %s", wm["Name"], wo, go_)
				}
				if err := m.matchOID(wo, go_); err != nil {
					return fmt.Errorf("column %v: %w", wm["Name"], err)
				}
				delete(wm, "TableOID")
				delete(gm, "TableOID")
			}
		}
	}
	if !reflect.DeepEqual(w, g) {
		return errors.New(typ + " differs: " + firstDiff(w, g, ""))
	}
	return nil
}

// firstDiff names the first differing field of two decoded messages, as a
// path with both values, for the mismatch report.
func firstDiff(w, g any, path string) string {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(wv)+len(gv))
		for k := range wv {
			keys = append(keys, k)
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !reflect.DeepEqual(wv[k], gv[k]) {
				return firstDiff(wv[k], gv[k], strings.TrimPrefix(path+"."+k, "."))
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			break
		}
		for i := range wv {
			if !reflect.DeepEqual(wv[i], gv[i]) {
				return firstDiff(wv[i], gv[i], fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	wj, _ := json.Marshal(w)
	gj, _ := json.Marshal(g)
	return fmt.Sprintf("%s %s, got %s", path, wj, gj)
}

// column describes one result column for the value rules.
type column struct {
	Name    string
	TypeOID uint32
}

func columnsOf(rowDesc []byte) []column {
	var rd struct {
		Fields []struct {
			Name        string
			DataTypeOID uint32
		}
	}
	if json.Unmarshal(rowDesc, &rd) != nil {
		return nil
	}
	cols := make([]column, len(rd.Fields))
	for i, f := range rd.Fields {
		cols[i] = column{Name: f.Name, TypeOID: f.DataTypeOID}
	}
	return cols
}

// row is one result row: nil entries are NULL.
type row [][]byte

func decodeDataRow(b []byte) (row, error) {
	var dr struct {
		Values []map[string]string
	}
	if err := json.Unmarshal(b, &dr); err != nil {
		return nil, err
	}
	r := make(row, len(dr.Values))
	for i, v := range dr.Values {
		switch {
		case v == nil:
		case v["binary"] != "" || len(v) == 1 && hasKey(v, "binary"):
			x, err := hex.DecodeString(v["binary"])
			if err != nil {
				return nil, err
			}
			r[i] = x
		default:
			r[i] = append([]byte{}, v["text"]...) // non-nil: "" is not NULL
		}
	}
	return r, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// valueRule says how one field compares.
type valueRule int

const (
	ruleExact    valueRule = iota
	ruleOID                // through the OID bijection
	ruleTextTime           // timestamptz text through the time function
	ruleAny                // any non-NULL value (relpages, version())
	ruleBinary             // binary COPY field: exact, or a NOW() timestamp
)

func rulesFor(cols []column, si *stmtInfo) []valueRule {
	rules := make([]valueRule, len(cols))
	for i, c := range cols {
		switch {
		case c.Name == "relpages":
			rules[i] = ruleAny
		case si != nil && si.Version && c.Name == "version":
			rules[i] = ruleAny
		case c.TypeOID == 26:
			rules[i] = ruleOID
		case c.TypeOID == 1184:
			rules[i] = ruleTextTime
		}
	}
	return rules
}

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// nowTime reports whether an 8-byte binary value looks like a timestamp
// NOW() wrote: microseconds since 2000-01-01 within [2020, 2100) and not a
// whole second (user data in the fixtures is whole seconds; a transaction
// start time is a whole second once in a million).
func nowTime(b []byte, needFraction bool) bool {
	if len(b) != 8 {
		return false
	}
	us := int64(binary.BigEndian.Uint64(b))
	lo := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Sub(pgEpoch).Microseconds()
	hi := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Sub(pgEpoch).Microseconds()
	if us < lo || us >= hi {
		return false
	}
	return !needFraction || us%1_000_000 != 0
}

var textTime = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?[+-][0-9]{2}(:[0-9]{2})?$`)

func (m *mapper) compareValue(rule valueRule, want, got []byte) error {
	if (want == nil) != (got == nil) {
		return fmt.Errorf("%s, got %s", show(want), show(got))
	}
	if want == nil || bytes.Equal(want, got) && rule != ruleOID {
		return nil
	}
	switch rule {
	case ruleAny:
		return nil
	case ruleOID:
		return m.matchOID(string(want), string(got))
	case ruleTextTime:
		if textTime.Match(want) && textTime.Match(got) {
			return m.matchTime(string(want), string(got))
		}
	case ruleBinary:
		if nowTime(want, true) && nowTime(got, false) {
			return m.matchTime(hex.EncodeToString(want), hex.EncodeToString(got))
		}
	}
	return fmt.Errorf("%s, got %s", show(want), show(got))
}

func show(b []byte) string {
	if b == nil {
		return "NULL"
	}
	for _, c := range b {
		if c < 32 || c > 126 {
			return "0x" + hex.EncodeToString(b)
		}
	}
	return strconv.Quote(string(b))
}

// compareRows compares two result sets under the value rules. Unordered
// results are sorted on both sides first, by their non-volatile fields and
// then by everything, so that a multiset comparison pairs rows stably. An
// ordered result with sortCols is compared run by run: each run of recorded
// rows with equal sort keys against the same number of actual rows, as a
// multiset (the actual run's keys are compared like any field).
func (m *mapper) compareRows(rules []valueRule, want, got []row, ordered bool, sortCols []int) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d rows, got %d", len(want), len(got))
	}
	if !ordered {
		want = sortRows(rules, want)
		got = sortRows(rules, got)
	} else if len(sortCols) > 0 {
		want, got = append([]row(nil), want...), append([]row(nil), got...)
		for start := 0; start < len(want); {
			end := start + 1
			for end < len(want) && sameKeys(want[start], want[end], sortCols) {
				end++
			}
			copy(want[start:end], sortRows(rules, want[start:end]))
			copy(got[start:end], sortRows(rules, got[start:end]))
			start = end
		}
	}
	for i := range want {
		if len(want[i]) != len(got[i]) {
			return fmt.Errorf("row %d: %d fields, got %d", i+1, len(want[i]), len(got[i]))
		}
		for j := range want[i] {
			rule := ruleExact
			if j < len(rules) {
				rule = rules[j]
			}
			if err := m.compareValue(rule, want[i][j], got[i][j]); err != nil {
				return fmt.Errorf("row %d field %d: %w", i+1, j+1, err)
			}
		}
	}
	return nil
}

func sameKeys(a, b row, cols []int) bool {
	for _, c := range cols {
		if c >= len(a) || c >= len(b) || (a[c] == nil) != (b[c] == nil) || !bytes.Equal(a[c], b[c]) {
			return false
		}
	}
	return true
}

func sortRows(rules []valueRule, rows []row) []row {
	out := append([]row(nil), rows...)
	key := func(r row, stableOnly bool) string {
		var b strings.Builder
		for j, v := range r {
			if stableOnly && j < len(rules) && rules[j] != ruleExact {
				v = nil
			}
			if stableOnly && (j >= len(rules) || rules[j] == ruleBinary) && nowTime(v, true) {
				v = nil
			}
			if v == nil {
				b.WriteString("\x00N")
			} else {
				b.WriteString("\x01")
				b.Write(v)
			}
			b.WriteString("\x00|")
		}
		return b.String()
	}
	sort.SliceStable(out, func(i, j int) bool {
		ki, kj := key(out[i], true), key(out[j], true)
		if ki != kj {
			return ki < kj
		}
		return key(out[i], false) < key(out[j], false)
	})
	return out
}

var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// decodeCopy splits a COPY OUT stream into rows: binary format into tuples
// of fields, text format into lines of tab-separated fields.
func decodeCopy(stream []byte, binaryFormat bool) ([]row, error) {
	if !binaryFormat {
		var rows []row
		for _, line := range strings.SplitAfter(string(stream), "\n") {
			if line == "" {
				continue
			}
			var r row
			for _, f := range strings.Split(strings.TrimSuffix(line, "\n"), "\t") {
				if f == `\N` {
					r = append(r, nil)
				} else {
					r = append(r, append([]byte{}, f...))
				}
			}
			rows = append(rows, r)
		}
		return rows, nil
	}
	if !bytes.HasPrefix(stream, copySignature) || len(stream) < len(copySignature)+8 {
		return nil, errors.New("binary COPY stream without PGCOPY header")
	}
	p := stream[len(copySignature)+4:]
	ext := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(ext) > uint64(len(p)) {
		return nil, errors.New("binary COPY header extension overruns the stream")
	}
	p = p[ext:]
	var rows []row
	for {
		if len(p) < 2 {
			return nil, errors.New("binary COPY stream without trailer")
		}
		n := int16(binary.BigEndian.Uint16(p))
		p = p[2:]
		if n == -1 {
			if len(p) != 0 {
				return nil, fmt.Errorf("%d bytes after the binary COPY trailer", len(p))
			}
			return rows, nil
		}
		if n < 0 {
			return nil, fmt.Errorf("binary COPY tuple with %d fields", n)
		}
		r := make(row, n)
		for i := range r {
			if len(p) < 4 {
				return nil, errors.New("binary COPY field length truncated")
			}
			l := int32(binary.BigEndian.Uint32(p))
			p = p[4:]
			if l == -1 {
				continue
			}
			if l < 0 || int(l) > len(p) {
				return nil, fmt.Errorf("binary COPY field length %d", l)
			}
			r[i] = append([]byte{}, p[:l]...)
			p = p[l:]
		}
		rows = append(rows, r)
	}
}
