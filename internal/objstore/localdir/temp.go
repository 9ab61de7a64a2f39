package localdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// RemoveStaleTemp deletes temporary files (left by writers that crashed
// between creating and renaming them) whose modification time is older
// than olderThan, and returns how many it removed. A live writer's temporary
// file is younger than one write takes, so any olderThan well above the
// slowest write (say an hour) never races with one, from this process or
// another.
func (s *Store) RemoveStaleTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return 0, fmt.Errorf("localdir: remove stale temporary files: %w", objstore.ErrClosed)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if missing(err) {
				return nil
			}
			return err
		}
		if fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("localdir: remove stale temporary files under %s: %w", s.root, err)
	}
	return removed, nil
}
