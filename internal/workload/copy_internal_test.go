package workload

import (
	"bytes"
	"errors"
	"testing"
	"time"
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
