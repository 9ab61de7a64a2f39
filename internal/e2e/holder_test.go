package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
)

// serveOnce runs `moraine serve` with args until it exits, and returns its
// exit code and standard error.
func serveOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stderr testenv.SyncBuffer
	cmd := exec.Command(moraineBin, append([]string{"serve", "--log-level", "warn"}, args...)...)
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("moraine serve %v still running after a minute:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestSecondServerCannotTakeWriterDown: a second `moraine serve` started by
// mistake — on the same port, or on the same store — leaves the live writer
// serving: on the busy port it fails before it touches the store; on the
// same store it refuses, naming the live writer and --takeover. With
// --takeover it fences the first, which exits 3, and serves. A writer
// stopped cleanly, or killed, does not hold the store.
func TestSecondServerCannotTakeWriterDown(t *testing.T) {
	store := "file://" + t.TempDir()
	addrA := testenv.FreeAddr(t)
	a := startChild(t, store, addrA)
	n := 0
	alive := func(addr string) {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgconn.Connect(ctx, conninfo(addr, "lake"))
		if err != nil {
			t.Fatalf("the writer at %s stopped serving: %v", addr, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "CREATE TABLE IF NOT EXISTS ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint); INSERT INTO ducklake_metadata VALUES ('k"+fmt.Sprint(n)+"', 'v', NULL, NULL)").ReadAll(); err != nil {
			t.Fatalf("the writer at %s takes no writes: %v", addr, err)
		}
	}
	alive(addrA)

	// The same port: refused before the store is touched.
	if code, out := serveOnce(t, "--store", store, "--listen", addrA); code == 0 || !strings.Contains(out, "address already in use") {
		t.Fatalf("a second server on the busy port: exit %d\n%s", code, out)
	}
	alive(addrA)

	// The same store: refused, naming the live writer.
	addrB := testenv.FreeAddr(t)
	code, out := serveOnce(t, "--store", store, "--listen", addrB)
	if want := fmt.Sprintf("the store is held by a live writer: moraine pid %d", a.cmd.Process.Pid); code == 0 || !strings.Contains(out, want) || !strings.Contains(out, addrA) || !strings.Contains(out, "--takeover") {
		t.Fatalf("a second server on the store: exit %d, want %q naming %s and --takeover:\n%s", code, want, addrA, out)
	}
	alive(addrA)

	// Deliberately: --takeover fences the first, which exits 3.
	b := startChildArgs(t, store, addrB, "--takeover")
	select {
	case <-a.exited:
	case <-time.After(time.Minute):
		t.Fatal("the fenced writer did not exit")
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("the fenced writer exited %d, want 3\n%s", code, a.stderr)
	}
	alive(addrB)

	// A clean stop releases the store at once; so does a kill.
	if code := b.signal(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	c := startChild(t, store, addrA)
	alive(addrA)
	if code := c.signal(t, syscall.SIGKILL, 30*time.Second); code != -1 {
		t.Fatalf("SIGKILL: exit %d", code)
	}
	d := startChild(t, store, addrB)
	alive(addrB)
	d.signal(t, syscall.SIGTERM, 30*time.Second)
}
