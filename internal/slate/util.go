package slate

import (
	"context"
	"errors"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

func isNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }

// readAttempts bounds retries of a failed read: reads are idempotent, so a
// transient object-store error (a timeout, a 503) is retried with backoff
// before it reaches the caller. NotFound, corruption and context errors are
// answers, not transient failures, and are returned at once.
const readAttempts = 5

func retryRead(ctx context.Context, f func() error) error {
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt == readAttempts || isNotFound(err) || errors.Is(err, ErrCorrupt) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}
