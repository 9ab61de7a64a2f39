package replay

import (
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// valueCache holds what replays of a transcript derive from its recording
// and would otherwise derive again at each replay: the client messages and
// the values of recorded DataRow and CopyData messages, decoded from their
// JSON (a whole-catalog read is thousands of rows), and the statements of
// each query text with their analysis. Without it the replaying client cost
// more CPU than the server it measures.
//
// A message's values are keyed by the address of its Raw bytes. Raw is
// never modified in place, only replaced, so an address names one content
// (and the key keeps those bytes alive, so the address is not reused): a
// copy of the transcript that shares the cache, or has a message replaced,
// never reads another message's values. A simple query's
// statements and a statement's analysis are keyed by the text, of which
// they are functions.
//
// Values are never modified once made.
type valueCache struct {
	mu       sync.Mutex
	rows     map[*byte]decodedValue[row]
	data     map[*byte]decodedValue[[]byte]
	frontend map[*byte]decodedValue[pgproto3.FrontendMessage]
	stmts    map[string][]string
	infos    map[string]*stmtInfo
}

// decodedValue is a message's value, or why it does not decode.
type decodedValue[V any] struct {
	v   V
	err error
}

func newValueCache() *valueCache {
	return &valueCache{
		rows:     map[*byte]decodedValue[row]{},
		data:     map[*byte]decodedValue[[]byte]{},
		frontend: map[*byte]decodedValue[pgproto3.FrontendMessage]{},
		stmts:    map[string][]string{},
		infos:    map[string]*stmtInfo{},
	}
}

// cached returns the entry for key in the map pick chooses, making it with
// f when absent; without a cache (c nil) it makes it at each call.
func cached[K comparable, V any](c *valueCache, pick func(*valueCache) map[K]V, key K, f func() V) V {
	if c == nil {
		return f()
	}
	c.mu.Lock()
	v, ok := pick(c)[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = f()
	c.mu.Lock()
	pick(c)[key] = v
	c.mu.Unlock()
	return v
}

// dataRow returns the values of message i, a recorded DataRow. Callers
// must not modify them: concurrent replays share them.
func (t *Transcript) dataRow(i int) (row, error) {
	return decoded(t, i, func(c *valueCache) map[*byte]decodedValue[row] { return c.rows }, decodeDataRow)
}

// copyData returns the bytes of message i, a recorded CopyData. Callers
// must not modify them.
func (t *Transcript) copyData(i int) ([]byte, error) {
	return decoded(t, i, func(c *valueCache) map[*byte]decodedValue[[]byte] { return c.data }, func(raw []byte) ([]byte, error) {
		var cd pgproto3.CopyData
		err := json.Unmarshal(raw, &cd)
		return cd.Data, err
	})
}

// frontend returns message i, a client message, decoded once. Callers must
// not modify it: concurrent replays share it.
func (t *Transcript) frontend(i int) (pgproto3.FrontendMessage, error) {
	return decoded(t, i, func(c *valueCache) map[*byte]decodedValue[pgproto3.FrontendMessage] { return c.frontend }, func([]byte) (pgproto3.FrontendMessage, error) {
		return t.Messages[i].FrontendMessage()
	})
}

// decoded returns message i's value, decoded once; a message that does not
// decode is an error at every use.
func decoded[V any](t *Transcript, i int, pick func(*valueCache) map[*byte]decodedValue[V], decode func([]byte) (V, error)) (V, error) {
	m := &t.Messages[i]
	d := cached(t.values, pick, unsafe.SliceData(m.Raw), func() decodedValue[V] {
		v, err := decode(m.Raw)
		return decodedValue[V]{v, err}
	})
	if d.err != nil {
		return d.v, fmt.Errorf("%w: seq %d: %v", ErrBadTranscript, m.Seq, d.err)
	}
	return d.v, nil
}

// statements returns the statements of a simple query's text (the whole
// text if it does not split).
func (t *Transcript) statements(query string) []string {
	return cached(t.values, func(c *valueCache) map[string][]string { return c.stmts }, query, func() []string {
		stmts, err := pg_query.SplitWithParser(query, true)
		if err != nil {
			return []string{query}
		}
		return stmts
	})
}

// info returns the analysis of one statement's text.
func (t *Transcript) info(text string) *stmtInfo {
	return cached(t.values, func(c *valueCache) map[string]*stmtInfo { return c.infos }, text, func() *stmtInfo { return analyse(text) })
}
