package slate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/objstore"
)

// Check verifies the persisted state of the DB in store without changing
// anything: the latest manifest; every table it references (size, footer,
// info block equal to the manifest's copy, index, filter, every data block,
// key and seq bounds, ordering, non-overlapping runs); and the WAL after the
// replay point (contiguous ids, every object verifies, seqs increase and lie
// above the tables'). It reports every problem found, joined, not only the
// first; nil means the store is sound.
func Check(ctx context.Context, store objstore.Store) error {
	man, err := loadLatestManifest(ctx, store)
	if err != nil {
		return err
	}
	if man == nil {
		return ErrNoDB
	}
	var problems []error
	report := func(err error) { problems = append(problems, err) }
	for _, t := range man.l0 {
		if err := checkTable(ctx, store, t, man.lastL0Seq); err != nil {
			report(err)
		}
	}
	for _, r := range man.runs {
		for i, t := range r.tables {
			if err := checkTable(ctx, store, t, man.lastL0Seq); err != nil {
				report(err)
			}
			if i > 0 && bytes.Compare(r.tables[i-1].lastKey, t.firstKey) >= 0 {
				report(corruptf(manifestName(man.id), "run %d: tables %d and %d overlap", r.id, i-1, i))
			}
		}
	}
	wal, err := listWAL(ctx, store)
	if err != nil {
		return errors.Join(append(problems, err)...)
	}
	end := wal.end(man.replayAfterWAL)
	// A gap a failed writer left (checkGaps) is legitimate; the objects
	// after it were never acknowledged and the next writer's fences make
	// them void, like a fenced writer's late ones (replay).
	if err := checkGaps(ctx, store, wal, man.replayAfterWAL, end); err != nil {
		report(err)
	}
	epoch, err := fenceEpochBelow(ctx, store, wal, man.replayAfterWAL+1)
	if err != nil {
		return errors.Join(append(problems, err)...)
	}
	prev := man.lastL0Seq
	for id := man.replayAfterWAL + 1; id <= end; id++ {
		if _, ok := wal[id]; !ok {
			continue
		}
		data, err := store.Get(ctx, walName(id))
		if err != nil {
			report(readErr(walName(id), err))
			continue
		}
		h, batches, err := decodeWAL(walName(id), id, data)
		if err != nil {
			report(err)
			continue
		}
		if h.void(&epoch) {
			continue
		}
		for _, b := range batches {
			if b.seq <= prev {
				report(corruptf(walName(id), "seq %d not above %d", b.seq, prev))
			}
			prev = b.seq
		}
	}
	return errors.Join(problems...)
}

// checkTable reads a whole table and verifies it against its manifest info.
func checkTable(ctx context.Context, store objstore.Store, info *sstInfo, maxSeq uint64) error {
	name := sstName(info.id)
	data, err := store.Get(ctx, name)
	if err != nil {
		return readErr(name, err)
	}
	if uint64(len(data)) != info.size {
		return corruptf(name, "size %d, manifest says %d", len(data), info.size)
	}
	foot := data[len(data)-sstFooterLen:]
	infoOff, infoLen := binary.LittleEndian.Uint64(foot), binary.LittleEndian.Uint32(foot[8:])
	if binary.LittleEndian.Uint16(foot[12:]) != sstVersion || string(foot[14:]) != sstMagic {
		return corruptf(name, "bad footer")
	}
	if infoOff > uint64(len(data)-sstFooterLen) || uint64(infoLen) != uint64(len(data)-sstFooterLen)-infoOff {
		return corruptf(name, "bad info handle")
	}
	payload, ok := checkCRC(data[infoOff : infoOff+uint64(infoLen)])
	if !ok {
		return corruptf(name, "info block checksum mismatch")
	}
	if !bytes.Equal(payload, appendInfo(nil, info)) {
		return corruptf(name, "info block differs from the manifest's copy")
	}
	idx, err := decodeIndex(name, data[info.indexOff:info.indexOff+uint64(info.indexLen)], info.indexOff)
	if err != nil {
		return err
	}
	if _, err := decodeFilter(name, data[info.filterOff:info.filterOff+uint64(info.filterLen)]); err != nil {
		return err
	}
	var n uint64
	var last entry
	for i, ie := range idx {
		b, err := decodeBlock(name, data[ie.off:ie.off+uint64(ie.length)])
		if err != nil {
			return err
		}
		for j, e := range b.entries {
			if (n > 0 || j > 0) && !entryLess(last, e) {
				return corruptf(name, "block %d: entries out of order", i)
			}
			if e.seq < info.minSeq || e.seq > info.maxSeq || e.seq > maxSeq {
				return corruptf(name, "block %d: seq %d outside [%d, %d] or above last_l0_seq %d", i, e.seq, info.minSeq, info.maxSeq, maxSeq)
			}
			last = e
		}
		if n == 0 && !bytes.Equal(b.entries[0].key, info.firstKey) {
			return corruptf(name, "first key differs from the manifest")
		}
		n += uint64(len(b.entries))
		if !bytes.Equal(last.key, ie.lastKey) {
			return corruptf(name, "block %d: last key differs from the index", i)
		}
	}
	if n != info.entries || !bytes.Equal(last.key, info.lastKey) {
		return corruptf(name, "%d entries (manifest %d) or last key differs", n, info.entries)
	}
	if last := idx[len(idx)-1]; last.off+uint64(last.length) != info.filterOff {
		return corruptf(name, "data blocks do not end at the filter block")
	}
	return nil
}

// String formats the DB's current shape for logs and operators.
func (d *DB) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	runs := 0
	for _, r := range d.man.runs {
		runs += len(r.tables)
	}
	return fmt.Sprintf("slate{manifest=%d epoch=%d seq=%d l0=%d runs=%d(%d tables) imm=%d replay_after_wal=%d}",
		d.man.id, d.man.writerEpoch, d.visibleSeq, len(d.man.l0), len(d.man.runs), runs, len(d.imm), d.man.replayAfterWAL)
}
