package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
	"github.com/moraine-db/moraine/internal/testenv"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory for the
// test and unmounts it after.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		testenv.Unavailable(t, "cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestFullDiskServesReads: when the store's disk fills up, the server does
// not exit: it serves reads of what is durable, refuses writes with 58030
// naming the cause, and resumes writes by itself once space is freed —
// with every acknowledged commit in place.
func TestFullDiskServesReads(t *testing.T) {
	dir := mountTmpfs(t, 64<<20) // room for the local store's 4 MiB journal segments
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := start(t, "file://"+filepath.Join(dir, "store"), "--create-store")
	defer r.Stop(t)
	connect := func() *pgconn.PgConn {
		c, err := pgconn.Connect(ctx, r.Conninfo("lake"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	c := connect()
	if _, err := c.Exec(ctx, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	// Leave little room: a filler takes all but about half a megabyte.
	var st syscallStatfs
	if err := statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	// The server's own files may grow meanwhile (the store's journal): a
	// filler that no longer fits is written again against the new figure.
	filler := filepath.Join(dir, "filler")
	for attempt := 0; ; attempt++ {
		err := os.WriteFile(filler, make([]byte, st.free()-512<<10), 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOSPC) || attempt == 5 {
			t.Fatal(err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if err := statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
	}
	value := strings.Repeat("x", 16<<10)
	acked := 0
	var failure error
	for i := 0; i < 1000 && failure == nil; i++ {
		_, failure = c.Exec(ctx, fmt.Sprintf("INSERT INTO ducklake_metadata VALUES ('k%d', '%s', NULL, NULL)", i, value)).ReadAll()
		if failure == nil {
			acked++
		}
	}
	if failure == nil {
		t.Fatal("the disk never filled up")
	}
	t.Logf("%d commits acknowledged, then: %v", acked, failure)

	// The server is still there: a new session reads what is durable and
	// is refused writes with the store's error. A session that connects
	// before the server noticed the failed write (it looks every 50 ms)
	// is on the failed catalog and is terminated with 57P01 when the
	// server closes it; the client then reconnects, as DuckDB's pool does.
	count := func(c *pgconn.PgConn) (string, error) {
		rs, err := c.Exec(ctx, "SELECT count(*) FROM ducklake_metadata").ReadAll()
		if err != nil {
			return "", err
		}
		return string(rs[0].Rows[0][0]), nil
	}
	terminated := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && (pe.Code == "57P03" || pe.Code == "57P01") // starting up; closed with the failed catalog
	}
	var rc *pgconn.PgConn
	for rc == nil {
		c2, err := pgconn.Connect(ctx, r.Conninfo("lake"))
		if terminated(err) {
			continue
		}
		if err != nil {
			t.Fatalf("connect after the disk filled: %v", err)
		}
		got, err := count(c2)
		if err == nil {
			if got != fmt.Sprint(acked) {
				t.Fatalf("read %s rows, want the %d acknowledged", got, acked)
			}
			_, err = c2.Exec(ctx, "INSERT INTO ducklake_metadata VALUES ('late', 'v', NULL, NULL)").ReadAll()
		}
		if terminated(err) {
			c2.Close(ctx)
			continue
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "58030" || !strings.Contains(pe.Message, "no space left on device") {
			t.Fatalf("write on a full disk: %v, want 58030 naming the cause", err)
		}
		rc = c2
	}
	defer rc.Close(ctx)

	// Space comes back: writes resume without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for {
		if ctx.Err() != nil {
			t.Fatal("writes did not resume after space was freed")
		}
		wc, err := pgconn.Connect(ctx, r.Conninfo("lake"))
		if err != nil {
			continue
		}
		_, err = wc.Exec(ctx, "INSERT INTO ducklake_metadata VALUES ('after', 'v', NULL, NULL)").ReadAll()
		if err == nil {
			got, err := count(wc)
			if err != nil {
				t.Fatalf("read after resuming: %v", err)
			}
			if got != fmt.Sprint(acked+1) {
				t.Fatalf("after resuming: %s rows, want %d", got, acked+1)
			}
			wc.Close(ctx)
			return
		}
		wc.Close(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStoreWithoutCreateIfAbsentRefused: on an S3-compatible server that
// ignores If-None-Match, a second create of one key overwrites the first,
// and two writers could both believe they advanced the manifest. The writer
// proves the condition at open and refuses such a store, naming it; on a
// server that honours it, the same open succeeds.
func TestStoreWithoutCreateIfAbsentRefused(t *testing.T) {
	bad := objstoretest.StartS3IgnoringConditions(t)
	url := bad.URL(bad.NewBucket(t), "catalog/")
	cfg, err := ParseConfig([]string{"--store", url, "--listen", "127.0.0.1:0"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = New(cfg, slog.New(slog.DiscardHandler)).Run(ctx)
	if !errors.Is(err, ErrNoCreateIfAbsent) || !strings.Contains(err.Error(), bad.Endpoint) {
		t.Fatalf("serve on a store without create-if-absent: %v, want ErrNoCreateIfAbsent naming %s", err, bad.Endpoint)
	}
	good := objstoretest.StartS3(t)
	r := start(t, good.URL(good.NewBucket(t), "catalog/"))
	r.Stop(t)
}
