package workload_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestDriverSendsWhatDuckDBSends holds the driver to the captured
// conversation: one steady-state data-file commit of DuckDB+DuckLake
// (s01_basic, the first one, from the pool's health check before BEGIN to
// the DISCARD ALL that resets the connection) must be, message by message,
// what a writer of the driver sends for each of its commits. Statement
// texts are compared exactly, except the write batch, whose statements are
// compared by kind (DuckDB's table has four columns, the driver's eight)
// and whose literals differ.
func TestDriverSendsWhatDuckDBSends(t *testing.T) {
	path, err := replay.Fixture("s01_basic")
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureCommit(t, path)
	t.Logf("DuckDB's data-file commit, %d messages:\n%s", len(want), strings.Join(want, "\n"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial, streams := teeDial(t)
	// One table: its first commit inserts the table's statistics, the
	// later ones update them, as in the captured commit.
	cfg := workload.Config{Dial: dial, Tables: 1, Columns: 8, Writers: 1, CommitsPerWriter: 3, Warmup: 0, Seed: 1}
	if err := workload.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, err := workload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits != 3 {
		t.Fatalf("%d commits landed, want 3", res.Commits)
	}
	var writer []string
	for _, s := range streams() {
		msgs := frontendMessages(t, s)
		if strings.Contains(strings.Join(msgs, "\n"), "INSERT INTO ducklake_data_file") {
			writer = msgs
		}
	}
	if writer == nil {
		t.Fatal("no connection sent a data-file commit")
	}
	commits := splitCommits(writer)
	if len(commits) != 3 {
		t.Fatalf("the writer's connection holds %d commits, want 3:\n%s", len(commits), strings.Join(writer, "\n"))
	}
	for i, got := range commits {
		w := want
		if i == 0 {
			// The table's first commit inserts its statistics: compare
			// everything but the batch.
			w, got = withoutBatch(want), withoutBatch(got)
		}
		if diff := diffLines(w, got); diff != "" {
			t.Errorf("commit %d differs from DuckDB's (- DuckDB, + driver):\n%s", i+1, diff)
		}
	}
	if !strings.Contains(strings.Join(commits[1], "\n"), "UPDATE ducklake_table_column_stats") {
		t.Fatalf("the second commit does not update the statistics: %v", commits[1])
	}
}

// fixtureCommit returns the normalized frontend messages of the first
// data-file commit in a captured conversation.
func fixtureCommit(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type rec struct {
		Conn int
		Dir  string
		Type string
		Msg  map[string]any
	}
	byConn := map[int][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Dir != "F" {
			continue
		}
		text, _ := r.Msg["String"].(string)
		if r.Type == "Parse" {
			text, _ = r.Msg["Query"].(string)
		}
		if r.Type == "Describe" {
			text, _ = r.Msg["ObjectType"].(string)
		}
		byConn[r.Conn] = append(byConn[r.Conn], normalize(r.Type, text))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, msgs := range byConn {
		for _, c := range splitCommits(msgs) {
			return c
		}
	}
	t.Fatalf("%s: no data-file commit", path)
	return nil
}

// withoutBatch is msgs without its write batch.
func withoutBatch(msgs []string) []string {
	var out []string
	for _, m := range msgs {
		if !strings.HasPrefix(m, "Query batch: ") {
			out = append(out, m)
		}
	}
	return out
}

// splitCommits cuts a connection's messages into the commits it holds:
// from the `SELECT 1` before a BEGIN to the DISCARD ALL after its COMMIT,
// keeping those whose write batch adds a data file.
func splitCommits(msgs []string) [][]string {
	var out [][]string
	for i := 0; i+1 < len(msgs); i++ {
		if msgs[i] != "Query SELECT 1" || !strings.HasPrefix(msgs[i+1], "Query BEGIN") {
			continue
		}
		for j := i + 1; j < len(msgs); j++ {
			if msgs[j] == "Query DISCARD ALL" {
				c := msgs[i : j+1]
				if strings.Contains(strings.Join(c, "\n"), "INSERT INTO ducklake_data_file") {
					out = append(out, c)
				}
				i = j
				break
			}
		}
	}
	return out
}

var (
	stmtKind = regexp.MustCompile(`^(INSERT INTO|UPDATE) "public"\.(\w+)`)
)

// normalize renders one frontend message for comparison: its type and
// text, and for a write batch the kinds of its statements, a run of one
// kind written once.
func normalize(typ, text string) string {
	if typ == "Query" && strings.HasPrefix(text, `INSERT INTO "public".ducklake_snapshot VALUES`) {
		var kinds []string
		for _, st := range strings.Split(text, ";") {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			k := st
			if m := stmtKind.FindStringSubmatch(st); m != nil {
				k = m[1] + " " + m[2]
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != k {
				kinds = append(kinds, k)
			}
		}
		return "Query batch: " + strings.Join(kinds, "; ")
	}
	return strings.TrimSpace(typ + " " + text)
}

// frontendMessages decodes what a client sent on one connection.
func frontendMessages(t *testing.T, stream []byte) []string {
	t.Helper()
	be := pgproto3.NewBackend(bytes.NewReader(stream), io.Discard)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		t.Fatalf("startup: %v", err)
	}
	var out []string
	for {
		msg, err := be.Receive()
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return out
			}
			t.Fatalf("decode: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			out = append(out, normalize("Query", m.String))
		case *pgproto3.Parse:
			out = append(out, normalize("Parse", m.Query))
		case *pgproto3.Describe:
			out = append(out, normalize("Describe", string(m.ObjectType)))
		case *pgproto3.Sync:
			out = append(out, "Sync")
		case *pgproto3.Terminate:
			return out
		default:
			out = append(out, fmt.Sprintf("%T", msg))
		}
	}
}

// teeDial connects to a fresh database of the test PostgreSQL and keeps a
// copy of everything each connection sends.
func teeDial(t *testing.T) (func(context.Context) (*pgconn.PgConn, error), func() [][]byte) {
	t.Helper()
	base := freshConfig(t)
	var mu sync.Mutex
	var bufs []*bytes.Buffer
	dial := func(ctx context.Context) (*pgconn.PgConn, error) {
		cfg := base.Copy()
		buf := &bytes.Buffer{}
		mu.Lock()
		bufs = append(bufs, buf)
		mu.Unlock()
		inner := cfg.DialFunc
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := inner(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &teeConn{Conn: c, mu: &mu, w: buf}, nil
		}
		return pgconn.ConnectConfig(ctx, cfg)
	}
	streams := func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		out := make([][]byte, len(bufs))
		for i, b := range bufs {
			out[i] = bytes.Clone(b.Bytes())
		}
		return out
	}
	return dial, streams
}

type teeConn struct {
	net.Conn
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (c *teeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.w.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// freshConfig creates a database in the test PostgreSQL, dropped at the
// end of the test, and returns a connection config for it (without TLS,
// so that what the client writes is the protocol itself).
func freshConfig(t *testing.T) *pgconn.Config {
	t.Helper()
	cfg, drop, err := workload.FreshDatabaseConfig(context.Background(), testenv.Postgres(t), "moraine_fid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	return cfg
}

// diffLines lists the lines of want missing from got (-) and the lines of
// got not in want (+), in order, or "" when they are equal.
func diffLines(want, got []string) string {
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return ""
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case i < len(want) && j < len(got) && want[i] == got[j]:
			fmt.Fprintf(&b, "  %s\n", abbrev(want[i]))
			i, j = i+1, j+1
		case i < len(want) && (j >= len(got) || !contains(got[j:], want[i])):
			fmt.Fprintf(&b, "- %s\n", abbrev(want[i]))
			i++
		default:
			fmt.Fprintf(&b, "+ %s\n", abbrev(got[j]))
			j++
		}
	}
	return b.String()
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func abbrev(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
