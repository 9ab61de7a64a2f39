package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/testenv"
)

// TestMain lets the test binary run as the moraine command itself (the
// process tests re-execute it with MORAINE_TEST_AS_MAIN=1), so the exit
// codes and output of real processes are tested without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("MORAINE_TEST_AS_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func moraineCmd(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MORAINE_TEST_AS_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func waitServing(t *testing.T, ctx context.Context, addr string, out *bytes.Buffer) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgconn.Connect(ctx, "host="+host+" port="+port+" user=moraine dbname=lake sslmode=disable connect_timeout=2")
		if err == nil {
			c.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s not serving: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeProcess: `moraine serve --help` lists every setting and exits 0;
// bad configuration exits 2 naming the setting; a second server started
// with --takeover on the same store fences the first, which exits 3 saying
// why.
func TestServeProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cmd, out := moraineCmd(ctx, "serve", "--help")
	if err := cmd.Run(); exitCode(err) != 0 {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	for _, name := range server.Settings() {
		if !strings.Contains(out.String(), "-"+name) {
			t.Errorf("serve --help lacks -%s", name)
		}
	}
	for _, c := range []struct {
		args []string
		name string
	}{
		{[]string{"serve", "--listen", "0.0.0.0:5433"}, "listen"},
		{[]string{"serve", "--log-format", "xml"}, "log-format"},
		{[]string{"serve", "--idle-timeout", "forever"}, "idle-timeout"},
	} {
		cmd, out := moraineCmd(ctx, c.args...)
		if err := cmd.Run(); exitCode(err) != 2 || !strings.Contains(out.String(), c.name) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %s", c.args, exitCode(err), out, c.name)
		}
	}

	store := "file://" + t.TempDir()
	addrA, addrB := testenv.FreeAddr(t), testenv.FreeAddr(t)
	a, outA := moraineCmd(ctx, "serve", "--store", store, "--listen", addrA)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	waitServing(t, ctx, addrA, outA)
	b, outB := moraineCmd(ctx, "serve", "--store", store, "--listen", addrB, "--takeover")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.Process.Signal(os.Interrupt)
		if err := b.Wait(); exitCode(err) != 0 {
			t.Errorf("server B after SIGINT: exit %d\n%s", exitCode(err), outB)
		}
	}()
	waitServing(t, ctx, addrB, outB)
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 3 || !strings.Contains(outA.String(), "fenced") {
			t.Fatalf("fenced server A: exit %d, want 3 and a log naming the fencing:\n%s", exitCode(err), outA)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("server A still running 20s after B opened the store:\n%s", outA)
	}
}
