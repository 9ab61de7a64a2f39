package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/server"
)

// TestUserAdd: the command reads the password from stdin, writes only a
// verifier the server accepts, and rejects bad usage with exit 2.
func TestUserAdd(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users")
	var errb bytes.Buffer
	if code := userMain([]string{"add", "--users-file", f, "--password-stdin", "moraine"}, strings.NewReader("hunter2-long\n"), io.Discard, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	raw, _ := os.ReadFile(f)
	if !strings.HasPrefix(string(raw), "moraine:SCRAM-SHA-256$4096:") || strings.Contains(string(raw), "hunter2") {
		t.Fatalf("users file: %q", raw)
	}
	users, err := server.ReadUsers(f)
	if err != nil || len(users) != 1 || users[0].Name != "moraine" {
		t.Fatalf("ReadUsers: %+v, %v", users, err)
	}
	for _, args := range [][]string{
		{"add", "--users-file", f},               // no name
		{"add", "moraine"},                       // no file
		{"remove", "--users-file", f, "moraine"}, // unknown verb
		{"add", "--users-file", f, "a:b"},        // bad name
	} {
		if code := userMain(args, strings.NewReader("pw\n"), io.Discard, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code := userMain([]string{"add", "--users-file", f, "x"}, strings.NewReader(""), io.Discard, &errb); code != 2 {
		t.Errorf("empty password: exit %d, want 2", code)
	}
}
