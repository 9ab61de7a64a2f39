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
// and would otherwise derive again at each replay: the values of recorded
// DataRow and CopyData messages, decoded from their JSON (a whole-catalog
// read is thousands of rows), and the statements of each query text with
// their analysis. Without it the replaying client cost more CPU than the
// server it measures.
//
// Keys say what an entry is of:
//   - a message's value (rawKey) is keyed by the address of its Raw bytes
//     and what was decoded from them. Raw is never modified in place, only
//     replaced, so an address names one content: a copy of the transcript
//     that shares the cache, or has a message replaced, never reads another
//     message's values;
//   - a simple query's statements (splitKey) and a statement's analysis
//     (infoKey) are keyed by the text, of which they are functions.
//
// Values are never modified once made.
type valueCache struct {
	mu sync.Mutex
	m  map[any]any
}

type (
	rawKey struct {
		raw  *byte
		what string // "DataRow", "CopyData" or "frontend"
	}
	splitKey string
	infoKey  string
)

func newValueCache() *valueCache { return &valueCache{m: map[any]any{}} }

// get returns the entry for key, making it with f when absent; a nil cache
// makes it at each call.
func (c *valueCache) get(key any, f func() any) any {
	if c == nil {
		return f()
	}
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = f()
	c.mu.Lock()
	c.m[key] = v
	c.mu.Unlock()
	return v
}

// dataRow returns the values of message i, a recorded DataRow. Callers
// must not modify them: concurrent replays share them.
func (t *Transcript) dataRow(i int) (row, error) {
	v, err := t.decoded(i, "DataRow", func(raw json.RawMessage) (any, error) { return decodeDataRow(raw) })
	rw, _ := v.(row)
	return rw, err
}

// copyData returns the bytes of message i, a recorded CopyData. Callers
// must not modify them.
func (t *Transcript) copyData(i int) ([]byte, error) {
	v, err := t.decoded(i, "CopyData", func(raw json.RawMessage) (any, error) {
		var cd pgproto3.CopyData
		err := json.Unmarshal(raw, &cd)
		return cd.Data, err
	})
	d, _ := v.([]byte)
	return d, err
}

// decoded returns message i's value, decoded once; a message that does not
// decode is an error at every use.
func (t *Transcript) decoded(i int, what string, decode func(json.RawMessage) (any, error)) (any, error) {
	m := &t.Messages[i]
	type result struct {
		v   any
		err error
	}
	r := t.values.get(rawKey{unsafe.SliceData(m.Raw), what}, func() any {
		v, err := decode(m.Raw)
		return result{v, err}
	}).(result)
	if r.err != nil {
		return nil, fmt.Errorf("%w: seq %d: %v", ErrBadTranscript, m.Seq, r.err)
	}
	return r.v, nil
}

// frontend returns message i, a client message, decoded once. Callers must
// not modify it: concurrent replays share it.
func (t *Transcript) frontend(i int) (pgproto3.FrontendMessage, error) {
	v, err := t.decoded(i, "frontend", func(json.RawMessage) (any, error) { return t.Messages[i].FrontendMessage() })
	fm, _ := v.(pgproto3.FrontendMessage)
	return fm, err
}

// statements returns the statements of a simple query's text (the whole
// text if it does not split).
func (t *Transcript) statements(query string) []string {
	return t.values.get(splitKey(query), func() any {
		stmts, err := pg_query.SplitWithParser(query, true)
		if err != nil {
			return []string{query}
		}
		return stmts
	}).([]string)
}

// info returns the analysis of one statement's text.
func (t *Transcript) info(text string) *stmtInfo {
	return t.values.get(infoKey(text), func() any { return analyse(text) }).(*stmtInfo)
}
