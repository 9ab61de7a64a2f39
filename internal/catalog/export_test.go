package catalog

// FollowIndexFindsAll reports whether a follower index built over hashes
// (ctid i for hashes[i]) offers every entry under its hash.
func FollowIndexFindsAll(hashes []uint64) bool {
	base := make([]hashedCTID, len(hashes))
	for i, h := range hashes {
		base[i] = hashedCTID{h, CTID(i)}
	}
	idx := newRowIndex(nil, base)
	for i, h := range hashes {
		found := false
		idx.candidates(h, func(c CTID) bool {
			found = found || c == CTID(i)
			return !found
		})
		if !found {
			return false
		}
	}
	return true
}
