package catalog

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
)

// chunkRows maps each chunk key of a published table to its rows, and
// checks that the chunks cover the table's rows in ctid order.
func chunkRows(t *testing.T, tb *Table) map[ChunkKey]string {
	t.Helper()
	out := map[ChunkKey]string{}
	var scanned []string
	tb.Scan(func(c CTID, r datum.Row) bool {
		scanned = append(scanned, fmt.Sprintf("%s=%x", c, []byte(r)))
		return true
	})
	var chunked []string
	ok := tb.Chunks(func(ch Chunk) bool {
		var b bytes.Buffer
		for i := 0; i < ch.Len(); i++ {
			c, r := ch.Row(i)
			s := fmt.Sprintf("%s=%x", c, []byte(r))
			chunked = append(chunked, s)
			b.WriteString(s + ";")
		}
		out[ch.Key()] = b.String()
		return true
	})
	if !ok {
		t.Fatal("Chunks refused a published table")
	}
	if fmt.Sprint(chunked) != fmt.Sprint(scanned) {
		t.Fatalf("chunks do not cover the table in ctid order:\nchunks %v\nscan   %v", chunked, scanned)
	}
	return out
}

// TestChunkKeysNameTheirRows: a chunk key of one version found again in a
// later version names the same rows; a commit changes the keys of the
// chunks it wrote and leaves the others; a table being written refuses.
func TestChunkKeysNameTheirRows(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	for i := int64(1); i <= 500; i++ {
		_, err := tx.InsertRow("public", "snap", snapRow(i, fmt.Sprintf("n%d", i)))
		mustNoErr(t, err)
	}
	mustNoErr(t, tx.Commit(ctx))
	v1, err := db.Current().Table("public", "snap")
	mustNoErr(t, err)
	before := chunkRows(t, v1)
	if len(before) < 10 {
		t.Fatalf("500 rows in %d chunks: the test needs several", len(before))
	}

	// Update one row: its old chunk and the tail (where its new version
	// goes) change; most chunks are shared.
	tx = db.Begin()
	tb, err := tx.Table("public", "snap")
	mustNoErr(t, err)
	var target CTID
	n := 0
	tb.Scan(func(c CTID, r datum.Row) bool { target, n = c, n+1; return n < 250 })
	_, err = tx.UpdateRow("public", "snap", target, snapRow(250, "changed"))
	mustNoErr(t, err)
	if own, err := tx.Peek("public", "snap"); err != nil || own.Chunks(func(Chunk) bool { return true }) {
		t.Fatalf("Chunks answered for a table the transaction is writing (err %v)", err)
	}
	mustNoErr(t, tx.Commit(ctx))
	v2, err := db.Current().Table("public", "snap")
	mustNoErr(t, err)
	after := chunkRows(t, v2)

	shared := 0
	for k, rows := range after {
		if old, ok := before[k]; ok {
			shared++
			if old != rows {
				t.Fatalf("one key, two contents:\n%s\n%s", old, rows)
			}
		}
	}
	if shared == 0 || shared == len(after) {
		t.Fatalf("%d of %d chunks shared after one update: want some, not all", shared, len(after))
	}
	// The old version is unchanged by the commit.
	again := chunkRows(t, v1)
	for k, rows := range before {
		if again[k] != rows {
			t.Fatalf("the published version's chunk changed:\n%s\n%s", rows, again[k])
		}
	}
}
