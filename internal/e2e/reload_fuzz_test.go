package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/slate"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/verify"
)

// reloadVocabulary is what FuzzStatementsReload draws statements from:
// DuckLake's own table shapes, the same tables altered or misnamed, rows of
// every kind, schemas and transaction control. %d is replaced by a number
// from the input.
var reloadVocabulary = []string{
	`CREATE TABLE ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT)`,
	`CREATE TABLE ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMPTZ, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT)`,
	`CREATE TABLE ducklake_schema(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)`,
	`CREATE TABLE ducklake_inlined_data_%d_1(row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, a INTEGER, b VARCHAR)`,
	`CREATE TABLE ducklake_x%d (a int)`,
	`CREATE TABLE other%d (a int)`,
	`CREATE SCHEMA s%d`,
	`CREATE TABLE s%d.ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT)`,
	`ALTER TABLE ducklake_snapshot ADD COLUMN c%d BIGINT`,
	`ALTER TABLE ducklake_metadata RENAME COLUMN value TO v%d`,
	`ALTER TABLE ducklake_metadata DROP COLUMN scope`,
	`ALTER TABLE ducklake_inlined_data_1_1 ADD COLUMN c%d VARCHAR`,
	`DROP TABLE ducklake_metadata`,
	`DROP TABLE ducklake_inlined_data_%d_1`,
	`INSERT INTO ducklake_metadata VALUES ('k%d', 'v', NULL, NULL)`,
	`INSERT INTO ducklake_metadata VALUES ('k', repeat('x', %d), 'table', 1)`,
	`INSERT INTO ducklake_snapshot VALUES (%d, NOW(), 0, 1, 0)`,
	`INSERT INTO ducklake_inlined_data_1_1 VALUES (%d, 1, NULL, 7, 'x')`,
	`UPDATE ducklake_metadata SET value = 'w%d'`,
	`DELETE FROM ducklake_metadata WHERE key = 'k%d'`,
	`DELETE FROM ducklake_snapshot WHERE snapshot_id = %d`,
	`BEGIN`, `COMMIT`, `ROLLBACK`,
	`BEGIN; INSERT INTO ducklake_metadata VALUES ('t%d', 'v', NULL, NULL); CREATE TABLE ducklake_y%d (a int); COMMIT`,
}

// FuzzStatementsReload: whatever sequence of statements a client sends —
// accepted or refused — the store it leaves loads again after a restart and
// passes the checker. A statement the store cannot persist and reload must
// be refused, never stored.
func FuzzStatementsReload(f *testing.F) {
	f.Add([]byte{0, 14, 1, 16}, "SELECT 1")
	f.Add([]byte{4, 8, 0, 9, 10, 14}, "CREATE TABLE ducklake_evil (a int)")
	f.Add([]byte{22, 0, 14, 3, 17, 11, 23}, "")
	f.Add([]byte{24, 7, 6, 12, 13}, "ALTER TABLE ducklake_snapshot ADD COLUMN z int")
	f.Fuzz(func(t *testing.T, program []byte, raw string) {
		if len(program) > 64 {
			program = program[:64]
		}
		dir, err := os.MkdirTemp("", "reload")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		store := "file://" + dir
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := testserver.Start(t, store)
		c, err := pgconn.Connect(ctx, r.Conninfo("lake"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(program); i += 2 {
			stmt := reloadVocabulary[int(program[i])%len(reloadVocabulary)]
			n := int(program[i+1])
			_, _ = c.Exec(ctx, fmt.Sprintf(stmt, n, n)).ReadAll()
		}
		if raw != "" {
			_, _ = c.Exec(ctx, raw).ReadAll()
		}
		c.Close(ctx)
		r.Stop(t)

		// It loads again (Start fails the test otherwise) and checks.
		r = testserver.Start(t, store)
		r.Stop(t)
		err = server.ReadSnapshotURL(ctx, store, func(snap *slate.Snapshot, _ slate.Stats) error {
			vs, err := verify.CheckStore(ctx, snap)
			if err == nil && len(vs) > 0 {
				err = fmt.Errorf("%d violations, first: %v", len(vs), vs[0])
			}
			return err
		})
		if err != nil {
			t.Fatalf("after %v %q: %v", program, raw, err)
		}
	})
}
