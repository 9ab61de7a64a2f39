package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/testenv"
)

// commitCompletes returns the indexes of tr's COMMIT CommandCompletes.
func commitCompletes(t *testing.T, tr *Transcript) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	for i, m := range tr.Messages {
		if m.Dir != Backend || m.Type != "CommandComplete" {
			continue
		}
		var cc struct{ CommandTag string }
		if err := json.Unmarshal(m.Raw, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.CommandTag == "COMMIT" {
			out[i] = true
		}
	}
	return out
}

// serveRecorded starts a Recorded server for tr on loopback and returns its
// address and its log.
func serveRecorded(t *testing.T, tr *Transcript, commits map[int]bool, durable func() error) (addr string, log *logSink) {
	t.Helper()
	log = &logSink{wrote: make(chan struct{}, 1)}
	rec := NewRecorded(durable, slog.New(slog.NewTextHandler(log, nil)))
	if err := rec.Add(tr, commits); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), log
}

// TestRecordedServesEveryFixture replays every fixture against its own
// recorded server side: every answer must compare equal to the recording
// (so each recorded message decodes to the bytes PostgreSQL sent), and the
// durable write must run once per COMMIT.
func TestRecordedServesEveryFixture(t *testing.T) {
	for _, tr := range loadFixtures(t) {
		t.Run(tr.Name, func(t *testing.T) {
			commits := commitCompletes(t, tr)
			var synced atomic.Int64
			addr, logged := serveRecorded(t, tr, commits, func() error { synced.Add(1); return nil })
			res := Replay(context.Background(), tr, Options{Addr: addr, Timeout: 30 * time.Second})
			if !res.Passed() {
				t.Fatalf("replay against the recording: %v", Explain(res.Err))
			}
			if res.Compared != backendCount(tr) {
				t.Errorf("compared %d server messages, recorded %d", res.Compared, backendCount(tr))
			}
			if got := synced.Load(); got != int64(len(commits)) {
				t.Errorf("durable writes: %d, want one per COMMIT (%d)", got, len(commits))
			}
			if l := logged.String(); l != "" {
				t.Errorf("a faithful replay left the server logging:\n%s", l)
			}
		})
	}
}

// TestRecordedRefusesAnotherConversation: a client that sends what the
// recording does not show gets no recorded answer for it, and one transcript
// cannot take another's database.
func TestRecordedRefusesAnotherConversation(t *testing.T) {
	a, b := fixture(t, "s01_basic"), fixture(t, "s05_inlining")
	addr, logged := serveRecorded(t, a, nil, nil)
	opts := Options{Addr: addr, Timeout: 5 * time.Second, Databases: map[string]string{b.Databases()[0]: a.Databases()[0]}}
	if res := Replay(context.Background(), b, opts); res.Passed() {
		t.Fatal("s05's conversation passed against s01's recording")
	}
	logged.waitFor("err=EOF") // the replay gave up before the recording ended

	// A client message of another type than the recording's is refused,
	// and the server says which (the client sees its connection close).
	host, port, _ := net.SplitHostPort(addr)
	ctx := context.Background()
	pc, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", host, port, a.Databases()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if _, err := pc.Prepare(ctx, "", "SELECT 1", nil); err == nil {
		t.Fatal("a Parse where the recording has a Query was answered")
	}
	logged.waitFor("message 1 is 'P', recorded 'Q'")
	rec := NewRecorded(nil, slog.New(slog.DiscardHandler))
	if err := rec.Add(a, nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.Add(fixture(t, "s07_reattach"), nil); err == nil {
		t.Fatal("s07 took the database s01's recording answers for")
	}
}

// logSink is a server's log that a test can wait on: every write wakes a
// waiter, so waiting needs no clock.
type logSink struct {
	testenv.SyncBuffer
	wrote chan struct{} // capacity 1: a write between a check and the wait is not lost
}

func (l *logSink) Write(p []byte) (int, error) {
	n, err := l.SyncBuffer.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// waitFor waits until the server has logged want (the test's own timeout
// ends a wait for a line that never comes).
func (l *logSink) waitFor(want string) {
	for !strings.Contains(l.String(), want) {
		<-l.wrote
	}
}

// TestRecordedServesConcurrentReplays: replays of one conversation at once,
// each on a database of its own whose name ends with the recorded one's,
// are each answered as recorded, with a durable write per COMMIT of each.
func TestRecordedServesConcurrentReplays(t *testing.T) {
	for _, name := range []string{"s01_basic", "s08_contention"} {
		t.Run(name, func(t *testing.T) {
			tr := fixture(t, name)
			commits := commitCompletes(t, tr)
			var synced atomic.Int64
			addr, _ := serveRecorded(t, tr, commits, func() error { synced.Add(1); return nil })
			const replays = 4
			errs := make(chan error, replays)
			for i := range replays {
				go func() {
					dbs := map[string]string{}
					for _, db := range tr.Databases() {
						dbs[db] = fmt.Sprintf("replay%d_%s", i, db)
					}
					res := Replay(context.Background(), tr, Options{Addr: addr, Timeout: 30 * time.Second, Databases: dbs})
					errs <- res.Err
				}()
			}
			for range replays {
				if err := <-errs; err != nil {
					t.Fatalf("a concurrent replay: %v", Explain(err))
				}
			}
			if got := synced.Load(); got != replays*int64(len(commits)) {
				t.Errorf("durable writes: %d, want %d", got, replays*len(commits))
			}
		})
	}
}
