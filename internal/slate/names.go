package slate

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Object names. These prefixes and formats are part of the storage format
// (docs/storage-format.md) and must not change.
const (
	manifestPrefix = "manifest/"
	walPrefix      = "wal/"
	sstPrefix      = "compacted/"
	manifestSuffix = ".manifest"
	walSuffix      = ".wal"
	sstSuffix      = ".sst"
)

// manifestName returns the object name of manifest id, e.g.
// "manifest/00000000000000000001.manifest".
func manifestName(id uint64) string {
	return fmt.Sprintf("%s%020d%s", manifestPrefix, id, manifestSuffix)
}

// walName returns the object name of WAL id.
func walName(id uint64) string { return fmt.Sprintf("%s%020d%s", walPrefix, id, walSuffix) }

// sstName returns the object name of the sorted table with the given ULID.
func sstName(id string) string { return sstPrefix + id + sstSuffix }

// parseID parses a "<prefix><20 digits><suffix>" name; ok is false for
// anything else (foreign objects under our prefixes are ignored, not fatal).
func parseID(name, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := name[len(prefix) : len(name)-len(suffix)]
	if len(digits) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}

// parseSSTName returns the ULID of a sorted-table object name.
func parseSSTName(name string) (string, bool) {
	if !strings.HasPrefix(name, sstPrefix) || !strings.HasSuffix(name, sstSuffix) {
		return "", false
	}
	id := name[len(sstPrefix) : len(name)-len(sstSuffix)]
	if len(id) != 26 {
		return "", false
	}
	return id, true
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var ulidMu struct {
	sync.Mutex
	lastMs   uint64
	lastRand [10]byte
}

// newULID returns a 26-character ULID (48-bit millisecond time, 80 random
// bits, Crockford base32). Within one process ULIDs are strictly increasing:
// in the same millisecond the random part is incremented, so names minted in
// flush order sort in flush order.
func newULID(now time.Time) string {
	ms := uint64(now.UnixMilli())
	ulidMu.Lock()
	var r [10]byte
	if ms <= ulidMu.lastMs {
		ms = ulidMu.lastMs
		r = ulidMu.lastRand
		for i := 9; i >= 0; i-- {
			r[i]++
			if r[i] != 0 {
				break
			}
		}
	} else {
		_, _ = rand.Read(r[:])
	}
	ulidMu.lastMs, ulidMu.lastRand = ms, r
	ulidMu.Unlock()

	var b [16]byte
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	copy(b[6:], r[:])
	// 128 bits -> 26 base32 chars (the first char carries 3 bits).
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
