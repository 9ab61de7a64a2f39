package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/moraine-db/moraine/internal/pgwire"
)

// ErrBadUser is returned by AddUser for an unusable name or password.
var ErrBadUser = errors.New("bad user")

// AddUser adds name with password to the users file at path, or replaces
// name's verifier if it is already there. Only a SCRAM-SHA-256 verifier is
// written, never the password. The file is replaced atomically (write to a
// temporary file in the same directory, then rename) with mode 0600, so a
// server reading it concurrently sees the old or the new file whole.
func AddUser(path, name, password string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == ':' || r == '#' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("%w: user name %q must be non-empty without ':', '#', blanks or control characters", ErrBadUser, name)
	}
	if password == "" {
		return fmt.Errorf("%w: empty password", ErrBadUser)
	}
	verifier, err := pgwire.SCRAMVerifier(password)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("users file: %w", err)
	}
	var out bytes.Buffer
	replaced := false
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		line := sc.Text()
		if n, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && n == name && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			if replaced {
				continue
			}
			line, replaced = name+":"+verifier, true
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	if !replaced {
		out.WriteString(name + ":" + verifier + "\n")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*")
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("users file: %w", err)
	}
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("users file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("users file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	return nil
}
