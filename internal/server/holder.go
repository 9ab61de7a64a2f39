package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
)

// The writer's heartbeat.
//
// A store has one writer; a second `moraine serve` on it fences the first.
// That is how a deliberate failover works, and it must not happen by
// accident: a server started by mistake in the same directory would take a
// healthy writer down. So a writer keeps a small object, writer/heartbeat,
// rewritten every heartbeatEvery with a counter that grows, and marked
// stopped on a clean shutdown. A new writer reads it before it opens the
// store: a heartbeat marked stopped, or none, lets it in at once; one that
// names a process of this host that no longer exists, too; otherwise it
// watches the heartbeat for heartbeatWatch, and refuses if the counter
// moved — the writer is alive — naming it and the way to take over
// (--takeover). Only the counter's movement is compared, never clocks, so
// skew between hosts does not matter, and it works on every backend: one
// PUT a heartbeatEvery (43 200 PUTs a day at the default), and at open up
// to three GETs.

const (
	heartbeatKey   = "writer/heartbeat"
	heartbeatEvery = 2 * time.Second
	// heartbeatWatch is how long a new writer watches a heartbeat that
	// was not marked stopped: two beats and a half.
	heartbeatWatch = heartbeatEvery*2 + heartbeatEvery/2
)

// heartbeat is the object's content.
type heartbeat struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Listen  string    `json:"listen"`
	Started time.Time `json:"started"`
	Beat    uint64    `json:"beat"`
	Stopped bool      `json:"stopped,omitempty"`
}

func (h heartbeat) String() string {
	return fmt.Sprintf("moraine pid %d on host %s listening on %s, serving since %s",
		h.PID, h.Host, h.Listen, h.Started.Format(time.RFC3339))
}

// ErrStoreHeld is returned when another writer is alive on the store.
var ErrStoreHeld = errors.New("the store is held by a live writer")

func readHeartbeat(ctx context.Context, store objstore.Store) (heartbeat, bool, error) {
	b, err := store.Get(ctx, heartbeatKey)
	if errors.Is(err, objstore.ErrNotFound) {
		return heartbeat{}, false, nil
	}
	if err != nil {
		return heartbeat{}, false, fmt.Errorf("read the writer's heartbeat: %w", err)
	}
	var h heartbeat
	if err := json.Unmarshal(b, &h); err != nil {
		// Not ours to judge: a heartbeat that does not decode holds nobody.
		return heartbeat{}, false, nil
	}
	return h, true, nil
}

// checkNotHeld refuses to open store for writing while another writer is
// alive on it (see above). watch is heartbeatWatch outside tests.
func checkNotHeld(ctx context.Context, store objstore.Store, watch time.Duration) error {
	first, ok, err := readHeartbeat(ctx, store)
	if err != nil || !ok || first.Stopped {
		return err
	}
	if host, _ := os.Hostname(); host == first.Host && (first.PID == os.Getpid() || !processExists(first.PID)) {
		return nil // this process's own (reopening after a failed write), or a writer that died on this host
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(watch):
	}
	now, ok, err := readHeartbeat(ctx, store)
	if err != nil || !ok || now.Stopped || now == first {
		return err
	}
	return fmt.Errorf("%w: %v; stop it, or start this server with --takeover to fence it (it stops taking writes and exits)", ErrStoreHeld, now)
}

// processExists reports whether a process with pid runs on this host.
func processExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// beater keeps a writer's heartbeat.
type beater struct {
	store objstore.Store
	h     heartbeat
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startHeartbeat writes the first beat and keeps beating every
// heartbeatEvery until stopped. A failed PUT is retried at the next beat:
// the heartbeat is advice to a server starting by mistake, not part of
// the store's consistency (fencing is).
func startHeartbeat(ctx context.Context, store objstore.Store, listen string) (*beater, error) {
	host, _ := os.Hostname()
	b := &beater{store: store, h: heartbeat{Host: host, PID: os.Getpid(), Listen: listen, Started: time.Now().UTC()},
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := b.put(ctx); err != nil {
		return nil, fmt.Errorf("write the writer's heartbeat: %w", err)
	}
	go b.loop()
	return b, nil
}

func (b *beater) put(ctx context.Context) error {
	data, _ := json.Marshal(b.h)
	return b.store.Put(ctx, heartbeatKey, data)
}

func (b *beater) loop() {
	defer close(b.done)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.h.Beat++
			ctx, cancel := context.WithTimeout(context.Background(), heartbeatEvery)
			_ = b.put(ctx)
			cancel()
		}
	}
}

// close stops beating; clean marks the heartbeat stopped (a clean
// shutdown: the next writer need not wait). A writer that failed or was
// fenced leaves it beating no more, and the next one watches it.
func (b *beater) close(clean bool) {
	b.once.Do(func() {
		close(b.stop)
		<-b.done
		if clean {
			b.h.Stopped = true
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = b.put(ctx)
			cancel()
		}
	})
}
