package replay

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Recorded serves the server side of transcripts as PostgreSQL recorded
// it: on each connection it reads and frames every client message, checks
// its type against the recording, and writes back the bytes PostgreSQL
// answered it with. Before the answer to a commit it makes one durable
// write (the durable func). It does nothing else, so what it costs to hold
// a replayed conversation is what any server must spend on the protocol's
// round trips and a commit's flush on this machine: the floor under both
// servers' figures in `moraine bench replay`.
//
// A connection is matched to the recording by the database its startup
// message names and the order connections to that database are opened,
// which is the order a replay opens them; each recorded database belongs to
// one transcript. A database named <anything>_<recorded name> is served as
// the recorded one, so that concurrent replays of one conversation, each
// on a database of its own (Options.Databases), are told apart.
type Recorded struct {
	durable func() error
	log     *slog.Logger
	mu      sync.Mutex
	byDB    map[string][][]exchange // recorded connections per recorded database, in the order opened
	opened  map[string]int          // connections opened so far, per database as named
}

// exchange is one client message of a connection and the server's answer.
type exchange struct {
	typ    byte   // the message's type byte; 0 for the startup message
	answer []byte // the recorded server messages up to the next client message, encoded
	commit bool   // answer holds a commit's CommandComplete
}

// NewRecorded returns a server with no conversations; durable, when not
// nil, runs before each commit's answer. A connection that ends in an error
// (a message the recording does not have there, a failed durable write, a
// client gone before its conversation ended) is logged to log; the
// replaying client reports its side of it.
func NewRecorded(durable func() error, log *slog.Logger) *Recorded {
	return &Recorded{durable: durable, log: log, byDB: map[string][][]exchange{}, opened: map[string]int{}}
}

// Add prepares tr's server side. commits holds the indexes in tr.Messages
// of the CommandComplete messages that end a commit. A database another
// added transcript connects to is refused.
func (r *Recorded) Add(tr *Transcript, commits map[int]bool) error {
	byConn := map[int][]exchange{}
	var order []int
	for i, m := range tr.Messages {
		ex := byConn[m.Conn]
		if m.Dir == Frontend {
			fm, err := m.FrontendMessage()
			if err != nil {
				return err
			}
			var typ byte
			if _, ok := fm.(*pgproto3.StartupMessage); !ok {
				b, err := fm.Encode(nil)
				if err != nil {
					return fmt.Errorf("%w: encode %s: %v", ErrBadTranscript, m.Type, err)
				}
				typ = b[0]
			} else if len(ex) == 0 {
				order = append(order, m.Conn)
			}
			byConn[m.Conn] = append(ex, exchange{typ: typ})
			continue
		}
		if len(ex) == 0 {
			return fmt.Errorf("%w: conn %d: server message %s before any client message", ErrBadTranscript, m.Conn, m.Type)
		}
		bm, err := m.BackendMessage()
		if err != nil {
			return err
		}
		last := &ex[len(ex)-1]
		if last.answer, err = bm.Encode(last.answer); err != nil {
			return fmt.Errorf("%w: encode %s: %v", ErrBadTranscript, m.Type, err)
		}
		last.commit = last.commit || commits[i]
	}
	dbs := map[string][][]exchange{}
	for _, c := range order {
		db := tr.StartupParams(c)["database"]
		if dbs[db] == nil && r.byDB[db] != nil {
			return fmt.Errorf("replay: recorded server: database %q is already another transcript's", db)
		}
		dbs[db] = append(dbs[db], byConn[c])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.byDB, dbs)
	return nil
}

// BackendMessage decodes a recorded server message into the pgproto3 value
// PostgreSQL sent. A COPY response's overall format, which the recording
// omits, is the one PostgreSQL derives from the column formats.
func (m Message) BackendMessage() (pgproto3.BackendMessage, error) {
	var bm pgproto3.BackendMessage
	switch m.Type {
	case "AuthenticationOk":
		return &pgproto3.AuthenticationOk{}, nil
	case "ParseComplete":
		return &pgproto3.ParseComplete{}, nil
	case "BindComplete":
		return &pgproto3.BindComplete{}, nil
	case "CloseComplete":
		return &pgproto3.CloseComplete{}, nil
	case "NoData":
		return &pgproto3.NoData{}, nil
	case "EmptyQueryResponse":
		return &pgproto3.EmptyQueryResponse{}, nil
	case "CopyDone":
		return &pgproto3.CopyDone{}, nil
	case "CopyOutResponse", "CopyInResponse":
		var r struct{ ColumnFormatCodes []uint16 }
		if err := json.Unmarshal(m.Raw, &r); err != nil {
			return nil, fmt.Errorf("%w: decode %s: %v", ErrBadTranscript, m.Type, err)
		}
		overall := byte(copyOverall(r.ColumnFormatCodes))
		if m.Type == "CopyInResponse" {
			return &pgproto3.CopyInResponse{OverallFormat: overall, ColumnFormatCodes: r.ColumnFormatCodes}, nil
		}
		return &pgproto3.CopyOutResponse{OverallFormat: overall, ColumnFormatCodes: r.ColumnFormatCodes}, nil
	case "NoticeResponse":
		var e pgproto3.ErrorResponse
		if err := json.Unmarshal(m.Raw, &e); err != nil {
			return nil, fmt.Errorf("%w: decode %s: %v", ErrBadTranscript, m.Type, err)
		}
		n := pgproto3.NoticeResponse(e)
		return &n, nil
	case "ErrorResponse":
		bm = &pgproto3.ErrorResponse{}
	case "ParameterStatus":
		bm = &pgproto3.ParameterStatus{}
	case "BackendKeyData":
		bm = &pgproto3.BackendKeyData{}
	case "ReadyForQuery":
		bm = &pgproto3.ReadyForQuery{}
	case "RowDescription":
		bm = &pgproto3.RowDescription{}
	case "ParameterDescription":
		bm = &pgproto3.ParameterDescription{}
	case "DataRow":
		bm = &pgproto3.DataRow{}
	case "CommandComplete":
		bm = &pgproto3.CommandComplete{}
	case "CopyData":
		bm = &pgproto3.CopyData{}
	default:
		return nil, fmt.Errorf("%w: unsupported backend message %q", ErrBadTranscript, m.Type)
	}
	if err := json.Unmarshal(m.Raw, bm); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %v", ErrBadTranscript, m.Type, err)
	}
	return bm, nil
}

// Serve accepts connections on ln until ctx ends or ln fails, and answers
// each as the next recorded connection to the database it names.
func (r *Recorded) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			defer nc.Close()
			if err := r.serveConn(nc); err != nil {
				r.log.Warn("recorded server: connection ended", "remote", nc.RemoteAddr().String(), "err", err)
			}
		})
	}
}

// serveConn reads the startup message, picks the recorded connection, and
// then reads each of its client messages and writes their answers.
func (r *Recorded) serveConn(nc net.Conn) error {
	rd := bufio.NewReaderSize(nc, 64<<10)
	var body []byte
	if _, err := readMessage(rd, true, &body); err != nil {
		return err
	}
	var sm pgproto3.StartupMessage
	if err := sm.Decode(body); err != nil {
		return err
	}
	name := sm.Parameters["database"]
	r.mu.Lock()
	conns := r.recordedFor(name)
	var exs []exchange
	if conns != nil {
		exs = conns[r.opened[name]%len(conns)]
		r.opened[name]++
	}
	r.mu.Unlock()
	if conns == nil {
		return fmt.Errorf("replay: recorded server: no recorded conversation with database %q", name)
	}
	for i, ex := range exs {
		if i > 0 {
			typ, err := readMessage(rd, false, &body)
			if err != nil {
				return err
			}
			if typ != ex.typ {
				return fmt.Errorf("replay: recorded server: message %d is %q, recorded %q", i, typ, ex.typ)
			}
		}
		if ex.commit && r.durable != nil {
			if err := r.durable(); err != nil {
				return err
			}
		}
		if len(ex.answer) > 0 {
			if _, err := nc.Write(ex.answer); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordedFor returns the recorded connections that answer database name:
// its own, or those of the longest recorded database name its name ends
// with after an underscore. The caller holds r.mu.
func (r *Recorded) recordedFor(name string) [][]exchange {
	if conns, ok := r.byDB[name]; ok {
		return conns
	}
	var out [][]exchange
	longest := 0
	for db, conns := range r.byDB {
		if len(db) > longest && strings.HasSuffix(name, "_"+db) {
			out, longest = conns, len(db)
		}
	}
	return out
}

// readMessage reads one client message into *body and returns its type
// byte (0 for a startup message, which has none).
func readMessage(rd *bufio.Reader, startup bool, body *[]byte) (byte, error) {
	var hdr [5]byte
	h := hdr[:]
	if startup {
		h = hdr[1:]
	}
	if _, err := io.ReadFull(rd, h); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
	if n < 0 || n > 1<<30 {
		return 0, errors.New("replay: recorded conversation: bad message length")
	}
	if cap(*body) < n {
		*body = make([]byte, n)
	}
	*body = (*body)[:n]
	if _, err := io.ReadFull(rd, *body); err != nil {
		return 0, err
	}
	return hdr[0], nil
}
