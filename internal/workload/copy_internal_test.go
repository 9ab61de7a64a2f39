package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestCopyRoundTrip(t *testing.T) {
	enc := newCopyEncoder()
	enc.row(int64(7), "x", nil, true, time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC), [16]byte{1})
	enc.row(int64(-1), "", false, nil, nil, nil)
	rows, err := decodeCopy(enc.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != 6 {
		t.Fatalf("rows %v", rows)
	}
	if v, ok, err := int8(rows[0][0]); v != 7 || !ok || err != nil {
		t.Fatalf("int8 = %d %v %v", v, ok, err)
	}
	if string(rows[0][1]) != "x" || rows[0][2] != nil || !bytes.Equal(rows[0][3], []byte{1}) {
		t.Fatalf("row 0 = %q", rows[0])
	}
	if v, _, _ := int8(rows[0][4]); v != 1_000_000 {
		t.Fatalf("timestamptz = %d µs", v)
	}
	if v, _, _ := int8(rows[1][0]); v != -1 {
		t.Fatalf("int8 = %d", v)
	}
	if rows[1][1] == nil || len(rows[1][1]) != 0 {
		t.Fatalf("empty string decoded as %v", rows[1][1])
	}
	for _, bad := range [][]byte{nil, []byte("PGCOPY"), enc.bytes()[:len(enc.bytes())-2], append(enc.bytes()[:19:19], 0, 1, 0, 0, 0, 9)} {
		if _, err := decodeCopy(bad); !errors.Is(err, errCopyFormat) {
			t.Errorf("decodeCopy(%q) = %v, want errCopyFormat", bad, err)
		}
	}
}

func FuzzDecodeCopy(f *testing.F) {
	enc := newCopyEncoder()
	enc.row(int64(1), "a", nil)
	f.Add(enc.bytes())
	f.Add(newCopyEncoder().bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := decodeCopy(b)
		if err != nil {
			if !errors.Is(err, errCopyFormat) {
				t.Fatalf("error %v does not wrap errCopyFormat", err)
			}
			return
		}
		// Whatever decodes re-encodes to a stream that decodes the same.
		again := newCopyEncoder()
		for _, r := range rows {
			cells := make([]cell, len(r))
			for i, f := range r {
				if f != nil {
					cells[i] = string(f)
				}
			}
			again.row(cells...)
		}
		back, err := decodeCopy(again.bytes())
		if err != nil || len(back) != len(rows) {
			t.Fatalf("re-decode: %v (%d rows, want %d)", err, len(back), len(rows))
		}
	})
}

// TestCopyDecodeReuse: decoding into the buffers of an earlier decode
// (copyRows) gives the same rows as decoding afresh, whatever the earlier
// stream held.
func TestCopyDecodeReuse(t *testing.T) {
	long := newCopyEncoder()
	for i := range 50 {
		long.row(int64(i), "padding", nil, int64(-i))
	}
	short := newCopyEncoder()
	short.row(int64(7), nil)
	short.row("a", "b")
	rows, cells, err := decodeCopyInto(long.bytes(), nil, nil)
	if err != nil || len(rows) != 50 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, stream := range [][]byte{short.bytes(), long.bytes(), short.bytes()} {
		want, err := decodeCopy(stream)
		if err != nil {
			t.Fatal(err)
		}
		rows, cells, err = decodeCopyInto(stream, rows[:0], cells[:0])
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want) {
			t.Fatalf("%d rows reused, %d afresh", len(rows), len(want))
		}
		for i := range want {
			if len(rows[i]) != len(want[i]) {
				t.Fatalf("row %d: %q reused, %q afresh", i, rows[i], want[i])
			}
			for j := range want[i] {
				if !bytes.Equal(rows[i][j], want[i][j]) || (rows[i][j] == nil) != (want[i][j] == nil) {
					t.Fatalf("row %d: %q reused, %q afresh", i, rows[i], want[i])
				}
			}
		}
	}
}

// TestStatsKeepTheirTable: a commit's statistics keep the rows of the table
// it commits to and skip the others, and a row without a table id is a
// format error, not a skipped row.
func TestStatsKeepTheirTable(t *testing.T) {
	enc := newCopyEncoder()
	enc.row(int64(1), int64(1), false, nil, "a", "b", nil)
	enc.row(int64(2), int64(1), false, nil, "c", "d", nil)
	enc.row(int64(2), int64(2), true, nil, "e", "f", nil)
	enc.row(int64(3), int64(1), false, nil, "g", "h", nil)
	rows, err := decodeCopy(enc.bytes())
	if err != nil {
		t.Fatal(err)
	}
	st := (&driver{}).newStats(2)
	var kept []int
	for i, r := range rows {
		mine, err := st.mine(r)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if mine {
			kept = append(kept, i)
		}
	}
	if len(kept) != 2 || kept[0] != 1 || kept[1] != 2 {
		t.Fatalf("kept rows %v of table 2; want 1 and 2", kept)
	}
	for _, bad := range [][][]byte{nil, {nil, {0}}, {{1, 2, 3}}} {
		if _, err := st.mine(bad); !errors.Is(err, errCopyFormat) {
			t.Errorf("row %q: %v; want a format error", bad, err)
		}
	}
}

// TestCommitInDoubt: which COMMIT errors leave the commit's fate unknown.
func TestCommitInDoubt(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true}, // the connection closed mid-answer
		{fmt.Errorf("read: %w", net.ErrClosed), true},
		{&pgconn.PgError{Code: "57P01", Message: "server fenced"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "57P01"}), true},
		{&pgconn.PgError{Code: "40001"}, false}, // refused: serialization
		{&pgconn.PgError{Code: "23505"}, false}, // refused: the snapshot id is taken
		{&pgconn.PgError{Code: "58030"}, false}, // refused: the store write failed
	} {
		if got := commitInDoubt(tc.err); got != tc.want {
			t.Errorf("commitInDoubt(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
