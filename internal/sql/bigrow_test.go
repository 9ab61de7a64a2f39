package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestHugeChangesMadeCommits: DuckLake writes one changes_made string per
// commit, and a commit that creates a thousand tables writes ~30 kB. Such a
// row once sent the heap's placement into an endless loop (it is larger
// than a page); it must commit and read back intact, next to small rows.
func TestHugeChangesMadeCommits(t *testing.T) {
	ctx := context.Background()
	_, s := lakeSession(t, `CREATE TABLE ducklake_snapshot_changes (snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR)`)
	var parts []string
	for i := 0; i < 1000; i++ {
		parts = append(parts, fmt.Sprintf(`created_table:"main"."t%06d"`, i))
	}
	big := strings.Join(parts, ",")
	for i := 0; i < 6; i++ {
		v := "small"
		if i%2 == 0 {
			v = big
		}
		out := runSQL(ctx, s, fmt.Sprintf(`BEGIN; INSERT INTO ducklake_snapshot_changes VALUES (%d, '%s'); COMMIT`, i, v), "")
		if strings.Contains(out, "ERROR") {
			t.Fatalf("commit %d: %s", i, out)
		}
	}
	out := runSQL(ctx, s, `SELECT snapshot_id, length(changes_made), ctid FROM ducklake_snapshot_changes ORDER BY snapshot_id`, "")
	// TOASTed rows take ~50 bytes of a page: all six share page 0.
	for i := 0; i < 6; i++ {
		n := 5
		if i%2 == 0 {
			n = len(big)
		}
		if want := fmt.Sprintf("%d | %d | (0,%d)\n", i, n, i+1); !strings.Contains(out, want) {
			t.Fatalf("want %q in:\n%s", want, out)
		}
	}
}
