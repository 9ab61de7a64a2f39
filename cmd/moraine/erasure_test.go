package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/verify"
)

// TestErasureCommand: on a live server's store (read as a reader), a table
// whose file gained a delete file lists the retained snapshots that still
// show that file, the scheduled file under its path, and a window that sums
// its parts; --json says the same; an unknown table and bad usage exit 2.
func TestErasureCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, conn := serveLake(ctx, t)
	// Snapshot 1 creates main.t with file 10; snapshot 2 deletes from it
	// (delete file 11) and schedules an older file 9 of the table.
	for _, q := range []string{
		`BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;
		INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 11);
		INSERT INTO "public".ducklake_table VALUES (1, NULL, 1, NULL, 0, 't', 't/', true);
		INSERT INTO "public".ducklake_data_file VALUES (10, 1, 1, NULL, NULL, 'ducklake-10.parquet', true, 'parquet', 5, 100, 10, 0, NULL, NULL, NULL, NULL, 1);
		INSERT INTO "public".ducklake_table_stats VALUES (1, 5, 5, 100);
		COMMIT;`,
		`BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;
		INSERT INTO "public".ducklake_snapshot VALUES (2, NOW(), 1, 2, 12);
		INSERT INTO "public".ducklake_delete_file VALUES (11, 1, 2, NULL, 10, 'ducklake-11-delete.parquet', true, 'parquet', 2, 50, 10, NULL, NULL, 1);
		INSERT INTO "public".ducklake_files_scheduled_for_deletion VALUES (9, 'main/t/ducklake-9.parquet', true, NOW());
		COMMIT;`,
	} {
		if _, err := conn.Exec(ctx, q).ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Add(time.Hour)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := erasureMain(ctx, args, now, &out, &errb)
		return code, out.String() + errb.String()
	}
	code, out := run("--store", url, "--table", "main.t", "--object-retention", "30d")
	t.Logf("moraine erasure --table main.t --object-retention 30d:\n%s", out)
	for _, want := range []string{
		"lake.public: table main.t (id 1)",
		"retained snapshots referencing deleted rows: 2",
		"  snapshot 1 at ",
		"  snapshot 2 at ",
		": data files [10]",
		"files scheduled for deletion still holding bytes: 1",
		"  file 9 main/t/ducklake-9.parquet scheduled ",
		"(this table)",
		"(oldest retained snapshot)",
		"object retention    720h0m0s",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want %q in:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "snapshot 0 at") {
		t.Fatalf("snapshot 0 predates the table's files:\n%s", out)
	}

	code, out = run("--store", url, "--table", "1", "--object-retention", "1 week", "--json")
	if code != 0 {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
	var reps []verify.ErasureJSON
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("json: %v:\n%s", err, out)
	}
	if len(reps) != 1 || len(reps[0].Snapshots) != 2 || len(reps[0].Scheduled) != 1 || !reps[0].Scheduled[0].Attributed {
		t.Fatalf("json report: %+v", reps)
	}
	w := reps[0].Window
	// The delete began at snapshot 2 and the oldest snapshot is 0, both
	// within a second of the test start, an hour before now.
	if w.ObjectRetention != 7*24*3600 || w.CompactionLag < 3500 || w.CompactionLag > 3700 ||
		w.SnapshotRetention < w.CompactionLag || w.SnapshotRetention > 3700 ||
		math.Abs(w.Total-(w.CompactionLag+w.SnapshotRetention+w.ObjectRetention)) > 1e-3 {
		t.Fatalf("window: %+v", w)
	}

	// The bound from configuration: with every term given, the longer of
	// the two paths (data files: 7d+10d+1d+2d+1d+30d = 51d; the store:
	// 7d+10d+1d+24h+6m); with one missing, unbounded, naming it.
	code, out = run("--store", url, "--table", "main.t", "--compaction-interval", "7d", "--maintenance-interval", "1d",
		"--snapshot-retention", "10d", "--cleanup-delay", "2d", "--object-retention", "30d", "--backup-retention", "0")
	if code != 0 || !strings.Contains(out, "upper bound from configuration:\n  1224h0m0s\n") ||
		!strings.Contains(out, "store rewrite            24h0m0s") {
		t.Fatalf("configured bound: exit %d:\n%s", code, out)
	}
	code, out = run("--store", url, "--table", "main.t", "--compaction-interval", "7d")
	if code != 0 || !strings.Contains(out, "unbounded: not configured: snapshot retention (--snapshot-retention), maintenance interval (--maintenance-interval), cleanup delay (--cleanup-delay), backup retention (--backup-retention)") {
		t.Fatalf("unconfigured bound: exit %d:\n%s", code, out)
	}

	if code, out := run("--store", url, "--table", "main.nope"); code != 2 || !strings.Contains(out, "unknown table") {
		t.Fatalf("unknown table: exit %d: %s", code, out)
	}
	if code, _ := run("--store", url); code != 2 {
		t.Fatalf("missing --table: exit %d", code)
	}
	if code, _ := run("--store", url, "--table", "t", "--object-retention", "soon"); code != 2 {
		t.Fatalf("bad --object-retention: exit %d", code)
	}
}
