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
			bm, err := backendMessage(m)
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

// backendMessage decodes a recorded server message for sending.
func backendMessage(m Message) (pgproto3.BackendMessage, error) {
	var bm pgproto3.BackendMessage
	switch m.Type {
	case "AuthenticationOk":
		bm = &pgproto3.AuthenticationOk{}
	case "ParameterStatus":
		bm = &pgproto3.ParameterStatus{}
	case "BackendKeyData":
		bm = &pgproto3.BackendKeyData{}
	case "ReadyForQuery":
		bm = &pgproto3.ReadyForQuery{}
	case "RowDescription":
		bm = &pgproto3.RowDescription{}
	case "DataRow":
		bm = &pgproto3.DataRow{}
	case "CommandComplete":
		bm = &pgproto3.CommandComplete{}
	case "CopyOutResponse":
		bm = &pgproto3.CopyOutResponse{}
	case "CopyInResponse":
		bm = &pgproto3.CopyInResponse{}
	case "CopyData":
		bm = &pgproto3.CopyData{}
	case "CopyDone":
		bm = &pgproto3.CopyDone{}
	case "ParseComplete":
		bm = &pgproto3.ParseComplete{}
	case "ParameterDescription":
		bm = &pgproto3.ParameterDescription{}
	case "NoData":
		bm = &pgproto3.NoData{}
	case "EmptyQueryResponse":
		bm = &pgproto3.EmptyQueryResponse{}
	case "ErrorResponse":
		bm = &pgproto3.ErrorResponse{}
	case "NoticeResponse":
		bm = &pgproto3.NoticeResponse{}
	default:
		return nil, fmt.Errorf("seq %d: mock cannot send %s", m.Seq, m.Type)
	}
	// The recording (pgproto3's MarshalJSON) omits OverallFormat of COPY
	// responses; PostgreSQL sets it to binary exactly when every column is.
	if m.Type == "CopyOutResponse" || m.Type == "CopyInResponse" {
		var cr struct{ ColumnFormatCodes []uint16 }
		if err := json.Unmarshal(m.Raw, &cr); err != nil {
			return nil, fmt.Errorf("seq %d: decode %s: %w", m.Seq, m.Type, err)
		}
		overall := byte(copyOverall(cr.ColumnFormatCodes))
		if m.Type == "CopyOutResponse" {
			return &pgproto3.CopyOutResponse{OverallFormat: overall, ColumnFormatCodes: cr.ColumnFormatCodes}, nil
		}
		return &pgproto3.CopyInResponse{OverallFormat: overall, ColumnFormatCodes: cr.ColumnFormatCodes}, nil
	}
	if err := json.Unmarshal(m.Raw, bm); err != nil {
		return nil, fmt.Errorf("seq %d: decode %s: %w", m.Seq, m.Type, err)
	}
	return bm, nil
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
