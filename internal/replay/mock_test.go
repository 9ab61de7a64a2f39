package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// mockServer is a "perfect" server for one transcript: its k-th accepted
// connection plays recorded connection k, checks that every client message
// equals the recorded one and answers with the recorded server messages,
// eagerly (it never waits the way PostgreSQL waits on a lock, so it also
// exercises the replayer's buffering of early answers).
type mockServer struct {
	ln    net.Listener
	tr    *Transcript
	mu    sync.Mutex
	errs  []error
	wg    sync.WaitGroup
	conns []int // recorded connection numbers in order of first StartupMessage
}

func startMock(t *testing.T, tr *Transcript) *mockServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := &mockServer{ln: ln, tr: tr}
	for _, m := range tr.Messages {
		if m.Type == "StartupMessage" {
			ms.conns = append(ms.conns, m.Conn)
		}
	}
	ms.wg.Add(1)
	go func() {
		defer ms.wg.Done()
		for k := 0; ; k++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if k >= len(ms.conns) {
				ms.fail(fmt.Errorf("unexpected connection %d", k+1))
				nc.Close()
				continue
			}
			ms.wg.Add(1)
			go func(conn int) {
				defer ms.wg.Done()
				defer nc.Close()
				if err := ms.serve(nc, conn); err != nil {
					ms.fail(fmt.Errorf("conn %d: %w", conn, err))
				}
			}(ms.conns[k])
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		ms.wg.Wait()
	})
	return ms
}

func (ms *mockServer) fail(err error) {
	ms.mu.Lock()
	ms.errs = append(ms.errs, err)
	ms.mu.Unlock()
}

func (ms *mockServer) err() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return errors.Join(ms.errs...)
}

func (ms *mockServer) addr() string { return ms.ln.Addr().String() }

func (ms *mockServer) serve(nc net.Conn, conn int) error {
	be := pgproto3.NewBackend(nc, nc)
	first := true
	for _, m := range ms.tr.Messages {
		if m.Conn != conn {
			continue
		}
		if m.Dir == Backend {
			bm, err := m.BackendMessage()
			if err != nil {
				return err
			}
			be.Send(bm)
			continue
		}
		if err := be.Flush(); err != nil {
			return err
		}
		var fm pgproto3.FrontendMessage
		var err error
		if first {
			fm, err = be.ReceiveStartupMessage()
			first = false
		} else {
			fm, err = be.Receive()
		}
		if err != nil {
			return fmt.Errorf("seq %d: receive: %w", m.Seq, err)
		}
		want, _ := m.FrontendMessage()
		if !reflect.DeepEqual(canonical(fm), canonical(want)) {
			return fmt.Errorf("seq %d: client sent %s, want %s", m.Seq, canonical(fm), canonical(want))
		}
		if _, ok := fm.(*pgproto3.Terminate); ok {
			return nil
		}
	}
	return be.Flush()
}

func canonical(m pgproto3.FrontendMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// mockDefault are the fixtures TestReplayMock replays by default: one
// single-connection DuckLake session, the seven-connection contention run
// and psql. MORAINE_REPLAY_ALL=1 replays every fixture (TestReplayPostgres
// covers all of them against PostgreSQL anyway).
var mockDefault = map[string]bool{"s01_basic": true, "s08_contention": true, "s10_psql": true}

// TestReplayMock replays fixtures against the perfect mock server: all must
// pass, every recorded server message must have been compared, and the mock
// must have seen exactly the recorded client messages.
func TestReplayMock(t *testing.T) {
	trs := loadFixtures(t)
	for _, tr := range trs {
		if !mockDefault[tr.Name] && os.Getenv("MORAINE_REPLAY_ALL") == "" {
			continue
		}
		t.Run(tr.Name, func(t *testing.T) {
			ms := startMock(t, tr)
			res := Replay(context.Background(), tr, Options{Addr: ms.addr(), Timeout: 10 * time.Second})
			if !res.Passed() {
				t.Fatalf("%v\n%s\nmock: %v", res.Err, Explain(res.Err), ms.err())
			}
			if backends := backendCount(tr); res.Compared != backends {
				t.Fatalf("compared %d server messages, transcript has %d", res.Compared, backends)
			}
			// The mock finishes when each connection terminates.
			ms.ln.Close()
			ms.wg.Wait()
			if err := ms.err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
