package datum

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestWalkMatchesDecode: on rows of random types and values, and on
// arbitrary bytes, a walk fails exactly when Row.Decode fails, and each
// cell it records holds the value Decode returns.
func TestWalkMatchesDecode(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		types, vals := genRow(rt, 1, 12)
		row := Row(EncodeRow(nil, types, vals))
		if rapid.Bool().Draw(rt, "garble") {
			row = Row(rapid.SliceOfN(rapid.Byte(), 0, len(row)+4).Draw(rt, "bytes"))
		}
		w, ok := NewRowWalker(types)
		if !ok {
			rt.Fatalf("no walker for %v", types)
		}
		got, decErr := row.Decode(types, nil)
		walkErr := w.Walk(row)
		if (decErr == nil) != (walkErr == nil) {
			rt.Fatalf("Decode: %v, Walk: %v", decErr, walkErr)
		}
		if decErr != nil {
			return
		}
		for i, v := range got {
			c := w.Cells[i]
			if c.Null != v.IsNull() {
				rt.Fatalf("column %d (%s): walk null %v, decoded %+v", i, types[i], c.Null, v)
			}
			if c.Null {
				continue
			}
			switch storedKindOf(types[i].Kind()) {
			case skVarint, skBool:
				if c.V != v.I {
					rt.Fatalf("column %d (%s): walk %d, decoded %+v", i, types[i], c.V, v)
				}
			case skFloat:
				if bits := binary.LittleEndian.Uint64(row[c.Off:]); bits != uint64(v.I) && !math.IsNaN(v.Float()) {
					rt.Fatalf("column %d (%s): walk bits %x, decoded %+v", i, types[i], bits, v)
				}
			case skUUID, skLen:
				if k := types[i].Kind(); k != KindArray && !bytes.Equal(row[c.Off:c.Off+c.N], []byte(v.S)) {
					rt.Fatalf("column %d (%s): walk %q, decoded %+v", i, types[i], row[c.Off:c.Off+c.N], v)
				}
			}
		}
	})
}

// TestUvarint: the walk's varint readers agree with encoding/binary's on
// every length of every value drawn, encoded or arbitrary bytes, short
// buffers and overlong encodings included.
func TestUvarint(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var b []byte
		if rapid.Bool().Draw(rt, "encoded") {
			v := rapid.Uint64().Draw(rt, "v") >> rapid.IntRange(0, 63).Draw(rt, "shift")
			b = binary.AppendUvarint(nil, v)
			b = append(b, rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "tail")...)
		} else {
			b = rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "bytes")
		}
		for l := 0; l <= len(b); l++ {
			wu, wk := binary.Uvarint(b[:l])
			gu, gk := uvarint(b[:l])
			if wu != gu || wk != gk {
				rt.Fatalf("uvarint(%x) = %d, %d; encoding/binary: %d, %d", b[:l], gu, gk, wu, wk)
			}
			ws, wk := binary.Varint(b[:l])
			gs, gk := varint(b[:l])
			if ws != gs || wk != gk {
				rt.Fatalf("varint(%x) = %d, %d; encoding/binary: %d, %d", b[:l], gs, gk, ws, wk)
			}
		}
	})
}
