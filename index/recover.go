package index

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Recover brings the index back to cp, the last checkpoint the caller
// persisted, after an unclean stop. It:
//
//   - deletes every file newer than cp.File;
//   - checks that the files older than cp.File are complete and full;
//   - checks entries 1..cp.Count-1 of cp.File (keyHash, timeDiff, physical
//     offset order, and that each prevIndex is the previous entry of its
//     slot), and returns a *CorruptError at the first bad one;
//   - cuts cp.File back to cp.Count entries, zeroing the rest, and rewrites
//     its slot heads, hashSlotCount and header from the surviving entries;
//   - fsyncs the file and the directory.
//
// Putting the entries that followed the checkpoint again then reproduces the
// bytes an uninterrupted run would have written. The end timestamp is known
// to the millisecond only when the file's header on disk is the one cp's Sync
// wrote; otherwise it is rebuilt from the entries to the second, until the
// next Put into the file sets it again.
//
// The zero Checkpoint means nothing was synced: Recover removes every file.
// Recover is idempotent, so a crash during Recover is repaired by calling it
// again with the same checkpoint.
func (x *Index) Recover(cp Checkpoint) error {
	if x.mu.closed {
		return ErrClosed
	}
	if x.werr != nil {
		return x.werr
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if cp == (Checkpoint{}) {
		if err := x.removeLocked(x.mu.files); err != nil {
			return err
		}
		x.mu.files = nil
		return x.finishRecoverLocked()
	}
	k, hdr, heads, err := x.planRecoverLocked(cp)
	if err != nil {
		return err
	}
	keep := x.mu.files[k]
	if err := x.removeLocked(x.mu.files[k+1:]); err != nil {
		return err
	}
	x.mu.files = slices.Delete(x.mu.files, k+1, len(x.mu.files))
	if err := x.rewriteLocked(keep, hdr, heads); err != nil {
		return err
	}
	x.log.Info("index: recovered", "file", keep.path, "indexCount", hdr.indexCount)
	return x.finishRecoverLocked()
}

// planRecoverLocked checks cp against the files and returns the position of
// cp.File and its rebuilt header and slot heads. It changes nothing.
func (x *Index) planRecoverLocked(cp Checkpoint) (int, header, []int32, error) {
	files := x.mu.files
	path := vfs.Join(x.dir, cp.File)
	k := slices.IndexFunc(files, func(f *file) bool { return f.name == cp.File })
	if k < 0 {
		return 0, header{}, nil, corruptf(path, 0, "checkpoint file is missing")
	}
	if cp.Count < firstOrdinal || cp.Count > x.geo.maxEntries {
		return 0, header{}, nil, corruptf(path, offIndexCount, "checkpoint count %d outside [1, %d]", cp.Count, x.geo.maxEntries)
	}
	minPhy := int64(0)
	for _, f := range files[:k] {
		if f.incomplete != nil {
			return 0, header{}, nil, corruptf(f.path, f.incomplete.Offset, "file before the checkpoint: %s", f.incomplete.Reason)
		}
		if f.hdr.indexCount != x.geo.maxEntries {
			return 0, header{}, nil, corruptf(f.path, offIndexCount, "file before the checkpoint has indexCount %d, want a full %d",
				f.hdr.indexCount, x.geo.maxEntries)
		}
		minPhy = f.hdr.endPhyOffset
	}
	keep := files[k]
	if keep.incomplete != nil {
		return 0, header{}, nil, corruptf(keep.path, keep.incomplete.Offset, "checkpoint file: %s", keep.incomplete.Reason)
	}
	hb, err := readHeaderBytes(keep.f, headerSize)
	if err != nil {
		return 0, header{}, nil, fmt.Errorf("index: read header of %q: %w", keep.path, err)
	}
	disk := decodeHeader(hb)
	if disk.indexCount < cp.Count {
		return 0, header{}, nil, corruptf(keep.path, offIndexCount,
			"header indexCount %d below checkpoint count %d: synced data was lost", disk.indexCount, cp.Count)
	}
	hdr, heads, err := x.replay(keep, disk, cp.Count, minPhy)
	return k, hdr, heads, err
}

// replay checks entries 1..count-1 of f and rebuilds the header and slot
// heads they imply. disk is the header on disk, which was synced with at
// least count entries; minPhy is the previous file's end offset.
func (x *Index) replay(f *file, disk header, count int32, minPhy int64) (header, []int32, error) {
	heads := make([]int32, x.geo.slotCount)
	hdr := header{indexCount: count}
	if count == firstOrdinal {
		return hdr, heads, nil
	}
	hdr.beginTimestamp, hdr.beginPhyOffset = disk.beginTimestamp, disk.beginPhyOffset
	hdr.endTimestamp = disk.beginTimestamp
	lastPhy := minPhy
	for i := int32(firstOrdinal); i < count; i++ {
		off := x.geo.entryOffset(i)
		e := decodeEntry(f.b[off:])
		switch {
		case e.keyHash < 0:
			return hdr, nil, corruptf(f.path, off+offEntryKeyHash, "entry %d: negative keyHash %d", i, e.keyHash)
		case e.timeDiff < 0 || (i == firstOrdinal && e.timeDiff != 0):
			return hdr, nil, corruptf(f.path, off+offEntryTimeDiff, "entry %d: timeDiff %d", i, e.timeDiff)
		case i == firstOrdinal && e.phyOffset != disk.beginPhyOffset:
			return hdr, nil, corruptf(f.path, off+offEntryPhyOffset, "entry 1: physical offset %d, header beginPhyOffset %d",
				e.phyOffset, disk.beginPhyOffset)
		case e.phyOffset < lastPhy:
			return hdr, nil, corruptf(f.path, off+offEntryPhyOffset, "entry %d: physical offset %d below previous %d", i, e.phyOffset, lastPhy)
		}
		s := e.keyHash % x.geo.slotCount
		if e.prevIndex != heads[s] {
			return hdr, nil, corruptf(f.path, off+offEntryPrevIndex, "entry %d: prevIndex %d, want %d (previous entry of slot %d)",
				i, e.prevIndex, heads[s], s)
		}
		if heads[s] == 0 {
			hdr.hashSlotCount++
		}
		heads[s] = i
		lastPhy = e.phyOffset
		hdr.endTimestamp = max(hdr.endTimestamp, entryTime(disk.beginTimestamp, e.timeDiff))
	}
	hdr.endPhyOffset = lastPhy
	if disk.indexCount != count {
		x.log.Info("index: end timestamp rebuilt from entries, to the second", "file", f.path, "endTimestamp", hdr.endTimestamp)
		return hdr, heads, nil
	}
	// The header on disk is the one written with the checkpoint: it must
	// agree with the entries, and it has the exact end timestamp.
	if disk.endPhyOffset != hdr.endPhyOffset || disk.hashSlotCount != hdr.hashSlotCount || disk.endTimestamp < hdr.endTimestamp {
		return hdr, nil, corruptf(f.path, offEndPhyOffset,
			"header (endPhyOffset %d, hashSlotCount %d, endTimestamp %d) disagrees with entries (%d, %d, >= %d)",
			disk.endPhyOffset, disk.hashSlotCount, disk.endTimestamp, hdr.endPhyOffset, hdr.hashSlotCount, hdr.endTimestamp)
	}
	hdr.endTimestamp = disk.endTimestamp
	return hdr, heads, nil
}

// rewriteLocked cuts f back to hdr.indexCount entries, zeroing the rest,
// writes heads over its slots and hdr over its header, and fsyncs it.
func (x *Index) rewriteLocked(f *file, hdr header, heads []int32) error {
	if err := f.unmap(); err != nil {
		return x.fail(err)
	}
	// Shrinking and regrowing zeroes every entry from hdr.indexCount on.
	if err := f.f.Truncate(x.geo.entryOffset(hdr.indexCount)); err != nil {
		return x.fail(fmt.Errorf("index: truncate %q: %w", f.path, err))
	}
	if err := f.f.Truncate(x.geo.fileSize()); err != nil {
		return x.fail(fmt.Errorf("index: preallocate %q: %w", f.path, err))
	}
	if err := x.mapFile(f); err != nil {
		return x.fail(err)
	}
	// The table may hold buffered heads the file does not have: each
	// points at an entry past cp (buffered after its Sync), never equal
	// to a head rebuilt from the entries before cp, so writeSlots, which
	// compares heads with the table, writes every such slot back.
	if err := x.writeSlots(f, heads); err != nil {
		return x.fail(err)
	}
	if _, err := f.f.WriteAt(hdr.encode(), 0); err != nil {
		return x.fail(fmt.Errorf("index: write header of %q: %w", f.path, err))
	}
	f.hdr, f.debris = hdr, nil
	f.resetPending() // entries past the checkpoint are dropped, buffered or not
	if err := f.f.Sync(); err != nil {
		return x.fail(fmt.Errorf("index: sync %q: %w", f.path, err))
	}
	return nil
}

// writeSlots writes each run of slots that differs from heads. The caller
// holds x.mu.
func (x *Index) writeSlots(f *file, heads []int32) error {
	if f.slots == nil && f.hdr.indexCount < x.geo.maxEntries {
		// Not full: it may be written again, so it keeps its table in
		// memory (file.slots); load it.
		if err := x.scanSlots(f); err != nil {
			return err
		}
	}
	slot := func(s int) int32 { return f.slotHead(x.geo, int32(s)) }
	for s := 0; s < len(heads); {
		if slot(s) == heads[s] {
			s++
			continue
		}
		e := s
		for e < len(heads) && slot(e) != heads[e] {
			e++
		}
		buf := make([]byte, (e-s)*slotSize)
		for i := s; i < e; i++ {
			binary.BigEndian.PutUint32(buf[(i-s)*slotSize:], uint32(heads[i]))
		}
		if _, err := f.f.WriteAt(buf, x.geo.slotOffset(int32(s))); err != nil {
			return fmt.Errorf("index: write slots of %q: %w", f.path, err)
		}
		if f.slots != nil { // the caller holds x.mu
			copy(f.slots[x.geo.slotOffset(int32(s))-headerSize:], buf)
		}
		s = e
	}
	return nil
}

// removeLocked closes and deletes files.
func (x *Index) removeLocked(files []*file) error {
	for _, f := range files {
		if err := f.close(); err != nil {
			return x.fail(err)
		}
		x.unsynced = slices.DeleteFunc(x.unsynced, func(u *file) bool { return u == f })
		if err := x.fs.Remove(f.path); err != nil {
			return x.fail(fmt.Errorf("index: remove %q: %w", f.path, err))
		}
		x.dirDirty = true
		x.log.Info("index: removed file newer than the checkpoint", "path", f.path)
	}
	return nil
}

// finishRecoverLocked makes the recovered state durable and lifts the
// crash-debris refusal.
func (x *Index) finishRecoverLocked() error {
	for _, f := range x.unsynced {
		if err := f.f.Sync(); err != nil {
			return x.fail(fmt.Errorf("index: sync %q: %w", f.path, err))
		}
	}
	x.unsynced = nil
	if err := x.fs.SyncDir(x.dir); err != nil {
		return x.fail(fmt.Errorf("index: sync dir %q: %w", x.dir, err))
	}
	x.dirDirty = false
	x.mu.broken = nil
	return nil
}

// DeleteBefore removes the oldest files whose endPhyOffset is below
// minPhyOffset (the CommitLog's minimum offset), never the active file, and
// returns how many it removed. The removals become durable with the next
// Sync; one lost to a crash leaves an old file that the next call removes.
// Recover needs the file its checkpoint names, so persist a checkpoint newer
// than the files being removed first.
func (x *Index) DeleteBefore(minPhyOffset int64) (int, error) {
	if err := x.checkWritable(); err != nil {
		return 0, err
	}
	n := 0
	for len(x.mu.files) > 1 {
		f := x.mu.files[0]
		if f.hdr.endPhyOffset >= minPhyOffset {
			break
		}
		x.mu.Lock()
		x.mu.files = slices.Delete(x.mu.files, 0, 1)
		err := f.close()
		x.mu.Unlock()
		x.unsynced = slices.DeleteFunc(x.unsynced, func(u *file) bool { return u == f })
		x.dirDirty = true
		if err != nil {
			return n, err
		}
		if err := x.fs.Remove(f.path); err != nil {
			return n, fmt.Errorf("index: remove %q: %w", f.path, err)
		}
		n++
		x.log.Info("index: removed file below the CommitLog's minimum offset", "path", f.path, "endPhyOffset", f.hdr.endPhyOffset)
	}
	return n, nil
}
