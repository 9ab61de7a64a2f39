package replay

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Mutation tests: the mock server answers with the original recording while
// the replayer compares against a mutated copy. A mutation of a compared
// field must be reported at the mutated message; a mutation of a volatile
// field (docs/replay.md) must pass. This is what shows the normalizer is
// neither blind nor too strict.

func cloneTranscript(tr *Transcript) *Transcript {
	c := &Transcript{Name: tr.Name, Path: tr.Path, Messages: make([]Message, len(tr.Messages))}
	copy(c.Messages, tr.Messages) // Raw is never modified in place, only replaced
	return c
}

// find returns the index of the first message satisfying pred.
func find(t *testing.T, tr *Transcript, pred func(m Message) bool) int {
	t.Helper()
	for i, m := range tr.Messages {
		if pred(m) {
			return i
		}
	}
	t.Fatalf("%s: no message matches", tr.Name)
	return -1
}

// edit rewrites message i's JSON.
func edit(t *testing.T, tr *Transcript, i int, f func(v map[string]any)) {
	t.Helper()
	v, err := generic(tr.Messages[i].Raw)
	if err != nil {
		t.Fatal(err)
	}
	f(v)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tr.Messages[i].Raw = b
}

func isType(typ string) func(Message) bool {
	return func(m Message) bool { return m.Type == typ }
}

// copyRun returns the indexes of the CopyData messages of the first COPY
// OUT that answers a query containing s with at least min tuples.
func copyRun(t *testing.T, tr *Transcript, s string, min int) []int {
	t.Helper()
	for start, q := range tr.Messages {
		if q.Dir != Frontend || q.Type != "Query" || !strings.Contains(string(q.Raw), s) {
			continue
		}
		var out []int
		for i := start + 1; i < len(tr.Messages); i++ {
			m := tr.Messages[i]
			if m.Conn != q.Conn {
				continue
			}
			if m.Type == "CopyDone" || m.Dir == Frontend {
				break
			}
			if m.Type == "CopyData" {
				out = append(out, i)
			}
		}
		if len(out) > 0 && len(copyRows(t, tr, out)) >= min {
			return out
		}
	}
	t.Fatalf("no COPY OUT with %d rows answers %q", min, s)
	return nil
}

// cutAfter returns the seq of the first ReadyForQuery of m's connection at
// or after m in tr.
func cutAfter(tr *Transcript, m Message) int {
	for _, x := range tr.Messages {
		if x.Seq >= m.Seq && x.Conn == m.Conn && x.Type == "ReadyForQuery" {
			return x.Seq
		}
	}
	return tr.Messages[len(tr.Messages)-1].Seq
}

// truncate keeps connection conn's messages with seq ≤ cut.
func truncate(tr *Transcript, cut, conn int) *Transcript {
	out := &Transcript{Name: tr.Name, Path: tr.Path}
	for _, m := range tr.Messages {
		if m.Seq <= cut && m.Conn == conn {
			out.Messages = append(out.Messages, m)
		}
	}
	return out
}

// encodeCopy renders rows as a binary COPY stream, one CopyData per tuple
// with the header glued to the first, as PostgreSQL sends it.
func encodeCopy(rows []row) [][]byte {
	hdr := append(append([]byte{}, copySignature...), 0, 0, 0, 0, 0, 0, 0, 0)
	var out [][]byte
	for i, r := range rows {
		var b []byte
		if i == 0 {
			b = append(b, hdr...)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(r)))
		for _, f := range r {
			if f == nil {
				b = binary.BigEndian.AppendUint32(b, 0xffffffff)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
		out = append(out, b)
	}
	if len(rows) == 0 {
		return [][]byte{append(hdr, 0xff, 0xff)}
	}
	return append(out, []byte{0xff, 0xff})
}

// setCopy replaces the CopyData run idx with the given payloads.
func setCopy(t *testing.T, tr *Transcript, idx []int, payloads [][]byte) *Transcript {
	t.Helper()
	if len(payloads) > len(idx) {
		t.Fatalf("cannot grow a COPY run")
	}
	out := &Transcript{Name: tr.Name, Path: tr.Path}
	drop := map[int]bool{}
	for k, i := range idx {
		if k < len(payloads) {
			tr.Messages[i].Raw, _ = json.Marshal(map[string]string{"Type": "CopyData", "Data": hex.EncodeToString(payloads[k])})
		} else {
			drop[i] = true
		}
	}
	for i, m := range tr.Messages {
		if !drop[i] {
			out.Messages = append(out.Messages, m)
		}
	}
	return out
}

func copyRows(t *testing.T, tr *Transcript, idx []int) []row {
	t.Helper()
	var stream []byte
	for _, i := range idx {
		var cd struct{ Data string }
		if err := json.Unmarshal(tr.Messages[i].Raw, &cd); err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(cd.Data)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
	}
	rows, err := decodeCopy(stream, true)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestReplayMutations(t *testing.T) {
	originals := map[string]*Transcript{}
	for _, n := range []string{"s01_basic", "s08_contention", "s10_psql"} {
		originals[n] = fixture(t, n)
	}
	cases := []struct {
		name   string
		from   string
		pass   bool                                                  // the mutation touches only volatile fields
		mutate func(t *testing.T, tr *Transcript) (*Transcript, int) // returns the mutated message index
	}{
		{"data row value", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool {
				return m.Type == "DataRow" && string(m.Raw) == `{"Type":"DataRow","Values":[{"text":"1"}]}`
			})
			edit(t, tr, i, func(v map[string]any) { v["Values"] = []any{map[string]any{"text": "2"}} })
			return tr, i
		}},
		{"command tag", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("CommandComplete"))
			edit(t, tr, i, func(v map[string]any) { v["CommandTag"] = "SELECT 7" })
			return tr, i
		}},
		{"row description type", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("RowDescription"))
			edit(t, tr, i, func(v map[string]any) {
				v["Fields"].([]any)[0].(map[string]any)["DataTypeOID"] = 1043
			})
			return tr, i
		}},
		{"transaction status", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("ReadyForQuery"))
			edit(t, tr, i, func(v map[string]any) { v["TxStatus"] = "T" })
			return tr, i
		}},
		{"missing data row", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool {
				return m.Type == "DataRow" && strings.Contains(string(m.Raw), "pg_aggregate")
			})
			tr.Messages = append(tr.Messages[:i:i], tr.Messages[i+1:]...)
			return tr, i
		}},
		{"binary copy field", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			idx := copyRun(t, tr, `FROM \"public\".\"ducklake_schema\"`, 1)
			rows := copyRows(t, tr, idx)
			rows[0][4] = []byte("mainx") // schema_name
			return setCopy(t, tr, idx, encodeCopy(rows)), idx[0]
		}},
		{"extra copy row", "s01_basic", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			idx := copyRun(t, tr, `FROM \"public\".\"ducklake_column\"`, 3)
			rows := copyRows(t, tr, idx)
			return setCopy(t, tr, idx, encodeCopy(rows[:len(rows)-1])), idx[0]
		}},
		{"error sqlstate", "s08_contention", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("ErrorResponse"))
			edit(t, tr, i, func(v map[string]any) { v["Code"] = "40001" })
			return tr, i
		}},
		{"error detail", "s08_contention", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("ErrorResponse"))
			edit(t, tr, i, func(v map[string]any) { v["Detail"] = "Key (snapshot_id)=(99) already exists." })
			return tr, i
		}},
		{"ordered rows reversed", "s10_psql", false, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool {
				return m.Type == "RowDescription" && strings.Contains(string(m.Raw), `"snapshot_id"`)
			})
			j := i + 1
			for tr.Messages[j].Type == "DataRow" {
				j++
			}
			if j-i < 3 {
				t.Fatal("need at least 2 rows")
			}
			for a, b := i+1, j-1; a < b; a, b = a+1, b-1 {
				tr.Messages[a].Raw, tr.Messages[b].Raw = tr.Messages[b].Raw, tr.Messages[a].Raw
			}
			return tr, i + 1
		}},
		// Volatile fields: all of these must still pass.
		{"backend key", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("BackendKeyData"))
			edit(t, tr, i, func(v map[string]any) { v["ProcessID"] = 4242; v["SecretKey"] = "01020304" })
			return tr, i
		}},
		{"server version", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool { return strings.Contains(string(m.Raw), `"Name":"server_version"`) })
			edit(t, tr, i, func(v map[string]any) { v["Value"] = "16.4 (moraine)" })
			return tr, i
		}},
		{"parameter status order", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("ParameterStatus"))
			tr.Messages[i].Raw, tr.Messages[i+1].Raw = tr.Messages[i+1].Raw, tr.Messages[i].Raw
			return tr, i
		}},
		{"version text", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool {
				return m.Type == "DataRow" && strings.Contains(string(m.Raw), "PostgreSQL 15")
			})
			edit(t, tr, i, func(v map[string]any) {
				v["Values"].([]any)[0] = map[string]any{"text": "PostgreSQL 16.4 (moraine)"}
			})
			return tr, i
		}},
		{"relpages", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, func(m Message) bool {
				return m.Type == "DataRow" && strings.Contains(string(m.Raw), "pg_aggregate")
			})
			edit(t, tr, i, func(v map[string]any) { v["Values"].([]any)[2] = map[string]any{"text": "77"} })
			return tr, i
		}},
		{"error source location", "s08_contention", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			i := find(t, tr, isType("ErrorResponse"))
			edit(t, tr, i, func(v map[string]any) { v["File"] = "moraine.go"; v["Line"] = 1; v["Routine"] = "x" })
			return tr, i
		}},
		{"copy chunking and unordered rows", "s01_basic", true, func(t *testing.T, tr *Transcript) (*Transcript, int) {
			idx := copyRun(t, tr, `FROM \"public\".\"ducklake_column\"`, 3)
			rows := copyRows(t, tr, idx)
			for a, b := 0, len(rows)-1; a < b; a, b = a+1, b-1 {
				rows[a], rows[b] = rows[b], rows[a]
			}
			var all []byte
			for _, p := range encodeCopy(rows) {
				all = append(all, p...)
			}
			return setCopy(t, tr, idx, [][]byte{all}), idx[0]
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := originals[tc.from]
			mut, at := tc.mutate(t, cloneTranscript(orig))
			// Replaying past the mutated answer proves nothing more: cut both
			// conversations at the connection's next ReadyForQuery after it.
			// Other connections are irrelevant to the mock, which answers
			// each connection from the recording alone.
			target := mut.Messages[at]
			cut := cutAfter(orig, target)
			orig, mut = truncate(orig, cut, target.Conn), truncate(mut, cut, target.Conn)
			ms := startMock(t, orig)
			res := Replay(context.Background(), mut, Options{Addr: ms.addr(), Timeout: 3 * time.Second})
			if tc.pass {
				if !res.Passed() {
					t.Fatalf("volatile mutation reported: %v\n%s", res.Err, Explain(res.Err))
				}
				return
			}
			var mm *Mismatch
			if !errors.As(res.Err, &mm) {
				t.Fatalf("mutation at seq %d not reported (err %v)", target.Seq, res.Err)
			}
			if want := target; mm.Conn != want.Conn || mm.Seq > want.Seq {
				t.Fatalf("mutation at conn %d seq %d reported at conn %d seq %d: %s", want.Conn, want.Seq, mm.Conn, mm.Seq, mm.Reason)
			}
			for j := len(mut.Messages) - 1; j >= 0; j-- {
				if p := mut.Messages[j]; p.Seq < target.Seq && p.Dir == Frontend {
					if mm.Seq < p.Seq {
						t.Fatalf("mismatch reported at seq %d, before the query (seq %d) of the mutated answer: %s", mm.Seq, p.Seq, mm.Reason)
					}
					break
				}
			}
			t.Logf("reported: %v", mm)
		})
	}
}
