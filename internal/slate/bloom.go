package slate

import "hash/fnv"

// bloom is a Bloom filter over whole keys: 10 bits per key and 7 probes by
// double hashing of a 64-bit FNV-1a hash (see docs/storage-format.md). The
// hash function is part of the format and must not change.
const (
	bloomBitsPerKey = 10
	bloomProbes     = 7
)

func bloomHash(key []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(key)
	return h.Sum64()
}

// buildBloom returns the filter bytes for the given key hashes:
// probes (1 byte) followed by the bit array.
func buildBloom(hashes []uint64) []byte {
	nbits := len(hashes) * bloomBitsPerKey
	if nbits < 64 {
		nbits = 64
	}
	nbytes := (nbits + 7) / 8
	nbits = nbytes * 8
	out := make([]byte, 1+nbytes)
	out[0] = bloomProbes
	bits := out[1:]
	for _, h := range hashes {
		h1, h2 := uint32(h), uint32(h>>32)
		for i := uint32(0); i < bloomProbes; i++ {
			p := (h1 + i*h2) % uint32(nbits)
			bits[p/8] |= 1 << (p % 8)
		}
	}
	return out
}

// bloomMayContain reports whether key may be in the filter. A malformed
// filter answers "maybe", which is always safe.
func bloomMayContain(filter []byte, key []byte) bool {
	if len(filter) < 2 {
		return true
	}
	k, bits := uint32(filter[0]), filter[1:]
	nbits := uint32(len(bits) * 8)
	h := bloomHash(key)
	h1, h2 := uint32(h), uint32(h>>32)
	for i := uint32(0); i < k; i++ {
		p := (h1 + i*h2) % nbits
		if bits[p/8]&(1<<(p%8)) == 0 {
			return false
		}
	}
	return true
}
