package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moraine-db/moraine/internal/replay"
)

// The floor: beside moraine and PostgreSQL, `bench replay` replays each
// conversation against a child process that answers with PostgreSQL's
// recorded bytes (replay.Recorded) and makes one durable write per commit,
// the write PostgreSQL's WAL flush makes: one 8 KiB page over a
// preallocated file, fdatasynced. Its CPU per commit is what holding the
// conversation costs a server that does no work at all — the round trips'
// reads, writes and wake-ups, and the flush — on this machine and in Go;
// PostgreSQL's CPU divided by it bounds the ratio any Go server could show.

// RecordedReady is the message the recorded server logs, with its
// address as "listen", once it accepts connections.
const RecordedReady = "recorded server is ready"

// walPage and walFile size the floor's durable write.
const (
	walPage = 8 << 10
	walFile = 16 << 20
)

// ServeRecorded answers replays of trs on listen until ctx ends (`moraine
// bench recorded`). Its durable writes go to a file in a fresh directory
// under dir ("" for the system's temporary directory), removed on return.
func ServeRecorded(ctx context.Context, trs []*replay.Transcript, listen, dir string, log *slog.Logger) error {
	tmp, err := os.MkdirTemp(dir, "moraine-bench-floor-")
	if err != nil {
		return fmt.Errorf("recorded server: %w", err)
	}
	defer os.RemoveAll(tmp)
	w, err := newWAL(filepath.Join(tmp, "wal"))
	if err != nil {
		return fmt.Errorf("recorded server: %w", err)
	}
	defer w.f.Close()
	rec := replay.NewRecorded(w.flush, log)
	for _, tr := range trs {
		commits, err := CommitCompletes(tr)
		if err != nil {
			return err
		}
		if err := rec.Add(tr, commits); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("recorded server: %w", err)
	}
	log.Info(RecordedReady, "listen", ln.Addr().String())
	return rec.Serve(ctx, ln)
}

// wal is the floor's durable write: a preallocated file written a page at
// a time, round and round, each page fdatasynced.
type wal struct {
	mu   sync.Mutex
	f    *os.File
	off  int64
	page []byte
}

func newWAL(path string) (*wal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	// Written and synced once, so that a page's write changes no metadata.
	if _, err := f.Write(make([]byte, walFile)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	page := make([]byte, walPage)
	for i := range page {
		page[i] = byte(i)
	}
	return &wal{f: f, page: page}, nil
}

func (w *wal) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.WriteAt(w.page, w.off); err != nil {
		return err
	}
	w.off = (w.off + walPage) % walFile
	return unix.Fdatasync(int(w.f.Fd()))
}

// StartRecorded runs ServeRecorded for trs as a child `bench recorded`
// process of exe (this moraine binary), as moraine and PostgreSQL run as
// processes of their own, so that /proc counts its CPU alone. Its durable
// writes go under dir ("" for the system's temporary directory).
func StartRecorded(ctx context.Context, exe string, trs []*replay.Transcript, dir string) (*Moraine, error) {
	names := make([]string, len(trs))
	for i, tr := range trs {
		names[i] = tr.Name
	}
	m := &Moraine{done: make(chan error, 1), StoreDesc: "recorded answers"}
	argv := []string{"bench", "recorded", "--transcripts", strings.Join(names, ","), "--listen", "127.0.0.1:0", "--dir", dir}
	if err := m.startProcess(ctx, exe, argv); err != nil {
		m.runCleanup()
		return nil, err
	}
	return m, nil
}

// RecordedTarget is the floor served by m (StartRecorded).
func RecordedTarget(m *Moraine) ReplayTarget {
	return ReplayTarget{Name: Floor, Addr: m.addr, Recorded: true,
		CPU:     threadsClock(m.PID),
		Threads: func(into map[int]time.Duration) error { return ThreadsCPU(m.PID, into) }}
}

// Floor names the recorded server's figures.
const Floor = "floor"
