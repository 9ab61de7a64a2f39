package transfer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/transfer"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestTransferAtScale imports and exports a catalog of many data files (two
// column statistics each) and checks that both copies hold every row of the
// source; it logs both directions' times beside pg_dump | pg_restore of the
// same database. The catalog is s01's lake on PostgreSQL plus one snapshot
// registering the files, so it stays one DuckLake would accept (moraine
// verifies it). The default is 2 000 files; MORAINE_TRANSFER_SCALE=<data
// files> (e.g. 100000) measures at size.
func TestTransferAtScale(t *testing.T) {
	files := os.Getenv("MORAINE_TRANSFER_SCALE")
	if files == "" {
		files = "2000"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	pg := testenv.Postgres(t)
	testenv.LockFixtureDatabases(t, pg)
	lakeOnPostgres(t, ctx, pg, "s01_basic")
	src := withDatabase(t, pg, "s01_basic")
	sqlExec(t, ctx, src, fmt.Sprintf(`DO $$
DECLARE s bigint; f bigint; r bigint; tid bigint;
BEGIN
  SELECT max(snapshot_id) + 1, max(next_file_id) INTO s, f FROM ducklake_snapshot;
  SELECT table_id, next_row_id INTO tid, r FROM ducklake_table_stats ORDER BY table_id LIMIT 1;
  INSERT INTO ducklake_snapshot SELECT s, now(), schema_version, next_catalog_id, f + %[1]s FROM ducklake_snapshot WHERE snapshot_id = s - 1;
  INSERT INTO ducklake_snapshot_changes VALUES (s, 'inserted_into_table:' || tid, NULL, NULL, NULL);
  INSERT INTO ducklake_data_file SELECT f + i, tid, s, NULL, NULL, 'bulk-' || i || '.parquet', true, 'parquet', 10, 1000, 100, r + i * 10, NULL, NULL, NULL, NULL, 1
    FROM generate_series(0, %[1]s - 1) i;
  INSERT INTO ducklake_file_column_stats SELECT f + i, tid, c, 100, 10, 0, (i * 10)::text, (i * 10 + 9)::text, NULL, NULL
    FROM generate_series(0, %[1]s - 1) i, generate_series(1, 2) c;
  UPDATE ducklake_table_stats SET next_row_id = r + %[1]s * 10, record_count = record_count + %[1]s * 10 WHERE table_id = tid;
END $$`, files))

	r := testserver.Start(t, "file://"+t.TempDir(), "--row-id-hold=false")
	start := time.Now()
	sum, err := transfer.Import(ctx, src, r.Conninfo("postgres"), "public", "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	importTime := time.Since(start)
	want := contents(t, ctx, src)
	same(t, "import of the bulk lake", want, contents(t, ctx, r.Conninfo("big")))

	_, drop, err := workload.FreshDatabase(ctx, pg, "exported")
	if err != nil {
		t.Fatal(err)
	}
	defer drop(context.Background())
	exported := newestDatabase(t, ctx, pg, "exported")
	start = time.Now()
	if _, err := transfer.Export(ctx, r.Conninfo("postgres"), "big", withDatabase(t, pg, exported), "public", nil); err != nil {
		t.Fatal(err)
	}
	exportTime := time.Since(start)
	same(t, "export of the bulk lake", want, contents(t, ctx, withDatabase(t, pg, exported)))

	_, dropR, err := workload.FreshDatabase(ctx, pg, "restored")
	if err != nil {
		t.Fatal(err)
	}
	defer dropR(context.Background())
	restored := newestDatabase(t, ctx, pg, "restored")
	bin := "/usr/lib/postgresql/15/bin/"
	start = time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf(`%spg_dump -Fc -d '%s' | %spg_restore -d '%s'`, bin, src, bin, withDatabase(t, pg, restored)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_dump | pg_restore: %v\n%s", err, out)
	}
	dumpTime := time.Since(start)
	t.Logf("%s data files: %d rows, %d bytes; import %v, export %v, pg_dump | pg_restore %v",
		files, sum.Rows, sum.Bytes, importTime.Round(time.Millisecond), exportTime.Round(time.Millisecond), dumpTime.Round(time.Millisecond))
}
