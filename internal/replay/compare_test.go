package replay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "127.0.0.1:5433", want: "127.0.0.1:5433"},
		{in: "host=127.0.0.1 port=55432 user=postgres dbname=postgres sslmode=disable", want: "127.0.0.1:55432"},
		{in: "port=6000", want: "127.0.0.1:6000"},
		{in: "host='db.local' port='7'", want: "db.local:7"},
		{in: "postgres://u@h:9/db?sslmode=disable", want: "h:9"},
		{in: "postgresql://h/db", want: "h:5432"},
		{in: "host=/tmp port=5432", bad: true},
		{in: "nonsense", bad: true},
		{in: "host=a bogus", bad: true},
	} {
		got, err := HostPort(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("HostPort(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("HostPort(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestAnalyse(t *testing.T) {
	for _, tc := range []struct {
		sql                       string
		ordered, cluster, version bool
		sortCols                  []int
	}{
		{sql: "SELECT 1", ordered: true},
		{sql: "SELECT a FROM t", ordered: false},
		{sql: "SELECT a FROM t ORDER BY a", ordered: true, sortCols: []int{0}},
		{sql: "SELECT pg_namespace.oid, tablename, indexname FROM pg_indexes JOIN pg_namespace ON (schemaname=nspname) ORDER BY pg_namespace.oid", ordered: true, sortCols: []int{0}},
		{sql: "SELECT n.oid AS x, y FROM t n ORDER BY 2, x", ordered: true, sortCols: []int{1, 0}},
		{sql: "SELECT a.attname FROM pg_attribute a ORDER BY a.attnum", ordered: true},
		{sql: "SELECT a, b FROM t ORDER BY lower(b)", ordered: true},
		{sql: `COPY (SELECT "a" FROM "public"."t" ) TO STDOUT (FORMAT "binary")`, ordered: false},
		{sql: `COPY (SELECT "a" FROM (SELECT a FROM t ORDER BY a) AS __unnamed_subquery ) TO STDOUT (FORMAT "binary")`, ordered: true},
		{sql: `COPY (SELECT "a" FROM (SELECT a FROM t ORDER BY a) AS s WHERE a > 1) TO STDOUT (FORMAT "binary")`, ordered: false},
		{sql: `COPY (SELECT "a" FROM (SELECT a FROM t) AS s) TO STDOUT (FORMAT "binary")`, ordered: false},
		{sql: "SELECT a FROM t UNION ALL SELECT b FROM u", ordered: false},
		{sql: "SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1", ordered: true, sortCols: []int{0}},
		{sql: "SELECT d.datname FROM pg_catalog.pg_database d ORDER BY 1", ordered: true, cluster: true, sortCols: []int{0}},
		{sql: "SELECT version(), (SELECT COUNT(*) FROM pg_settings WHERE name LIKE 'rds%')", ordered: true, version: true},
		{sql: "INSERT INTO t VALUES (1)", ordered: true},
		{sql: "this is not sql", ordered: true},
	} {
		si := analyse(tc.sql)
		if si.Ordered != tc.ordered || si.Cluster != tc.cluster || si.Version != tc.version || fmt.Sprint(si.SortCols) != fmt.Sprint(tc.sortCols) {
			t.Errorf("analyse(%q) = ordered %v cluster %v version %v sort %v; want %v %v %v %v",
				tc.sql, si.Ordered, si.Cluster, si.Version, si.SortCols, tc.ordered, tc.cluster, tc.version, tc.sortCols)
		}
	}
}

func TestMatchOID(t *testing.T) {
	type pair struct {
		want, got string
		ok        bool
	}
	for _, tc := range []struct {
		name  string
		pairs []pair
	}{
		{"system oids compare exactly", []pair{{"2200", "2200", true}, {"11", "12", false}}},
		{"user oids map", []pair{{"18122", "16390", true}, {"18122", "16390", true}, {"18161", "16400", true}}},
		{"a recorded oid keeps its answer", []pair{{"18122", "16390", true}, {"18122", "16391", false}}},
		{"two recorded oids may not share one", []pair{{"18122", "16390", true}, {"18161", "16390", false}}},
		{"equal user oids are mapped too", []pair{{"18122", "18122", true}, {"18161", "18122", false}}},
	} {
		m := newMapper()
		for i, p := range tc.pairs {
			err := m.matchOID(p.want, p.got)
			if (err == nil) != p.ok {
				t.Errorf("%s: pair %d (%s→%s): err %v, want ok=%v", tc.name, i, p.want, p.got, err, p.ok)
			}
		}
	}
	m := newMapper()
	if err := m.matchOID("18122", "16390"); err != nil {
		t.Fatal(err)
	}
	got := m.rewriteOIDs("WHERE c.oid = '18122' AND x = 18122 AND y = '18161'")
	if want := "WHERE c.oid = '16390' AND x = 18122 AND y = '18161'"; got != want {
		t.Errorf("rewriteOIDs = %q, want %q", got, want)
	}
}

// TestEqualRowDescriptionMapsItsTables: a RowDescription the server sends
// byte for byte as recorded still maps its table OIDs, so a later answer
// naming that table by another OID is a difference.
func TestEqualRowDescriptionMapsItsTables(t *testing.T) {
	rd := []byte(`{"Type":"RowDescription","Fields":[{"Name":"a","TableOID":18122,"TableAttributeNumber":1,"DataTypeOID":23,"DataTypeSize":4,"TypeModifier":-1,"Format":0}]}`)
	m := newMapper()
	if err := m.compareSingle("RowDescription", rd, rd); err != nil {
		t.Fatal(err)
	}
	if err := m.matchOID("18122", "18123"); err == nil {
		t.Error("after an equal RowDescription, table oid 18122 was accepted as 18123")
	}
}

func pgTime(tm time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(tm.Sub(pgEpoch).Microseconds()))
}

func TestCompareValue(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 37, 1, 123456000, time.UTC)
	later := now.Add(3 * time.Hour)
	whole := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		rule      valueRule
		want, got []byte
		ok        bool
	}{
		{"equal", ruleExact, []byte("a"), []byte("a"), true},
		{"different", ruleExact, []byte("a"), []byte("b"), false},
		{"NULL is not empty", ruleExact, nil, []byte{}, false},
		{"empty is not NULL", ruleExact, []byte{}, nil, false},
		{"any value", ruleAny, []byte("14"), []byte("0"), true},
		{"any value but not NULL", ruleAny, []byte("14"), nil, false},
		{"NOW() time", ruleBinary, pgTime(now), pgTime(later), true},
		{"whole-second user time is data", ruleBinary, pgTime(whole), pgTime(later), false},
		{"8-byte integer is data", ruleBinary, binary.BigEndian.AppendUint64(nil, 7), binary.BigEndian.AppendUint64(nil, 8), false},
		{"time against garbage", ruleBinary, pgTime(now), binary.BigEndian.AppendUint64(nil, 8), false},
		{"text timestamptz", ruleTextTime, []byte("2026-11-29 20:37:01.123456+00"), []byte("2026-11-29 23:37:01.5+00"), true},
		{"text timestamptz against text", ruleTextTime, []byte("2026-11-29 20:37:01.123456+00"), []byte("soon"), false},
	} {
		m := newMapper()
		err := m.compareValue(tc.rule, tc.want, tc.got)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// One recorded time must always come back as the same actual time.
	m := newMapper()
	if err := m.compareValue(ruleBinary, pgTime(now), pgTime(later)); err != nil {
		t.Fatal(err)
	}
	if err := m.compareValue(ruleBinary, pgTime(now), pgTime(later.Add(time.Microsecond))); err == nil {
		t.Error("a recorded time answered with two different times was accepted")
	}
}

func TestCompareRowsUnordered(t *testing.T) {
	r := func(vs ...string) row {
		out := make(row, len(vs))
		for i, v := range vs {
			if v != "NULL" {
				out[i] = []byte(v)
			}
		}
		return out
	}
	rules := []valueRule{ruleExact, ruleExact}
	want := []row{r("1", "a"), r("2", "NULL"), r("3", "c")}
	m := newMapper()
	if err := m.compareRows(rules, want, []row{r("3", "c"), r("1", "a"), r("2", "NULL")}, false, nil); err != nil {
		t.Errorf("unordered permutation: %v", err)
	}
	if err := m.compareRows(rules, want, []row{r("3", "c"), r("1", "a"), r("2", "NULL")}, true, nil); err == nil {
		t.Error("ordered permutation accepted")
	}
	if err := m.compareRows(rules, want, []row{r("3", "c"), r("1", "a"), r("2", "")}, false, nil); err == nil {
		t.Error("NULL answered as empty string accepted")
	}
	if err := m.compareRows(rules, want, []row{r("1", "a"), r("1", "a"), r("3", "c")}, false, nil); err == nil {
		t.Error("duplicate row instead of a missing one accepted")
	}
}

// TestCompareRowsTies: with ORDER BY keys known, rows tied on the keys may
// come in any order, but the keys' order is still enforced.
func TestCompareRowsTies(t *testing.T) {
	r := func(vs ...string) row {
		out := make(row, len(vs))
		for i, v := range vs {
			out[i] = []byte(v)
		}
		return out
	}
	rules := []valueRule{ruleExact, ruleExact}
	want := []row{r("11", "pg_a"), r("11", "pg_b"), r("2200", "t"), r("2200", "u")}
	for _, tc := range []struct {
		name string
		got  []row
		ok   bool
	}{
		{"same order", []row{r("11", "pg_a"), r("11", "pg_b"), r("2200", "t"), r("2200", "u")}, true},
		{"ties swapped", []row{r("11", "pg_b"), r("11", "pg_a"), r("2200", "u"), r("2200", "t")}, true},
		{"keys out of order", []row{r("2200", "t"), r("2200", "u"), r("11", "pg_a"), r("11", "pg_b")}, false},
		{"row moved across keys", []row{r("11", "pg_a"), r("2200", "pg_b"), r("11", "t"), r("2200", "u")}, false},
	} {
		err := newMapper().compareRows(rules, want, tc.got, true, []int{0})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestDecodeCopyRoundTrip: any rows, encoded as PostgreSQL does and split
// into arbitrary chunks, decode back to the same rows.
func TestDecodeCopyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ncols := rapid.IntRange(1, 6).Draw(t, "ncols")
		rows := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) row {
			r := make(row, ncols)
			for i := range r {
				if !rapid.Bool().Draw(t, "null") {
					r[i] = rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "field")
				}
			}
			return r
		}), 0, 10).Draw(t, "rows")
		var stream []byte
		for _, p := range encodeCopy(rows) {
			stream = append(stream, p...)
		}
		got, err := decodeCopy(stream, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(rows) {
			t.Fatalf("%d rows, want %d", len(got), len(rows))
		}
		for i := range rows {
			for j := range rows[i] {
				if (rows[i][j] == nil) != (got[i][j] == nil) || !bytes.Equal(rows[i][j], got[i][j]) {
					t.Fatalf("row %d field %d: %x, want %x", i, j, got[i][j], rows[i][j])
				}
			}
		}
		// A truncated stream is an error, never a panic or a silent success.
		if cut := rapid.IntRange(0, len(stream)-1).Draw(t, "cut"); cut < len(stream) {
			if _, err := decodeCopy(stream[:cut], true); err == nil {
				t.Fatalf("stream truncated to %d of %d bytes decoded without error", cut, len(stream))
			}
		}
	})
}

func TestDecodeCopyText(t *testing.T) {
	rows, err := decodeCopy([]byte("1\ta\n2\t\\N\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || string(rows[0][1]) != "a" || rows[1][1] != nil {
		t.Fatalf("decoded %q", rows)
	}
}

// FuzzDecodeCopy: arbitrary server bytes never panic the decoder, and what
// it accepts re-encodes to a stream that decodes to the same rows.
func FuzzDecodeCopy(f *testing.F) {
	for _, rows := range [][]row{nil, {{[]byte("a"), nil}}, {{[]byte{}}, {[]byte{1, 2}}}} {
		var s []byte
		for _, p := range encodeCopy(rows) {
			s = append(s, p...)
		}
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := decodeCopy(b, true)
		if err != nil {
			return
		}
		var s []byte
		for _, p := range encodeCopy(rows) {
			s = append(s, p...)
		}
		again, err := decodeCopy(s, true)
		if err != nil || len(again) != len(rows) {
			t.Fatalf("re-encoded rows do not decode: %v", err)
		}
	})
}

// FuzzRead: a transcript file is untrusted input; Read returns an error or a
// transcript sorted by seq, never panics.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"conn":1,"seq":1,"t":0,"dir":"F","type":"StartupMessage","msg":{"Type":"StartupMessage","ProtocolVersion":196608,"Parameters":{"database":"d","user":"u"}}}
{"conn":1,"seq":2,"t":0,"dir":"B","type":"AuthenticationOk","msg":{"Type":"AuthenticationOK"}}
`))
	f.Add([]byte(`{"conn":1,"seq":3,"dir":"F","type":"Describe","msg":{"Type":"Describe","ObjectType":"SS","Name":""}}`))
	f.Add([]byte(`{"conn":1,"seq":3,"dir":"F","type":"CopyData","msg":{"Type":"CopyData","Data":"zz"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := Read(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		for i := 1; i < len(tr.Messages); i++ {
			if tr.Messages[i].Seq <= tr.Messages[i-1].Seq {
				t.Fatalf("messages not strictly ordered by seq")
			}
		}
		_ = annotate(tr)
		_ = plan(tr)
		_ = tr.Databases()
	})
}

func TestReadRejects(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"not json", "{"},
		{"bad direction", `{"conn":1,"seq":1,"dir":"X","type":"Query","msg":{"Type":"Query","String":""}}`},
		{"unknown frontend message", `{"conn":1,"seq":1,"dir":"F","type":"Bogus","msg":{}}`},
		{"duplicate seq", `{"conn":1,"seq":1,"dir":"F","type":"Sync","msg":{"Type":"Sync"}}
{"conn":2,"seq":1,"dir":"F","type":"Sync","msg":{"Type":"Sync"}}`},
		{"missing msg", `{"conn":1,"seq":1,"dir":"B","type":"DataRow"}`},
	} {
		if _, err := Read(strings.NewReader(tc.in), "x"); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestAdminConninfo(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:55433":      "host=127.0.0.1 port=55433 user=postgres dbname=postgres sslmode=disable",
		"host=h port=1 user=u": "host=h port=1 user=u",
		"postgres://u@h:2/db":  "postgres://u@h:2/db",
	} {
		got, err := AdminConninfo(in)
		if err != nil || got != want {
			t.Errorf("AdminConninfo(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := AdminConninfo("nope"); err == nil {
		t.Error("AdminConninfo accepted an address without port")
	}
}
