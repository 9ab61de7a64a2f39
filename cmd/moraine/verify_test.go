package main

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/sql"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestVerifyCommand: moraine verify on a live server's store (as a
// reader, while the writer keeps it open) says "consistent" and exits 0;
// after the writer hard-deletes a file that a stats row still names
// without scheduling it, it prints the violations and exits 1; an empty
// store and bad usage exit 2.
func TestVerifyCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "file://" + t.TempDir()
	st, err := server.OpenStack(ctx, url, server.StackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	wire, err := pgwire.New(pgwire.Config{TrustedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, sql.New(memcat.On(st.Cat)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go wire.Serve(ln)
	defer wire.Close()
	conn, err := pgconn.Connect(ctx, "postgres://moraine@"+ln.Addr().String()+"/lake?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := workload.Init(ctx, conn, "public", "/lake/"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := verifyMain(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run("--store", url); code != 0 || strings.TrimSpace(out) != "consistent" {
		t.Fatalf("fresh catalog: exit %d:\n%s", code, out)
	}
	// A stats row for file 7, which has no data-file row and is not scheduled.
	if _, err := conn.Exec(ctx, `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;
		INSERT INTO "public".ducklake_file_column_stats VALUES (7, 1, 1, 8, 1, 0, '1', '1', NULL, NULL);
		COMMIT;`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	code, out := run("--store", url)
	if code != 1 || !strings.Contains(out, "lake.public: dangling-file-stats: ducklake_file_column_stats row names data file 7") ||
		!strings.Contains(out, "lake.public: unscheduled-file: file 7") || !strings.Contains(out, "2 violation(s)") {
		t.Fatalf("broken catalog: exit %d:\n%s", code, out)
	}
	if code, out := run("--store", "mem://"); code != 2 || !strings.Contains(out, "no database") {
		t.Fatalf("empty store: exit %d: %s", code, out)
	}
	if code, _ := run("extra"); code != 2 {
		t.Fatalf("stray argument: exit %d", code)
	}
}
