package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
	"github.com/moraine-db/moraine/internal/workload"
)

// serveLake opens a stack on a fresh local-directory store at url, serves
// it on a loopback port and returns a connection to its database "lake",
// with DuckLake's catalog tables created in schema public. The read-only
// commands (verify, erasure) then read url beside this live writer.
// Everything is closed when the test ends.
func serveLake(ctx context.Context, t *testing.T) (url string, conn *pgconn.PgConn) {
	t.Helper()
	url = "file://" + t.TempDir()
	st, err := server.OpenStack(ctx, url, server.StackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	addr := wiretest.Serve(t, server.NewExecutor(st, nil), nil)
	conn, err = pgconn.Connect(ctx, "postgres://moraine@"+addr+"/lake?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := workload.Init(ctx, conn, "public", "/lake/"); err != nil {
		t.Fatal(err)
	}
	return url, conn
}
