package bench

import (
	"testing"

	"github.com/moraine-db/moraine/internal/replay"
)

// TestCommitKinds classifies s11's commits by what their snapshots say they
// changed: its script makes 60 inlined inserts, 10 file inserts, 10
// updates (a delete and an insert of inlined rows) and 10 deletes, after
// the table's creation.
func TestCommitKinds(t *testing.T) {
	tr, err := replay.LoadFixture("s11_commit_mix")
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := commitKinds(tr)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i, k := range kinds {
		if m := tr.Messages[i]; m.Dir != replay.Backend || m.Type != "CommandComplete" {
			t.Fatalf("kind %q at message %d, a %c %s", k, i, m.Dir, m.Type)
		}
		count[k]++
	}
	want := map[string]int{"created_table": 1, "inlined_insert": 60, "inserted_into_table": 10,
		"inlined_insert+inlined_delete": 10, "inlined_delete": 10}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s: %d commits, want %d (all: %v)", k, count[k], n, count)
		}
	}
	if len(count) != len(want) {
		t.Errorf("kinds %v, want %v", count, want)
	}
}
