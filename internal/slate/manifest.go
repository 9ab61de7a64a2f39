package slate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/objstore"
)

// Manifest format (docs/storage-format.md, "Manifest"). Must not change
// without bumping manifestVersion.
const (
	manifestMagic   = "SLMF"
	manifestVersion = 1
)

// manifest is the whole durable state of the tree. A manifest value is
// immutable once published; updates clone it.
//
// INVARIANT: every WAL id <= replayAfterWAL is fully contained in l0/runs,
// and every entry in l0/runs has seq <= lastL0Seq.
// INVARIANT: l0 tables are newest first and every L0 table is newer (higher
// seqs for any key) than every sorted run; runs are newest first.
// INVARIANT: within a sorted run tables are ordered by key, do not overlap,
// and all versions of one key live in one table.
type manifest struct {
	id             uint64
	writerEpoch    uint64
	replayAfterWAL uint64
	walIDLastSeen  uint64
	lastL0Seq      uint64
	nextRunID      uint64
	l0             []*sstInfo
	runs           []*sortedRun
}

type sortedRun struct {
	id     uint64
	tables []*sstInfo
}

func (r *sortedRun) size() uint64 {
	var n uint64
	for _, t := range r.tables {
		n += t.size
	}
	return n
}

func (m *manifest) clone() *manifest {
	c := *m
	c.l0 = append([]*sstInfo(nil), m.l0...)
	c.runs = append([]*sortedRun(nil), m.runs...)
	return &c
}

func appendTable(buf []byte, t *sstInfo) []byte {
	buf = appendLenBytes(buf, []byte(t.id))
	buf = binary.LittleEndian.AppendUint64(buf, t.size)
	return appendInfo(buf, t)
}

func encodeManifest(m *manifest) []byte {
	buf := append([]byte(nil), manifestMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, manifestVersion)
	for _, v := range []uint64{m.id, m.writerEpoch, m.replayAfterWAL, m.walIDLastSeen, m.lastL0Seq, m.nextRunID} {
		buf = binary.LittleEndian.AppendUint64(buf, v)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.l0)))
	for _, t := range m.l0 {
		buf = appendTable(buf, t)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.runs)))
	for _, r := range m.runs {
		buf = binary.LittleEndian.AppendUint64(buf, r.id)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.tables)))
		for _, t := range r.tables {
			buf = appendTable(buf, t)
		}
	}
	return appendCRC(buf)
}

func readTable(r *reader, name string) (*sstInfo, error) {
	t := &sstInfo{}
	t.id = string(r.lenBytes(64))
	t.size = r.u64()
	readInfo(r, t)
	if r.err != nil {
		return nil, corruptf(name, "%v", r.err)
	}
	if len(t.id) != 26 || !validInfo(t) {
		return nil, corruptf(name, "invalid table entry %q", t.id)
	}
	return t, nil
}

func decodeManifest(name string, id uint64, data []byte) (*manifest, error) {
	payload, ok := checkCRC(data)
	if !ok {
		return nil, corruptf(name, "checksum mismatch")
	}
	r := &reader{b: payload}
	if string(r.bytes(4)) != manifestMagic {
		return nil, corruptf(name, "bad magic")
	}
	if v := r.u16(); v != manifestVersion {
		return nil, corruptf(name, "unsupported manifest version %d", v)
	}
	m := &manifest{id: r.u64(), writerEpoch: r.u64(), replayAfterWAL: r.u64(), walIDLastSeen: r.u64(), lastL0Seq: r.u64(), nextRunID: r.u64()}
	if r.err == nil && m.id != id {
		return nil, corruptf(name, "object holds manifest id %d", m.id)
	}
	n := r.u32()
	if uint64(n) > uint64(len(r.b)) {
		return nil, corruptf(name, "bad L0 count %d", n)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		t, err := readTable(r, name)
		if err != nil {
			return nil, err
		}
		m.l0 = append(m.l0, t)
	}
	nr := r.u32()
	if uint64(nr) > uint64(len(r.b)) {
		return nil, corruptf(name, "bad run count %d", nr)
	}
	for i := uint32(0); i < nr && r.err == nil; i++ {
		run := &sortedRun{id: r.u64()}
		nt := r.u32()
		if uint64(nt) > uint64(len(r.b)) || (r.err == nil && nt == 0) {
			return nil, corruptf(name, "bad table count %d", nt)
		}
		for j := uint32(0); j < nt && r.err == nil; j++ {
			t, err := readTable(r, name)
			if err != nil {
				return nil, err
			}
			if j > 0 && bytes.Compare(run.tables[j-1].lastKey, t.firstKey) >= 0 {
				return nil, corruptf(name, "run %d: overlapping tables", run.id)
			}
			run.tables = append(run.tables, t)
		}
		m.runs = append(m.runs, run)
	}
	if r.err != nil {
		return nil, corruptf(name, "%v", r.err)
	}
	if len(r.b) != 0 {
		return nil, corruptf(name, "%d trailing bytes", len(r.b))
	}
	return m, nil
}

// errManifestConflict means the next manifest id already exists.
var errManifestConflict = errors.New("manifest id already taken")

// getManifest reads and verifies manifest id. A missing object wraps
// objstore.ErrNotFound.
func getManifest(ctx context.Context, store objstore.Store, id uint64) (*manifest, []byte, error) {
	name := manifestName(id)
	var data []byte
	err := retryRead(ctx, func() (err error) { data, err = store.Get(ctx, name); return err })
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	m, err := decodeManifest(name, id, data)
	return m, data, err
}

// loadLatestManifest finds the newest manifest: LIST for the highest id, GET
// it, then probe higher ids (LIST alone may be stale). It returns nil, nil
// when the store holds no manifest. A listed manifest that vanished before
// the GET (garbage-collected in between) triggers a re-list.
func loadLatestManifest(ctx context.Context, store objstore.Store) (*manifest, error) {
	for attempt := 0; ; attempt++ {
		var infos []objstore.ObjectInfo
		err := retryRead(ctx, func() (err error) { infos, err = store.List(ctx, manifestPrefix); return err })
		if err != nil {
			return nil, fmt.Errorf("list manifests: %w", err)
		}
		var maxID uint64
		for _, in := range infos {
			if id, ok := parseID(in.Key, manifestPrefix, manifestSuffix); ok && id > maxID {
				maxID = id
			}
		}
		if maxID == 0 {
			return nil, nil
		}
		m, _, err := getManifest(ctx, store, maxID)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return probeNewerManifest(ctx, store, m)
	}
}

// probeNewerManifest follows contiguous manifest ids above m and returns the
// newest. Ids are contiguous, so the first missing id ends the chain.
func probeNewerManifest(ctx context.Context, store objstore.Store, m *manifest) (*manifest, error) {
	for i := 0; ; i++ {
		if i == 8 {
			// Far behind: a LIST is cheaper than probing one id at a time.
			return loadLatestManifest(ctx, store)
		}
		next, _, err := getManifest(ctx, store, m.id+1)
		if errors.Is(err, objstore.ErrNotFound) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		m = next
	}
}

// putManifest creates manifest m.id with create-if-absent: the create IS
// the commit. On ErrExists it checks whether the existing object is byte for
// byte ours (an earlier attempt that succeeded but reported an error) and
// otherwise returns errManifestConflict.
//
// After a successful create it LISTs to make sure no higher id exists: if
// garbage collection deleted an old id that a stalled writer then re-created,
// that writer must not believe it advanced the manifest (SlateDB's manifest protocol).
func putManifest(ctx context.Context, store objstore.Store, m *manifest) error {
	name := manifestName(m.id)
	data := encodeManifest(m)
	err := store.PutIfAbsent(ctx, name, data)
	if errors.Is(err, objstore.ErrExists) {
		existing, gerr := store.Get(ctx, name)
		if gerr != nil || !bytes.Equal(existing, data) {
			return fmt.Errorf("create %s: %w", name, errManifestConflict)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	infos, err := store.List(ctx, manifestPrefix)
	if err != nil {
		return fmt.Errorf("verify %s: %w", name, err)
	}
	for _, in := range infos {
		if id, ok := parseID(in.Key, manifestPrefix, manifestSuffix); ok && id > m.id {
			return fmt.Errorf("create %s: newer manifest %d exists: %w", name, id, errManifestConflict)
		}
	}
	return nil
}
