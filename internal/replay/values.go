package replay

import (
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"

	"github.com/jackc/pgx/v5/pgproto3"
)

// valueCache holds the values of recorded DataRow and CopyData messages,
// decoded from their JSON once for every replay of a transcript: a
// whole-catalog read is thousands of rows, and decoding them again at each
// replay made the replaying client cost more CPU than the server it
// measures.
//
// Entries are keyed by the address of a message's Raw bytes. Raw is never
// modified in place, only replaced, so an address names one content: a
// copy of the transcript that shares the cache, or has a message replaced,
// never reads another message's values.
type valueCache struct {
	mu     sync.Mutex
	values map[*byte]any // row or []byte
}

func newValueCache() *valueCache { return &valueCache{values: map[*byte]any{}} }

// dataRow returns the values of message i, a recorded DataRow. Callers
// must not modify them: concurrent replays share them.
func (t *Transcript) dataRow(i int) (row, error) {
	v, err := t.decoded(i, func(raw json.RawMessage) (any, error) { return decodeDataRow(raw) })
	rw, _ := v.(row)
	return rw, err
}

// copyData returns the bytes of message i, a recorded CopyData. Callers
// must not modify them.
func (t *Transcript) copyData(i int) ([]byte, error) {
	v, err := t.decoded(i, func(raw json.RawMessage) (any, error) {
		var cd pgproto3.CopyData
		err := json.Unmarshal(raw, &cd)
		return cd.Data, err
	})
	d, _ := v.([]byte)
	return d, err
}

func (t *Transcript) decoded(i int, decode func(json.RawMessage) (any, error)) (any, error) {
	m := &t.Messages[i]
	key := unsafe.SliceData(m.Raw)
	c := t.values
	if c != nil {
		c.mu.Lock()
		v, ok := c.values[key]
		c.mu.Unlock()
		if ok {
			return v, nil
		}
	}
	v, err := decode(m.Raw)
	if err != nil {
		return nil, fmt.Errorf("%w: seq %d: %v", ErrBadTranscript, m.Seq, err)
	}
	if c != nil {
		c.mu.Lock()
		c.values[key] = v
		c.mu.Unlock()
	}
	return v, nil
}
