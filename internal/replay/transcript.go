// Package replay loads captured DuckDB+DuckLake ↔ PostgreSQL wire
// conversations (the JSONL transcripts in testdata/fixtures), replays their
// client side against a server and compares every server message with the
// recorded PostgreSQL answer, modulo the volatile fields documented in
// docs/replay.md. It also derives the statement-shape inventory
// (testdata/shapes) that the SQL executor is measured against.
package replay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Direction of a recorded message.
const (
	Frontend = 'F' // client → server
	Backend  = 'B' // server → client
)

// ErrBadTranscript marks a transcript that cannot be parsed or replayed
// (malformed JSON, unknown message type, out-of-order sequence numbers).
var ErrBadTranscript = errors.New("replay: bad transcript")

// Message is one recorded wire message. Raw is the message exactly as
// pgproto3 marshalled it to JSON at capture time.
type Message struct {
	Conn int             // connection number within the transcript
	Seq  int             // global order across all connections
	T    float64         // seconds since the capturing proxy started
	Dir  byte            // Frontend or Backend
	Type string          // pgproto3 type name, e.g. "Query"
	Raw  json.RawMessage // the "msg" object
}

// Transcript is one captured conversation.
// INVARIANT: Messages is sorted by Seq, and Seq values are distinct.
type Transcript struct {
	Name     string // file base name without .jsonl, e.g. "s01_basic"
	Path     string
	Messages []Message

	// values holds recorded result values decoded once for all replays of
	// this transcript (nil: decode at each use).
	values *valueCache
}

type rawLine struct {
	Conn int             `json:"conn"`
	Seq  int             `json:"seq"`
	T    float64         `json:"t"`
	Dir  string          `json:"dir"`
	Type string          `json:"type"`
	Msg  json.RawMessage `json:"msg"`
}

// Load reads a transcript file.
func Load(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: open transcript: %w", err)
	}
	defer f.Close()
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	tr, err := Read(f, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr.Path = path
	return tr, nil
}

// Read parses a transcript from r. Lines are sorted by seq; a duplicate seq,
// an unknown direction or a message that does not decode is an error.
func Read(r io.Reader, name string) (*Transcript, error) {
	tr := &Transcript{Name: name, values: newValueCache()}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<28)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var rl rawLine
		if err := json.Unmarshal(b, &rl); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadTranscript, line, err)
		}
		if rl.Dir != "F" && rl.Dir != "B" {
			return nil, fmt.Errorf("%w: line %d: direction %q", ErrBadTranscript, line, rl.Dir)
		}
		if rl.Type == "" || len(rl.Msg) == 0 {
			return nil, fmt.Errorf("%w: line %d: missing type or msg", ErrBadTranscript, line)
		}
		m := Message{Conn: rl.Conn, Seq: rl.Seq, T: rl.T, Dir: rl.Dir[0], Type: rl.Type, Raw: append(json.RawMessage(nil), rl.Msg...)}
		if m.Dir == Frontend {
			// Decode now so a transcript that cannot be replayed fails at load.
			if _, err := m.FrontendMessage(); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrBadTranscript, line, err)
			}
		}
		tr.Messages = append(tr.Messages, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("replay: read transcript: %w", err)
	}
	sort.SliceStable(tr.Messages, func(i, j int) bool { return tr.Messages[i].Seq < tr.Messages[j].Seq })
	for i := 1; i < len(tr.Messages); i++ {
		if tr.Messages[i].Seq == tr.Messages[i-1].Seq {
			return nil, fmt.Errorf("%w: duplicate seq %d", ErrBadTranscript, tr.Messages[i].Seq)
		}
	}
	return tr, nil
}

// Conns returns the connection numbers in order of first appearance.
func (t *Transcript) Conns() []int {
	var out []int
	seen := map[int]bool{}
	for _, m := range t.Messages {
		if !seen[m.Conn] {
			seen[m.Conn] = true
			out = append(out, m.Conn)
		}
	}
	return out
}

// StartupParams returns the StartupMessage parameters of a connection, or nil.
func (t *Transcript) StartupParams(conn int) map[string]string {
	for _, m := range t.Messages {
		if m.Conn == conn && m.Type == "StartupMessage" {
			fm, err := m.FrontendMessage()
			if err != nil {
				return nil
			}
			return fm.(*pgproto3.StartupMessage).Parameters
		}
	}
	return nil
}

// Databases returns the distinct database names the transcript connects to.
func (t *Transcript) Databases() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range t.Conns() {
		if db := t.StartupParams(c)["database"]; db != "" && !seen[db] {
			seen[db] = true
			out = append(out, db)
		}
	}
	return out
}

// FrontendMessage decodes a recorded client message into the pgproto3 value
// that is sent on replay. Only the message types a DuckDB or psql client
// sends in the fixtures are supported; anything else is ErrBadTranscript
// rather than a silently skipped message.
func (m Message) FrontendMessage() (pgproto3.FrontendMessage, error) {
	var fm pgproto3.FrontendMessage
	switch m.Type {
	case "StartupMessage":
		fm = &pgproto3.StartupMessage{}
	case "Query":
		fm = &pgproto3.Query{}
	case "Parse":
		fm = &pgproto3.Parse{}
	case "Bind":
		fm = &pgproto3.Bind{}
	case "Describe":
		fm = &pgproto3.Describe{}
	case "Execute":
		fm = &pgproto3.Execute{}
	case "Close":
		fm = &pgproto3.Close{}
	case "Sync":
		fm = &pgproto3.Sync{}
	case "Flush":
		fm = &pgproto3.Flush{}
	case "CopyData":
		fm = &pgproto3.CopyData{}
	case "CopyDone":
		fm = &pgproto3.CopyDone{}
	case "CopyFail":
		fm = &pgproto3.CopyFail{}
	case "Terminate":
		fm = &pgproto3.Terminate{}
	default:
		return nil, fmt.Errorf("%w: unsupported frontend message %q", ErrBadTranscript, m.Type)
	}
	if err := json.Unmarshal(m.Raw, fm); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %v", ErrBadTranscript, m.Type, err)
	}
	if sm, ok := fm.(*pgproto3.StartupMessage); ok && sm.ProtocolVersion == 0 {
		sm.ProtocolVersion = pgproto3.ProtocolVersionNumber
	}
	return fm, nil
}

// LoadDir loads every *.jsonl transcript in dir, sorted by name.
func LoadDir(dir string) ([]*Transcript, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("replay: list transcripts: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("replay: no *.jsonl transcripts in %s", dir)
	}
	sort.Strings(paths)
	out := make([]*Transcript, 0, len(paths))
	for _, p := range paths {
		tr, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	return out, nil
}

// FixturesDir locates the captured conversations, which the repository
// keeps in testdata/fixtures at its root: $MORAINE_FIXTURES if set, else
// that directory under the nearest parent of the working directory that
// holds go.mod. Every test, script and command finds them through it (or, in
// shell, through the same rule in scripts/replay-fixtures).
func FixturesDir() (string, error) {
	if dir := os.Getenv("MORAINE_FIXTURES"); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return "", fmt.Errorf("replay: MORAINE_FIXTURES: %w", err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("replay: locate fixtures: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, "testdata", "fixtures")
			if st, err := os.Stat(cand); err != nil || !st.IsDir() {
				return "", fmt.Errorf("replay: no testdata/fixtures in the module at %s (set MORAINE_FIXTURES)", dir)
			}
			return cand, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("replay: no go.mod above %s to find testdata/fixtures in (set MORAINE_FIXTURES)", wd)
		}
	}
}

// Fixture is the path of the named captured conversation ("s01_basic").
func Fixture(name string) (string, error) {
	dir, err := FixturesDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name+".jsonl"), nil
}

// LoadFixture reads the named captured conversation.
func LoadFixture(name string) (*Transcript, error) {
	path, err := Fixture(name)
	if err != nil {
		return nil, err
	}
	return Load(path)
}
