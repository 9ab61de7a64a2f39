package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestValueCacheFollowsRaw: decoded values are shared by copies of a
// transcript, and a message whose Raw is replaced is decoded anew — the
// mutation tests rely on that to see their edits.
func TestValueCacheFollowsRaw(t *testing.T) {
	const src = `{"conn":1,"seq":1,"t":0,"dir":"B","type":"DataRow","msg":{"Values":[{"text":"a"},null,{"binary":"00ff"}]}}
{"conn":1,"seq":2,"t":0,"dir":"B","type":"CopyData","msg":{"Data":"0102"}}
`
	tr, err := Read(strings.NewReader(src), "t")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := tr.dataRow(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (row{[]byte("a"), nil, {0x00, 0xff}}); !rowsEqual(rw, want) {
		t.Fatalf("decoded %q, want %q", rw, want)
	}
	if d, err := tr.copyData(1); err != nil || !bytes.Equal(d, []byte{1, 2}) {
		t.Fatalf("copy data %x, %v", d, err)
	}

	cp := *tr // shares the cache
	cp.Messages = append([]Message(nil), tr.Messages...)
	cp.Messages[0].Raw = json.RawMessage(`{"Values":[{"text":"b"}]}`)
	rw, err = cp.dataRow(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (row{[]byte("b")}); !rowsEqual(rw, want) {
		t.Fatalf("after replacing Raw: decoded %q, want %q", rw, want)
	}
	if rw, _ := tr.dataRow(0); !rowsEqual(rw, row{[]byte("a"), nil, {0x00, 0xff}}) {
		t.Fatalf("the original now reads %q", rw)
	}
}

func rowsEqual(a, b row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestActualRowKeepsNULLApart: a received row's empty value stays non-nil
// and its NULL nil, and its values outlive the reader's buffer.
func TestActualRowKeepsNULLApart(t *testing.T) {
	wire := [][]byte{nil, {}, []byte("x")}
	a, err := newActual(&pgproto3.DataRow{Values: wire})
	if err != nil {
		t.Fatal(err)
	}
	wire[2][0] = 'y' // pgproto3 reuses its buffer for the next message
	if !rowsEqual(a.row, row{nil, {}, []byte("x")}) || a.row[1] == nil {
		t.Fatalf("row %q (empty value nil: %v)", a.row, a.row[1] == nil)
	}
}
