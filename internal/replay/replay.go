package replay

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Options configure a replay.
type Options struct {
	// Addr is the server: "host:port", a libpq keyword/value conninfo
	// ("host=… port=…") or a postgres:// URL. Only host and port are used;
	// user and database come from each transcript's StartupMessage.
	Addr string
	// Timeout bounds the wait for each expected server message.
	Timeout time.Duration
	// Settle is the longest the replayer waits, before sending a message on
	// one connection, for the server to answer the previous message sent on
	// another connection (see "Interleaving" in docs/replay.md).
	Settle time.Duration
	// Context is how many preceding recorded messages of the connection a
	// Mismatch carries.
	Context int
	// Databases renames the databases the transcript connects to (recorded
	// name → name to use), so that several replays of one transcript can
	// run side by side on one server, each on its own lake.
	Databases map[string]string
	// Answered, when set, is called with the index in Transcript.Messages
	// of each recorded server message compared on its own (a
	// CommandComplete, a ReadyForQuery, …) once the server's answer has
	// arrived and matched, on the replaying goroutine. Benchmarks time
	// the server between such points.
	Answered func(i int)
}

// DefaultAddr is where `moraine replay` looks for a server by default.
const DefaultAddr = "127.0.0.1:5433"

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 20 * time.Millisecond
	}
	if o.Context <= 0 {
		o.Context = 8
	}
	return o
}

// Mismatch is the first server message that did not match the recording.
type Mismatch struct {
	Conn    int
	Seq     int    // recorded seq of the expected message
	Reason  string // what differed
	Want    string // recorded message(s), JSON
	Got     string // actual message(s), JSON; empty if none arrived
	Context []string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("conn %d seq %d: %s", m.Conn, m.Seq, m.Reason)
}

// Result is the outcome of replaying one transcript.
type Result struct {
	Name     string
	Compared int           // recorded server messages matched
	Elapsed  time.Duration // wall time of the replay
	// Err is nil when the transcript passed; a *Mismatch when the server
	// answered differently; another error when the replay could not run.
	Err error
}

// Passed reports whether every server message matched.
func (r Result) Passed() bool { return r.Err == nil }

// HostPort extracts "host:port" from a host:port, a keyword/value conninfo or
// a postgres:// URL.
func HostPort(addr string) (string, error) {
	switch {
	case strings.HasPrefix(addr, "postgres://"), strings.HasPrefix(addr, "postgresql://"):
		u, err := url.Parse(addr)
		if err != nil {
			return "", fmt.Errorf("replay: address: %w", err)
		}
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "5432"
		}
		return net.JoinHostPort(host, port), nil
	case strings.Contains(addr, "="):
		host, port := "127.0.0.1", "5432"
		for _, kv := range strings.Fields(addr) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return "", fmt.Errorf("replay: conninfo %q: bad element %q", addr, kv)
			}
			v = strings.Trim(v, "'")
			switch k {
			case "host", "hostaddr":
				if strings.HasPrefix(v, "/") {
					return "", fmt.Errorf("replay: conninfo %q: unix sockets are not supported", addr)
				}
				host = v
			case "port":
				port = v
			}
		}
		return net.JoinHostPort(host, port), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("replay: address %q: %w", addr, err)
	}
	return addr, nil
}

// actual is one message the server sent, copied out at once (pgproto3
// reuses its message values): DataRow and CopyData, the bulk of a
// conversation, as their values; every other message marshalled to JSON,
// the form the recording compares in.
type actual struct {
	Type string
	JSON []byte // every message but DataRow and CopyData
	row  row    // a DataRow's values
	data []byte // a CopyData's bytes
}

func newActual(m pgproto3.BackendMessage) (actual, error) {
	switch x := m.(type) {
	case *pgproto3.DataRow:
		n := 0
		for _, v := range x.Values {
			n += len(v)
		}
		buf := make([]byte, 0, n) // one allocation for the row's values
		rw := make(row, len(x.Values))
		for i, v := range x.Values {
			if v != nil { // a slice of buf is non-nil even when empty: "" is not NULL
				start := len(buf)
				buf = append(buf, v...)
				rw[i] = buf[start:len(buf):len(buf)]
			}
		}
		return actual{Type: "DataRow", row: rw}, nil
	case *pgproto3.CopyData:
		return actual{Type: "CopyData", data: append([]byte{}, x.Data...)}, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return actual{}, fmt.Errorf("marshal %T: %w", m, err)
	}
	return actual{Type: reflect.TypeOf(m).Elem().Name(), JSON: markOverallFormat(m, b)}, nil
}

// text is the message as JSON, as a recording shows it, for reports.
func (a actual) text() string {
	var m pgproto3.BackendMessage
	switch a.Type {
	case "DataRow":
		m = &pgproto3.DataRow{Values: a.row}
	case "CopyData":
		m = &pgproto3.CopyData{Data: a.data}
	default:
		return string(a.JSON)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprintf("%s (unprintable: %v)", a.Type, err)
	}
	return string(b)
}

// inbox is an unbounded queue of one connection's server messages, filled
// by a reader goroutine, so a connection the replay is not waiting on never
// blocks the server.
type inbox struct {
	mu     sync.Mutex
	cond   *sync.Cond
	msgs   []actual
	err    error // set when the reader stopped (EOF or error)
	closed bool
}

func newInbox() *inbox {
	in := &inbox{}
	in.cond = sync.NewCond(&in.mu)
	return in
}

func (in *inbox) push(a actual) {
	in.mu.Lock()
	in.msgs = append(in.msgs, a)
	in.mu.Unlock()
	in.cond.Broadcast()
}

func (in *inbox) stop(err error) {
	in.mu.Lock()
	in.closed, in.err = true, err
	in.mu.Unlock()
	in.cond.Broadcast()
}

var errTimeout = errors.New("timed out waiting for the server")

// peek waits until a message is available and returns it without removing it.
func (in *inbox) peek(ctx context.Context, d time.Duration) (actual, error) {
	in.mu.Lock()
	if len(in.msgs) > 0 { // the common case: no timers to arm
		a := in.msgs[0]
		in.mu.Unlock()
		return a, nil
	}
	in.mu.Unlock()
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, in.cond.Broadcast)
	defer timer.Stop()
	stop := context.AfterFunc(ctx, in.cond.Broadcast)
	defer stop()
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.msgs) == 0 {
		if in.closed {
			return actual{}, fmt.Errorf("connection closed: %v", in.err)
		}
		if err := ctx.Err(); err != nil {
			return actual{}, err
		}
		if !time.Now().Before(deadline) {
			return actual{}, errTimeout
		}
		in.cond.Wait()
	}
	return in.msgs[0], nil
}

func (in *inbox) pop() {
	in.mu.Lock()
	in.msgs = in.msgs[1:]
	in.mu.Unlock()
}

func (in *inbox) pending() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

// conn is one replayed client connection.
type conn struct {
	nc net.Conn
	fe *pgproto3.Frontend
	in *inbox
}

func dial(ctx context.Context, hostport string) (*conn, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := d.DialContext(dctx, "tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("replay: connect %s: %w", hostport, err)
	}
	c := &conn{nc: nc, fe: pgproto3.NewFrontend(nc, nc), in: newInbox()}
	go func() {
		for {
			m, err := c.fe.Receive()
			if err != nil {
				c.in.stop(err)
				return
			}
			a, err := newActual(m)
			if err != nil {
				c.in.stop(err)
				return
			}
			c.in.push(a)
		}
	}()
	return c, nil
}

// send buffers m and, when flush is set, writes out everything buffered.
func (c *conn) send(m pgproto3.FrontendMessage, flush bool) error {
	c.fe.Send(m)
	if !flush {
		return nil
	}
	return c.fe.Flush()
}

// copyOverall is the overall COPY format PostgreSQL announces for the given
// column format codes: binary (1) exactly when every column is binary.
func copyOverall(cols []uint16) int {
	if len(cols) == 0 {
		return 0
	}
	for _, f := range cols {
		if f != 1 {
			return 0
		}
	}
	return 1
}

// markOverallFormat adds an OverallFormat field to the JSON of a COPY
// response whose overall format contradicts its column formats. pgproto3's
// JSON (and so the recording) omits the field, so this is the only way the
// comparison can see it.
func markOverallFormat(m pgproto3.BackendMessage, b []byte) []byte {
	var overall byte
	var cols []uint16
	switch x := m.(type) {
	case *pgproto3.CopyOutResponse:
		overall, cols = x.OverallFormat, x.ColumnFormatCodes
	case *pgproto3.CopyInResponse:
		overall, cols = x.OverallFormat, x.ColumnFormatCodes
	default:
		return b
	}
	if int(overall) == copyOverall(cols) {
		return b
	}
	return append(b[:len(b)-1], []byte(fmt.Sprintf(`,"OverallFormat":%d}`, overall))...)
}

// item is a unit of comparison: one recorded server message, or a run that
// compares as a whole (DataRows of one result, a COPY OUT's CopyData and
// CopyDone, consecutive ParameterStatus messages).
type item struct {
	kind string // "single", "rows", "copy", "params"
	idx  []int  // indexes into Transcript.Messages
}

// plan groups each connection's recorded server messages into items; the
// map is keyed by the index of an item's first message.
func plan(t *Transcript) map[int]*item {
	items := map[int]*item{}
	open := map[int]*item{} // per conn: the run being extended
	for i, m := range t.Messages {
		if m.Dir == Frontend {
			delete(open, m.Conn) // a client message ends any run
			continue
		}
		kind := "single"
		switch m.Type {
		case "DataRow":
			kind = "rows"
		case "CopyData", "CopyDone":
			kind = "copy"
		case "ParameterStatus":
			kind = "params"
		}
		if cur := open[m.Conn]; cur != nil && cur.kind == kind && kind != "single" {
			if !(kind == "copy" && t.Messages[cur.idx[len(cur.idx)-1]].Type == "CopyDone") {
				cur.idx = append(cur.idx, i)
				continue
			}
		}
		it := &item{kind: kind, idx: []int{i}}
		items[i] = it
		open[m.Conn] = it
	}
	return items
}

// Replay replays one transcript against the server at opts.Addr. Client
// messages are sent in recorded global order; before the replay moves past
// a recorded server message it waits (up to opts.Timeout) for that
// connection's actual answer and compares it. It stops at the first
// mismatch.
func Replay(ctx context.Context, t *Transcript, opts Options) Result {
	opts = opts.withDefaults()
	start := time.Now()
	res := Result{Name: t.Name}
	hostport, err := HostPort(opts.Addr)
	if err != nil {
		res.Err = err
		return res
	}
	r := &replayer{t: t, opts: opts, hostport: hostport, conns: map[int]*conn{},
		stmts: annotate(t), items: plan(t), ov: findOverlaps(t), done: make([]bool, len(t.Messages)),
		maps: newMapper(), lastRD: map[int][]byte{}, copyFormat: map[int]bool{}, awaiting: map[int]bool{}, lastSent: -1}
	defer r.close()
	res.Err = r.run(ctx)
	res.Compared = r.compared
	res.Elapsed = time.Since(start)
	return res
}

type replayer struct {
	t        *Transcript
	opts     Options
	hostport string
	conns    map[int]*conn
	stmts    []*stmtInfo
	items    map[int]*item
	ov       overlaps
	done     []bool // messages already handled out of order (preRun)
	maps     *mapper
	compared int

	lastRD     map[int][]byte // per conn: the recorded RowDescription of the current result
	copyFormat map[int]bool   // per conn: the current COPY OUT is binary
	awaiting   map[int]bool   // per conn: a sent message has not been answered yet
	lastSent   int            // conn of the last client message sent, -1 before any
}

func (r *replayer) close() {
	for _, c := range r.conns {
		c.nc.Close()
	}
}

func (r *replayer) run(ctx context.Context) error {
	for i, m := range r.t.Messages {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.done[i] {
			continue
		}
		if m.Dir == Frontend {
			if err := r.preRun(ctx, i); err != nil {
				return err
			}
			if err := r.sendMsg(ctx, i); err != nil {
				return err
			}
			continue
		}
		it := r.items[i]
		if it == nil {
			continue // part of a run compared at its first message
		}
		if err := r.expect(ctx, it); err != nil {
			return err
		}
		r.awaiting[m.Conn] = false
	}
	// Anything the server sent beyond the recording is a difference too.
	for _, cn := range r.t.Conns() {
		c := r.conns[cn]
		if c == nil {
			continue
		}
		c.in.mu.Lock()
		extra := append([]actual(nil), c.in.msgs...)
		c.in.mu.Unlock()
		if len(extra) > 0 {
			return &Mismatch{Conn: cn, Seq: r.t.Messages[len(r.t.Messages)-1].Seq,
				Reason: "unexpected " + extra[0].Type + " after the recorded conversation", Got: extra[0].text()}
		}
	}
	return nil
}

func (r *replayer) sendMsg(ctx context.Context, i int) error {
	m := r.t.Messages[i]
	fm, err := r.t.frontend(i)
	if err != nil {
		return err
	}
	c := r.conns[m.Conn]
	if c == nil {
		if _, ok := fm.(*pgproto3.StartupMessage); !ok {
			return fmt.Errorf("%w: conn %d sends %s before its StartupMessage", ErrBadTranscript, m.Conn, m.Type)
		}
		c, err = dial(ctx, r.hostport)
		if err != nil {
			return err
		}
		r.conns[m.Conn] = c
		if sm := fm.(*pgproto3.StartupMessage); r.opts.Databases[sm.Parameters["database"]] != "" {
			params := maps.Clone(sm.Parameters)
			params["database"] = r.opts.Databases[params["database"]]
			fm = &pgproto3.StartupMessage{ProtocolVersion: sm.ProtocolVersion, Parameters: params}
		}
	}
	switch q := fm.(type) { // fm is shared: rewrite a copy
	case *pgproto3.Query:
		fm = &pgproto3.Query{String: r.maps.rewriteOIDs(q.String)}
	case *pgproto3.Parse:
		p := *q
		p.Query = r.maps.rewriteOIDs(q.Query)
		fm = &p
	}
	// Interleaving: if the previous message went to another connection that
	// has not answered yet, give the server up to Settle to act on it first,
	// so two racing requests reach it in the recorded order.
	if prev := r.lastSent; prev != m.Conn && prev >= 0 && r.awaiting[prev] {
		if pc := r.conns[prev]; pc != nil && pc.in.pending() == 0 {
			_, _ = pc.in.peek(ctx, r.opts.Settle)
		}
	}
	if err := c.send(fm, !r.pipelined(i)); err != nil {
		return fmt.Errorf("replay: conn %d seq %d: send %s: %w", m.Conn, m.Seq, m.Type, err)
	}
	r.lastSent = m.Conn
	if _, ok := fm.(*pgproto3.Terminate); !ok {
		r.awaiting[m.Conn] = true
	}
	return nil
}

// pipelined reports that the client message at index i is followed, with
// no server message between, by another client message of its connection
// that is sent without a run ahead (Parse then Sync, CopyData then
// CopyDone): libpq writes such messages with one send, so the replay
// writes them together too.
func (r *replayer) pipelined(i int) bool {
	if i+1 >= len(r.t.Messages) {
		return false
	}
	next := r.t.Messages[i+1]
	return next.Dir == Frontend && next.Conn == r.t.Messages[i].Conn && !r.done[i+1] && len(r.ov.inWindow(r.t, i+1)) == 0
}

// preRun runs ahead, before the client message at index i is sent, every
// other connection whose snapshot the recording shows taken while i's COMMIT
// was in flight: that connection's recorded messages up to the first answer
// of the transaction that takes the snapshot (see overlap.go). The messages
// it handles are marked done for the main loop.
func (r *replayer) preRun(ctx context.Context, i int) error {
	for _, p := range r.ov.inWindow(r.t, i) {
		conn := r.t.Messages[p.at].Conn
		if r.conns[conn] == nil {
			continue // not connected yet: it cannot have a snapshot to take
		}
		for j := i + 1; j <= p.until; j++ {
			m := r.t.Messages[j]
			if m.Conn != conn || r.done[j] {
				continue
			}
			if m.Dir == Frontend {
				if err := r.sendMsg(ctx, j); err != nil {
					return err
				}
			} else if it := r.items[j]; it != nil {
				if err := r.expect(ctx, it); err != nil {
					return err
				}
				r.awaiting[conn] = false
			}
			r.done[j] = true
		}
	}
	return nil
}

// mismatch builds a Mismatch for the item starting at recorded index i.
func (r *replayer) mismatch(i int, reason, want, got string) *Mismatch {
	m := r.t.Messages[i]
	mm := &Mismatch{Conn: m.Conn, Seq: m.Seq, Reason: reason, Want: want, Got: got}
	for j := i - 1; j >= 0 && len(mm.Context) < r.opts.Context; j-- {
		p := r.t.Messages[j]
		if p.Conn != m.Conn {
			continue
		}
		mm.Context = append(mm.Context, fmt.Sprintf("seq %d %c %s", p.Seq, p.Dir, abbreviate(string(p.Raw), 2000)))
	}
	for a, b := 0, len(mm.Context)-1; a < b; a, b = a+1, b-1 {
		mm.Context[a], mm.Context[b] = mm.Context[b], mm.Context[a]
	}
	return mm
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d more bytes)", len(s)-n)
}

// next waits for the connection's next actual message.
func (r *replayer) next(ctx context.Context, i int) (actual, error) {
	m := r.t.Messages[i]
	c := r.conns[m.Conn]
	if c == nil {
		return actual{}, r.mismatch(i, "server message recorded before the connection started", string(m.Raw), "")
	}
	a, err := c.in.peek(ctx, r.opts.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			return actual{}, ctx.Err()
		}
		return actual{}, r.mismatch(i, "expected "+m.Type+": "+err.Error(), string(m.Raw), "")
	}
	return a, nil
}

func (r *replayer) expect(ctx context.Context, it *item) error {
	first := it.idx[0]
	m := r.t.Messages[first]
	c := r.conns[m.Conn]
	switch it.kind {
	case "single":
		a, err := r.next(ctx, first)
		if err != nil {
			return err
		}
		if a.Type != m.Type {
			return r.mismatch(first, "expected "+m.Type+", got "+a.Type, string(m.Raw), a.text())
		}
		c.in.pop()
		if err := r.single(first, a); err != nil {
			return err
		}
		if r.opts.Answered != nil {
			r.opts.Answered(first)
		}
	case "params":
		var want, got []string
		for _, i := range it.idx {
			want = append(want, string(r.t.Messages[i].Raw))
		}
		for range it.idx {
			a, err := r.next(ctx, first)
			if err != nil {
				return err
			}
			if a.Type != "ParameterStatus" {
				return r.mismatch(first, "expected ParameterStatus, got "+a.Type, strings.Join(want, "\n"), a.text())
			}
			c.in.pop()
			got = append(got, string(a.JSON))
		}
		if err := r.compareSet(want, got); err != nil {
			return r.mismatch(first, err.Error(), strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	case "rows":
		return r.rows(ctx, it)
	case "copy":
		return r.copyOut(ctx, it)
	}
	r.compared += len(it.idx)
	return nil
}

// single compares one message and updates the per-connection result state.
func (r *replayer) single(i int, a actual) error {
	m := r.t.Messages[i]
	switch m.Type {
	case "RowDescription":
		r.lastRD[m.Conn] = m.Raw
	case "CopyOutResponse":
		var cr struct{ ColumnFormatCodes []uint16 }
		_ = json.Unmarshal(m.Raw, &cr)
		r.copyFormat[m.Conn] = copyOverall(cr.ColumnFormatCodes) == 1
	case "CommandComplete":
		if si := r.stmts[i]; si != nil && si.Cluster {
			var w, g struct{ CommandTag string }
			_ = json.Unmarshal(m.Raw, &w)
			_ = json.Unmarshal(a.JSON, &g)
			if digitsRE.ReplaceAllString(w.CommandTag, "N") != digitsRE.ReplaceAllString(g.CommandTag, "N") {
				return r.mismatch(i, "command tag differs", string(m.Raw), string(a.JSON))
			}
			return nil
		}
	}
	if err := r.maps.compareSingle(m.Type, m.Raw, a.JSON); err != nil {
		return r.mismatch(i, err.Error(), string(m.Raw), string(a.JSON))
	}
	return nil
}

// compareSet compares ParameterStatus runs as sets.
func (r *replayer) compareSet(want, got []string) error {
	norm := func(xs []string) ([]string, error) {
		out := make([]string, len(xs))
		for i, x := range xs {
			v, err := generic([]byte(x))
			if err != nil {
				return nil, err
			}
			if v["Name"] == "server_version" {
				delete(v, "Value")
			}
			b, _ := json.Marshal(v)
			out[i] = string(b)
		}
		sort.Strings(out)
		return out, nil
	}
	w, err := norm(want)
	if err != nil {
		return err
	}
	g, err := norm(got)
	if err != nil {
		return err
	}
	for i := range w {
		if w[i] != g[i] {
			return fmt.Errorf("ParameterStatus differs: %s, got %s", w[i], g[i])
		}
	}
	return nil
}

func (r *replayer) rows(ctx context.Context, it *item) error {
	first := it.idx[0]
	m := r.t.Messages[first]
	c := r.conns[m.Conn]
	want := make([]row, 0, len(it.idx))
	for _, i := range it.idx {
		rw, err := r.t.dataRow(i)
		if err != nil {
			return err
		}
		want = append(want, rw)
	}
	var got []row
	for {
		a, err := r.next(ctx, first)
		if err != nil {
			return err
		}
		if a.Type != "DataRow" {
			break
		}
		c.in.pop()
		got = append(got, a.row)
	}
	received := got
	si := r.stmts[first]
	if si != nil && si.Cluster {
		db := r.t.StartupParams(m.Conn)["database"]
		served := db
		if d := r.opts.Databases[db]; d != "" {
			served = d
		}
		want, got = onlyDatabase(want, db), onlyDatabase(got, served)
		if served != db {
			// The renamed database answers for the recorded one.
			for i := range got {
				got[i] = append(row{[]byte(db)}, got[i][1:]...)
			}
		}
	}
	cols := columnsOf(r.lastRD[m.Conn])
	ordered := si == nil || si.Ordered
	var sortCols []int
	if si != nil {
		sortCols = si.SortCols
	}
	if err := r.maps.compareRows(rulesFor(cols, si), want, got, ordered, sortCols); err != nil {
		var wantJSON, gotJSON []string
		for _, i := range it.idx {
			wantJSON = append(wantJSON, string(r.t.Messages[i].Raw))
		}
		for _, rw := range received {
			gotJSON = append(gotJSON, actual{Type: "DataRow", row: rw}.text())
		}
		return r.mismatch(first, "rows differ: "+err.Error(), abbreviate(strings.Join(wantJSON, "\n"), 8000), abbreviate(strings.Join(gotJSON, "\n"), 8000))
	}
	r.compared += len(it.idx)
	return nil
}

func onlyDatabase(rows []row, db string) []row {
	var out []row
	for _, rw := range rows {
		if len(rw) > 0 && string(rw[0]) == db {
			out = append(out, rw)
		}
	}
	return out
}

func (r *replayer) copyOut(ctx context.Context, it *item) error {
	first := it.idx[0]
	m := r.t.Messages[first]
	c := r.conns[m.Conn]
	var want []byte
	for _, i := range it.idx {
		if r.t.Messages[i].Type != "CopyData" {
			continue
		}
		d, err := r.t.copyData(i)
		if err != nil {
			return err
		}
		want = append(want, d...)
	}
	wantDone := r.t.Messages[it.idx[len(it.idx)-1]].Type == "CopyDone"
	var got []byte
	for {
		a, err := r.next(ctx, first)
		if err != nil {
			return err
		}
		if a.Type != "CopyData" {
			if wantDone {
				if a.Type != "CopyDone" {
					return r.mismatch(first, "expected CopyDone, got "+a.Type, "", a.text())
				}
				c.in.pop()
			}
			break
		}
		c.in.pop()
		got = append(got, a.data...)
	}
	bin := r.copyFormat[m.Conn]
	wr, err := decodeCopy(want, bin)
	if err != nil {
		return fmt.Errorf("%w: seq %d: %v", ErrBadTranscript, m.Seq, err)
	}
	gr, err := decodeCopy(got, bin)
	if err != nil {
		return r.mismatch(first, "malformed COPY stream: "+err.Error(), hex.EncodeToString(want), hex.EncodeToString(got))
	}
	rules := make([]valueRule, 0)
	if bin && len(wr) > 0 {
		for range wr[0] {
			rules = append(rules, ruleBinary)
		}
	}
	si := r.stmts[first]
	ordered := si == nil || si.Ordered
	var sortCols []int
	if si != nil {
		sortCols = si.SortCols
	}
	if err := r.maps.compareRows(rules, wr, gr, ordered, sortCols); err != nil {
		return r.mismatch(first, "COPY rows differ: "+err.Error(), abbreviate(hex.EncodeToString(want), 8000), abbreviate(hex.EncodeToString(got), 8000))
	}
	r.compared += len(it.idx)
	return nil
}

// Explain renders a replay error with context for humans: for a Mismatch,
// the connection's preceding recorded messages, then the recorded and the
// actual answer.
func Explain(err error) string {
	var mm *Mismatch
	if !errors.As(err, &mm) {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference: conn %d, recorded seq %d: %s\n", mm.Conn, mm.Seq, mm.Reason)
	if len(mm.Context) > 0 {
		b.WriteString("  context (recorded, this connection):\n")
		for _, c := range mm.Context {
			fmt.Fprintf(&b, "    %s\n", c)
		}
	}
	fmt.Fprintf(&b, "  want: %s\n", indentLines(mm.Want))
	if mm.Got == "" {
		b.WriteString("  got:  (nothing)\n")
	} else {
		fmt.Fprintf(&b, "  got:  %s\n", indentLines(mm.Got))
	}
	return b.String()
}

func indentLines(s string) string {
	return strings.ReplaceAll(s, "\n", "\n        ")
}
