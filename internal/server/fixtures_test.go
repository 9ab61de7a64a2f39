package server

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/replay"
)

// TestReplicaAdmitsDuckLakeReads: over every statement DuckDB and DuckLake
// sent in the captured conversations, the replica's filter admits exactly
// the reads (so a read-only attach works: BEGIN, SELECT, COPY … TO,
// DISCARD, COMMIT) and refuses every INSERT, UPDATE, DELETE, DDL and COPY
// FROM.
func TestReplicaAdmitsDuckLakeReads(t *testing.T) {
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s: %v", dir, err)
	}
	writes := map[string]bool{"insert": true, "update": true, "delete": true, "create": true, "alter": true, "drop": true, "truncate": true}
	var reads, refused int
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m struct {
				Dir, Type string
				Msg       struct{ String, Query string }
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Dir != "F" || (m.Type != "Query" && m.Type != "Parse") {
				continue
			}
			q := m.Msg.String + m.Msg.Query
			shape := statementShape(q)
			want := writes[shape] || (shape == "copy" && strings.Contains(strings.ToUpper(q), "FROM STDIN"))
			verb, got := writeVerb(q)
			if got != want {
				t.Errorf("%s: writeVerb = %q, %v; want write=%v for %.200q", filepath.Base(f), verb, got, want, q)
			}
			if got {
				refused++
			} else {
				reads++
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	if reads < 1000 || refused < 100 {
		t.Fatalf("only %d reads and %d writes in the fixtures", reads, refused)
	}
	t.Logf("%d read statements admitted, %d writes refused", reads, refused)
}
