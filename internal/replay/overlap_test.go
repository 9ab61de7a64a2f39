package replay

import (
	"fmt"
	"strings"
	"testing"
)

// transcriptOf builds a transcript from lines "conn dir type json", numbered
// in order.
func transcriptOf(t *testing.T, lines ...string) *Transcript {
	t.Helper()
	var b strings.Builder
	for i, l := range lines {
		f := strings.SplitN(l, " ", 4)
		fmt.Fprintf(&b, `{"conn":%s,"seq":%d,"t":0,"dir":%q,"type":%q,"msg":%s}`+"\n", f[0], i+1, f[1], f[2], f[3])
	}
	tr, err := Read(strings.NewReader(b.String()), "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func q(conn int, sql string) string {
	return fmt.Sprintf(`%d F Query {"Type":"Query","String":%q}`, conn, sql)
}

func cc(conn int, tag string) string {
	return fmt.Sprintf(`%d B CommandComplete {"Type":"CommandComplete","CommandTag":%q}`, conn, tag)
}

func rfq(conn int, status string) string {
	return fmt.Sprintf(`%d B ReadyForQuery {"Type":"ReadyForQuery","TxStatus":%q}`, conn, status)
}

// seqsInWindow lists the (at, until) seqs of inWindow for the client
// message with the given seq.
func seqsInWindow(tr *Transcript, seq int) [][2]int {
	var out [][2]int
	for i, m := range tr.Messages {
		if m.Seq != seq {
			continue
		}
		for _, p := range findOverlaps(tr).inWindow(tr, i) {
			out = append(out, [2]int{tr.Messages[p.at].Seq, tr.Messages[p.until].Seq})
		}
	}
	return out
}

func TestOverlapWindow(t *testing.T) {
	parse := func(conn int, sql string) string {
		return fmt.Sprintf(`%d F Parse {"Type":"Parse","Query":%q}`, conn, sql)
	}
	cases := []struct {
		name  string
		lines []string
		seq   int      // the COMMIT's seq
		want  [][2]int // snapshot points (at, until) inside its window
	}{
		{"repeatable read snapshot at the first Parse, confirmed at the first answer to the first Query", []string{
			q(1, "BEGIN"), cc(1, "BEGIN"), rfq(1, "T"), q(1, "INSERT INTO t VALUES (1)"), cc(1, "INSERT 0 1"), rfq(1, "T"),
			q(2, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ"), cc(2, "BEGIN"), rfq(2, "T"),
			q(1, "COMMIT"),                                               // seq 10
			parse(2, "SELECT max(a) FROM t"), `2 F Sync {"Type":"Sync"}`, // 11, 12
			cc(1, "COMMIT"), rfq(1, "I"),
			`2 B ParseComplete {"Type":"ParseComplete"}`, rfq(2, "T"),
			q(2, "COPY (SELECT max(a) FROM t) TO STDOUT"),                            // 17
			`2 B CopyOutResponse {"Type":"CopyOutResponse","ColumnFormatCodes":[0]}`, // 18
		}, 10, [][2]int{{11, 18}}},
		{"a snapshot taken after the COMMIT's answer is not in doubt", []string{
			q(1, "BEGIN"), cc(1, "BEGIN"), rfq(1, "T"),
			q(1, "COMMIT"), cc(1, "COMMIT"), rfq(1, "I"),
			q(2, "SELECT * FROM t"), cc(2, "SELECT 0"), rfq(2, "I"),
		}, 4, nil},
		{"read committed: a Parse takes no snapshot, its Query does", []string{
			q(1, "BEGIN"), cc(1, "BEGIN"), rfq(1, "T"),
			q(1, "COMMIT"),                                       // 4
			parse(2, "SELECT * FROM t"), q(2, "SELECT * FROM t"), // 5, 6
			cc(1, "COMMIT"), rfq(1, "I"), cc(2, "SELECT 0"), rfq(2, "I"),
		}, 4, [][2]int{{6, 9}}},
		{"session commands take no snapshot", []string{
			q(1, "BEGIN"), cc(1, "BEGIN"), rfq(1, "T"),
			q(1, "COMMIT"), q(2, "SET TimeZone = 'UTC'"), q(2, "DISCARD ALL"),
			cc(1, "COMMIT"), rfq(1, "I"), cc(2, "SET"), rfq(2, "I"), cc(2, "DISCARD ALL"), rfq(2, "I"),
		}, 4, nil},
		{"a repeatable read block takes one snapshot", []string{
			q(2, "BEGIN ISOLATION LEVEL REPEATABLE READ"), cc(2, "BEGIN"), rfq(2, "T"),
			q(2, "SELECT 1 FROM t"), cc(2, "SELECT 1"), rfq(2, "T"),
			q(1, "BEGIN"), cc(1, "BEGIN"), rfq(1, "T"),
			q(1, "COMMIT"), q(2, "SELECT 2 FROM t"), // 10, 11
			cc(1, "COMMIT"), rfq(1, "I"), cc(2, "SELECT 1"), rfq(2, "T"),
		}, 10, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := seqsInWindow(transcriptOf(t, c.lines...), c.seq)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("snapshots in the window of seq %d: %v, want %v", c.seq, got, c.want)
			}
		})
	}
}

// TestOverlapS12 pins the overlap the eight-writer capture holds: conn 9's
// COMMIT of snapshot 7 (seq 44980, answered at 44986) was in flight when
// conn 2's REPEATABLE READ transaction parsed its latest-snapshot query
// (44984), and PostgreSQL answered snapshot 6 at 45005. The replay must run
// conn 2 up to the first answer of that transaction (45004) before it sends
// the COMMIT.
func TestOverlapS12(t *testing.T) {
	tr := fixture(t, "s12_writers8")
	got := seqsInWindow(tr, 44980)
	if fmt.Sprint(got) != "[[44984 45004]]" {
		t.Fatalf("snapshots in the window of seq 44980: %v, want [[44984 45004]]", got)
	}
}
