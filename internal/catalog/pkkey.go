package catalog

import (
	"encoding/binary"

	"github.com/moraine-db/moraine/internal/datum"
)

// encodePK encodes a primary key (one value per key column, never NULL) for
// the in-memory key index. Two keys are equal exactly when their values are,
// and for the kinds whose SQL order is numeric order (ints, dates, times,
// timestamps) the bytes sort as the values do, column by column, so the
// index's first and last entries hold the minimum and maximum of the first
// key column (Table.EdgeKey). Text and bytes sort bytewise (escaped, so a
// prefix sorts first); other kinds only need equality.
//
// The encoding lives only in memory: it is rebuilt from the rows at load.
func encodePK(dst []byte, types []datum.Type, vals []datum.Value) []byte {
	for i, v := range vals {
		dst = appendKeyValue(dst, types[i], v)
	}
	return dst
}

// keyOf encodes columns cols (of types types, in that order) of a full row
// of values as encodePK does: the key a row has in an index on them.
func keyOf(cols []int, types []datum.Type, vals []datum.Value) string {
	var buf [64]byte // most keys are one or two integers: no growth
	dst := buf[:0]
	for i, c := range cols {
		dst = appendKeyValue(dst, types[i], vals[c])
	}
	return string(dst)
}

// appendKeyValue appends the encoding of one key column's value.
func appendKeyValue(dst []byte, t datum.Type, v datum.Value) []byte {
	k := t.Kind()
	if k == datum.KindNull {
		k = v.K
	}
	switch k {
	case datum.KindText, datum.KindBytes, datum.KindNumeric, datum.KindArray, datum.KindUUID:
		// 0x00 escapes as 0x00 0xFF; the terminator 0x00 0x01 sorts
		// below any escaped or plain byte, so a prefix sorts first.
		for j := 0; j < len(v.S); j++ {
			if c := v.S[j]; c == 0 {
				dst = append(dst, 0, 0xFF)
			} else {
				dst = append(dst, c)
			}
		}
		return append(dst, 0, 1)
	case datum.KindFloat:
		// Flip the sign bit of positives and every bit of negatives:
		// the IEEE-754 order trick.
		u := uint64(v.I)
		if u>>63 == 1 {
			u = ^u
		} else {
			u |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, u)
	case datum.KindInterval, datum.KindTimeTZ:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63))
		return binary.BigEndian.AppendUint64(dst, uint64(v.J)^(1<<63))
	default: // bool, int, date, time, timestamps, tid
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63))
	}
}

// orderedKind reports whether encodePK sorts values of kind k as SQL does.
func orderedKind(k datum.Kind) bool {
	switch k {
	case datum.KindInt, datum.KindDate, datum.KindTime, datum.KindTimestamp, datum.KindTimestampTZ:
		return true
	}
	return false
}
