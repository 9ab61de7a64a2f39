package sql

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
)

// TestWire drives the executor through pgwire with a real client library:
// simple and extended protocol, binary results, COPY in both directions,
// transaction status, and two databases on one server.
func TestWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := wiretest.Serve(t, New(memcat.NewServer("lake1")), nil)
	connect := func(db string) *pgconn.PgConn {
		c, err := pgconn.Connect(ctx, "postgres://moraine@"+addr+"/"+db+"?sslmode=disable")
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		return c
	}
	c := connect("lake1")
	defer c.Close(ctx)
	exec := func(sql string) []*pgconn.Result {
		t.Helper()
		rs, err := c.Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return rs
	}
	exec(`CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE, "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT)`)
	exec(`BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ`)
	if c.TxStatus() != 'T' {
		t.Fatalf("status %c after BEGIN", c.TxStatus())
	}
	exec(`INSERT INTO "public".ducklake_snapshot VALUES (0, NOW(), 0, 1, 0); INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 0)`)
	if _, err := c.Exec(ctx, `INSERT INTO "public".ducklake_snapshot VALUES (1, NOW(), 1, 2, 0)`).ReadAll(); err == nil || !strings.Contains(err.Error(), "unique") {
		t.Fatalf("duplicate snapshot: %v", err)
	}
	if c.TxStatus() != 'E' {
		t.Fatalf("status %c after error", c.TxStatus())
	}
	exec(`ROLLBACK`)
	exec(`INSERT INTO "public".ducklake_snapshot VALUES (0, NOW(), 0, 1, 0), (1, NOW(), 1, 2, 0)`)

	// Extended protocol with binary results.
	rr := c.ExecParams(ctx, `SELECT snapshot_id, schema_version FROM "public".ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM "public".ducklake_snapshot)`, nil, nil, nil, []int16{1, 1}).Read()
	if rr.Err != nil || len(rr.Rows) != 1 || binary.BigEndian.Uint64(rr.Rows[0][0]) != 1 {
		t.Fatalf("extended read: %+v", rr)
	}
	// Binary COPY OUT, DuckDB's framing: header with the first row.
	var out bytes.Buffer
	tag, err := c.CopyTo(ctx, &out, `COPY (SELECT "snapshot_id" FROM "public"."ducklake_snapshot" ) TO STDOUT (FORMAT "binary")`)
	if err != nil || tag.String() != "COPY 2" {
		t.Fatalf("copy out: %v %v", tag, err)
	}
	want := "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" +
		"\x00\x01\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00" +
		"\x00\x01\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01" + "\xff\xff"
	if out.String() != want {
		t.Fatalf("copy out bytes %q", out.String())
	}
	// Binary COPY IN of what we just read, into another table.
	exec(`CREATE TABLE "public"."ducklake_schema_versions"("snapshot_id" BIGINT)`)
	tag, err = c.CopyFrom(ctx, bytes.NewReader(out.Bytes()), `COPY "public"."ducklake_schema_versions" FROM STDIN (FORMAT BINARY)`)
	if err != nil || tag.String() != "COPY 2" {
		t.Fatalf("copy in: %v %v", tag, err)
	}
	rs := exec(`SELECT count(*), max(snapshot_id) FROM "public"."ducklake_schema_versions"`)
	if got := string(rs[0].Rows[0][0]) + "," + string(rs[0].Rows[0][1]); got != "2,1" {
		t.Fatalf("after copy in: %s", got)
	}
	// A second database on the same server is a separate catalog; it
	// exists once created.
	if _, err := pgconn.Connect(ctx, "postgres://moraine@"+addr+"/lake2?sslmode=disable"); err == nil || !strings.Contains(err.Error(), `database "lake2" does not exist (SQLSTATE 3D000)`) {
		t.Fatalf("connect to a missing database: %v", err)
	}
	exec(`CREATE DATABASE lake2`)
	c2 := connect("lake2")
	defer c2.Close(ctx)
	if _, err := c2.Exec(ctx, `SELECT * FROM "public".ducklake_snapshot`).ReadAll(); err == nil || !strings.Contains(err.Error(), "42P01") {
		t.Fatalf("lake2 sees lake1's table: %v", err)
	}
	// Unsupported statements name the construct.
	if _, err := c.Exec(ctx, `CREATE TABLE users(id int)`).ReadAll(); err == nil || !strings.Contains(err.Error(), "0A000") {
		t.Fatalf("non-DuckLake table: %v", err)
	}
}
