package consumequeue

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/internal/vfs"
)

// writableLocked returns why the queue refuses writes, or nil.
func (q *Queue) writableLocked() error {
	if q.mu.closed {
		return ErrClosed
	}
	if q.w.err != nil {
		return fmt.Errorf("refusing writes after an earlier failure: %w", q.w.err)
	}
	return nil
}

// fail records err as the queue's sticky write error and returns it.
func (q *Queue) fail(err error) error {
	if q.w.err == nil {
		q.w.err = err
	}
	q.needSync.Store(true) // so Set.SyncDirty reports it
	return err
}

// maxPending bounds the units one queue holds in memory: PutBuffered writes
// them (and makes them visible) once it holds this many (80 KiB), so a long
// replay without Flush neither grows memory without bound nor delays
// readers for long.
const maxPending = 4096

// spillUnits is how many units Flush lets a queue gather in memory before it
// writes them: it writes when the visible units reach a multiple of
// spillUnits from the start of a file (or the start of the next file), and
// writes up to there. 1,024 units are 20,480 bytes, the least common
// multiple of UnitSize and a 4 KiB page, so such a write covers five whole
// pages that no write touched before: it never waits for a page that the
// owner's last sync is still writing back, as a write into a page written
// earlier may. The units short of a boundary stay in memory until the next
// boundary or MarkDirty, Sync, WriteBuffered, DeleteBefore or Close.
const spillUnits = 1024

// keepPendingCap is the largest buffer capacity kept once every unit is
// written; a larger buffer (left by a burst) is released, as a Set may hold
// many queues.
const keepPendingCap = 32 << 10

// Put stores the unit for queueOffset, which must be MaxOffset (plus the
// units PutBuffered is holding, if any). Putting a unit identical to the one
// already stored (or buffered) at an offset in [MinOffset, MaxOffset) is a
// no-op, so the owner can replay committed entries after a
// crash; any other offset fails with ErrOffsetMismatch. A unit must have
// size > 0 and phyOffset >= 0, and must not overlap the previous unit in the
// commit log (ErrInvalidUnit). The unit is visible to readers when Put
// returns and durable after the next Sync (or MarkDirty and SyncFS). Put is
// PutBuffered followed by Flush.
func (q *Queue) Put(queueOffset, phyOffset int64, size int32, tagsCode int64) error {
	err := q.put(queueOffset, phyOffset, size, tagsCode)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) put(queueOffset, phyOffset int64, size int32, tagsCode int64) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.putLocked(queueOffset, phyOffset, size, tagsCode); err != nil {
		return err
	}
	if err := q.flushLocked(); err != nil {
		return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), queueOffset, err)
	}
	return nil
}

// PutBuffered is Put without making the unit visible: the unit joins the
// queue's memory buffer, and the offset it takes counts as taken for the
// next PutBuffered or Put (which continues at MaxOffset plus the buffered
// units, checks replays and overlaps against the buffered units too). Flush
// (also Put) makes the buffered units visible to readers (MaxOffset, Get,
// Read, SearchOffset), without necessarily writing them to the files; so do
// Sync, MarkDirty, WriteBuffered, DeleteBefore and Close, which also write
// them, and PutBuffered itself once maxPending units are waiting.
// TruncateTo, TruncatePhy and ResetTo drop the buffered units they cut off.
// The owner calls Flush before telling anyone that the units are stored.
func (q *Queue) PutBuffered(queueOffset, phyOffset int64, size int32, tagsCode int64) error {
	err := q.putBuffered(queueOffset, phyOffset, size, tagsCode)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) putBuffered(queueOffset, phyOffset int64, size int32, tagsCode int64) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.putLocked(queueOffset, phyOffset, size, tagsCode); err != nil {
		return err
	}
	if len(q.w.pend) >= maxPending*UnitSize {
		if err := q.spillLocked(q.endLocked()); err != nil {
			return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), queueOffset, err)
		}
	}
	return nil
}

// Flush makes the buffered units (see PutBuffered) visible to readers. It
// writes them to the files only once enough have gathered (spillUnits);
// either way they are durable after the next Sync, or MarkDirty and SyncFS.
// After a failed write or sync it returns that error.
func (q *Queue) Flush() error {
	err := q.flush()
	q.cache.maybeEvict()
	return err
}

func (q *Queue) flush() error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: flush %s: %w", q.name(), err)
	}
	if err := q.flushLocked(); err != nil {
		return fmt.Errorf("consumequeue: flush %s: %w", q.name(), err)
	}
	return nil
}

// WriteBuffered writes the units that Flush made visible and that are
// still only in memory to the files (the page cache), without syncing
// them; units put since the last Flush stay buffered and invisible. An
// owner may call it beside the writer (it takes the writer's mutex), e.g.
// to leave a later MarkDirty less to write. After a failed write or sync it
// returns that error.
func (q *Queue) WriteBuffered() error {
	err := q.writeBuffered()
	q.cache.maybeEvict()
	return err
}

func (q *Queue) writeBuffered() error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: write %s: %w", q.name(), err)
	}
	if err := q.spillLocked(q.mu.max); err != nil {
		return fmt.Errorf("consumequeue: write %s: %w", q.name(), err)
	}
	return nil
}

// putLocked checks a unit for queueOffset and buffers it, or accepts an
// identical replay. Errors are complete ("consumequeue: put ...").
func (q *Queue) putLocked(queueOffset, phyOffset int64, size int32, tagsCode int64) error {
	u := rawUnit{phy: phyOffset, size: size, tags: tagsCode}
	if !u.valid() {
		return fmt.Errorf("consumequeue: put %s offset %d: unit %v: %w", q.name(), queueOffset, u, ErrInvalidUnit)
	}
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), queueOffset, err)
	}
	end := q.endLocked()
	if queueOffset != end {
		return q.replayLocked(queueOffset, u)
	}
	prev, ok := q.w.tail, q.w.tailOK
	if !ok {
		var err error
		if prev, ok, err = q.writerUnitLocked(queueOffset - 1); err != nil {
			return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), queueOffset, err)
		}
	}
	if ok && prev.valid() && u.phy < prev.end() {
		return fmt.Errorf("consumequeue: put %s offset %d: unit %v overlaps previous unit %v: %w",
			q.name(), queueOffset, u, prev, ErrInvalidUnit)
	}
	// Appending writes only beyond mu.mem, which readers may be reading
	// (or, if it reallocates, into a new array).
	n := len(q.w.pend)
	q.w.pend = append(q.w.pend, make([]byte, UnitSize)...)
	encodeUnit(q.w.pend[n:], u)
	q.w.tail, q.w.tailOK = u, true
	if !q.needSync.Load() {
		q.needSync.Store(true) // so Set.MarkDirty and SyncDirty write it
	}
	return nil
}

// endLocked is the writer's end of the queue: the units in the files plus
// the buffered ones. Callers hold q.w.
func (q *Queue) endLocked() int64 { return q.mu.disk + int64(len(q.w.pend)/UnitSize) }

// writerUnitLocked returns the unit at off as the writer sees it: written,
// or buffered. ok is false outside [first file, endLocked). Callers hold q.w.
func (q *Queue) writerUnitLocked(off int64) (u rawUnit, ok bool, err error) {
	if off >= q.mu.disk {
		i := (off - q.mu.disk) * UnitSize
		if i >= int64(len(q.w.pend)) {
			return rawUnit{}, false, nil
		}
		u, ok = decodeUnit(q.w.pend[i:])
		return u, ok, nil
	}
	u, _, ok, err = q.rawLocked(off)
	return u, ok, err
}

// replayLocked handles a Put at an offset other than the writer's end.
func (q *Queue) replayLocked(off int64, u rawUnit) error {
	end := q.endLocked()
	if off >= q.mu.min && off < end {
		have, _, err := q.writerUnitLocked(off)
		if err != nil {
			return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), off, err)
		}
		if have == u {
			return nil
		}
		return fmt.Errorf("consumequeue: put %s offset %d: unit %v differs from stored unit %v: %w",
			q.name(), off, u, have, ErrOffsetMismatch)
	}
	return fmt.Errorf("consumequeue: put %s offset %d: queue holds [%d, %d): %w",
		q.name(), off, q.mu.min, end, ErrOffsetMismatch)
}

// flushLocked makes every buffered unit visible and writes them up to the
// last spill boundary (see spillUnits), if that is past the end of the
// files.
func (q *Queue) flushLocked() error {
	q.publishLocked()
	if p := q.spillPoint(q.mu.max); p > q.mu.disk {
		return q.spillLocked(p)
	}
	return nil
}

// publishLocked makes every buffered unit visible to readers.
func (q *Queue) publishLocked() {
	end := q.endLocked()
	if end == q.mu.max {
		return
	}
	n := (end - q.mu.disk) * UnitSize
	q.mu.Lock()
	q.mu.max = end
	q.mu.mem = q.w.pend[:n:n]
	q.mu.Unlock()
}

// spillPoint returns the last spill boundary at or before off: the start of
// off's file plus a multiple of spillUnits.
func (q *Queue) spillPoint(off int64) int64 {
	in := off % q.perFile
	return off - in%spillUnits
}

// spillLocked writes the buffered units at [disk, upTo) to the files, one
// WriteAt per file they fall in, and makes them visible if they were not
// (upTo <= endLocked). It moves disk past each file's share only after that
// share's write succeeded. On failure the error is made sticky and the
// units that were not visible are dropped; the visible ones stay readable
// from memory. The queue refuses writes from then on, and its owner
// rebuilds the units from the commit log after a restart.
func (q *Queue) spillLocked(upTo int64) (err error) {
	defer func() {
		if cerr := q.closeFresh(); cerr != nil && err == nil {
			err = q.fail(cerr)
		}
	}()
	start := q.mu.disk
	if upTo <= start {
		return nil
	}
	pend := q.w.pend
	for q.mu.disk < upTo {
		off := q.mu.disk
		s, h, err := q.segmentForWriteLocked(off)
		if err != nil {
			return q.spillFailed(start, err)
		}
		n := min(upTo, s.base+q.perFile) - off // units
		if end := off - s.base + n; end > s.units {
			if err := q.growLocked(s, h, end); err != nil {
				return q.spillFailed(start, err)
			}
		}
		i := (off - start) * UnitSize
		if err := q.writeUnits(s, h, pend[i:i+n*UnitSize], (off-s.base)*UnitSize); err != nil {
			return q.spillFailed(start, err)
		}
		s.dirty = true
		q.needSync.Store(true)
		q.writes.Add(1)
		q.mu.Lock()
		q.mu.disk += n
		q.mu.max = max(q.mu.max, q.mu.disk)
		q.mu.mem = pend[(q.mu.disk-start)*UnitSize : (q.mu.max-start)*UnitSize]
		if len(q.mu.mem) == 0 {
			q.mu.mem = nil
		}
		q.mu.Unlock()
	}
	rest := pend[(upTo-start)*UnitSize:]
	if len(rest) == 0 {
		// No reader can reach pend's array any more: reuse it.
		q.w.spare = nil
		if cap(pend) > keepPendingCap {
			q.w.pend = nil
		} else {
			q.w.pend = pend[:0]
		}
		return nil
	}
	// Readers may be reading rest through mu.mem: move it to the other
	// buffer, and reuse this one only once mu.mem no longer points into it.
	next := q.w.spare
	if cap(next) < len(rest) {
		next = make([]byte, 0, max(cap(pend), 2*len(rest)))
	}
	next = append(next[:0], rest...)
	n := (q.mu.max - q.mu.disk) * UnitSize
	q.mu.Lock()
	q.mu.mem = next[:n:n]
	q.mu.Unlock()
	q.w.pend, q.w.spare = next, pend[:0]
	return nil
}

// writeUnits writes b at byte at of s's file: through h, or, with h nil
// (OwnerSyncsFS, the file not open), through a descriptor opened for this
// write alone. With OwnerSyncsFS the writer never opens a file into the
// cache: it creates, grows, writes and syncs a file that no reader has open
// through such descriptors, so a queue that is only written (its readers
// served from memory) keeps no descriptor, mapping or handle between its
// spills. That costs an open and a close per spill (one per 1,024 units),
// not the mapping, the unmapping and the eviction of another queue's file
// that opening it in the cache would, and the owner's SyncFS covers the
// write as any other. Readers that map the file meanwhile see the write
// through the page cache; they read it only once disk has moved past it.
func (q *Queue) writeUnits(s *segment, h *handle, b []byte, at int64) error {
	path := q.path(s)
	var f vfs.File
	switch {
	case h != nil:
		f = h.f
	case q.w.freshSeg == s:
		f = q.w.fresh
	}
	if f != nil {
		if _, err := f.WriteAt(b, at); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	return q.withFile(path, "write", func(f vfs.File) error {
		_, err := f.WriteAt(b, at)
		return err
	})
}

// closeFresh closes the descriptor of a file spillLocked created, if any.
// The caller holds q.w.
func (q *Queue) closeFresh() error {
	f, s := q.w.fresh, q.w.freshSeg
	if f == nil {
		return nil
	}
	q.w.fresh, q.w.freshSeg = nil, nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", q.path(s), err)
	}
	return nil
}

// withFile runs op on the file at path through a descriptor opened for it
// alone, outside the file cache, and closes it. Errors name op and path.
func (q *Queue) withFile(path, op string, fn func(vfs.File) error) error {
	f, err := q.fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if err := fn(f); err != nil {
		_ = f.Close() // op's error is the one to report
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// spillFailed makes err sticky after spillLocked wrote the units from
// start up to disk: the units still in memory and visible stay there, the
// others are dropped.
func (q *Queue) spillFailed(start int64, err error) error {
	q.w.pend = q.w.pend[(q.mu.disk-start)*UnitSize : (q.mu.max-start)*UnitSize]
	q.w.spare = nil
	q.w.tailOK = false
	return q.fail(err)
}

// segmentForWriteLocked returns the file that holds offset off, which is
// disk, and its open handle, creating the file if needed: without
// OwnerSyncsFS, after syncing the previous one; with it, after syncing the
// directory if the first file's entry may not be durable yet.
func (q *Queue) segmentForWriteLocked(off int64) (*segment, *handle, error) {
	segs := q.mu.segs
	n := len(segs)
	if n > 0 && off < segs[n-1].base+q.perFile {
		s := segs[n-1]
		if q.ownerSyncs && s.h.Load() == nil {
			// Not open (the writer opens no file into the cache, see
			// writeUnits): spillLocked writes and grows it through
			// short-lived descriptors.
			return s, nil, nil
		}
		h, err := q.file(s)
		return s, h, err
	}
	switch {
	case n > 0 && !q.ownerSyncs && segs[n-1].dirty:
		// Every file but the last is complete and durable.
		prev := segs[n-1]
		h, err := q.file(prev)
		if err != nil {
			return nil, nil, err
		}
		if err := h.f.Sync(); err != nil {
			return nil, nil, fmt.Errorf("sync %s: %w", q.path(prev), err)
		}
		prev.dirty = false
	case n > 0 && q.ownerSyncs && !q.w.firstSynced:
		// A crash must not keep this file and lose the first one.
		if err := q.fs.SyncDir(q.dir()); err != nil {
			return nil, nil, fmt.Errorf("sync dir %s: %w", q.dir(), err)
		}
		q.w.firstSynced = true
	}
	s, h, err := q.createSegment(off-off%q.perFile, 0, !q.ownerSyncs)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 && q.ownerSyncs {
		q.w.firstSynced = false
		q.w.firstGen++
	}
	q.mu.Lock()
	q.mu.segs = append(q.mu.segs, s)
	q.mu.Unlock()
	return s, h, nil
}

// growLocked makes s's file (open as h, or not open: h nil, OwnerSyncsFS
// only) hold at least need units: it extends the file (with zeros) to
// growTarget units and maps it again if it is open. The growth is durable
// with the next Sync of the file, like the units written into it.
func (q *Queue) growLocked(s *segment, h *handle, need int64) error {
	units := growTarget(s.units, need, q.perFile)
	path := q.path(s)
	if h == nil {
		var err error
		if q.w.freshSeg == s {
			if err = q.w.fresh.Truncate(units * UnitSize); err != nil {
				err = fmt.Errorf("extend %s: %w", path, err)
			}
		} else {
			err = q.withFile(path, "extend", func(f vfs.File) error { return f.Truncate(units * UnitSize) })
		}
		if err != nil {
			return err
		}
		s.dirty = true
		q.writes.Add(1)
		// A reader may have opened the file since the caller looked,
		// mapping its old size; from the swap below on, it maps the new.
		q.mu.Lock()
		if h = s.h.Load(); h == nil {
			s.units = units
		}
		q.mu.Unlock()
		if h == nil {
			return nil
		}
	} else {
		if err := h.f.Truncate(units * UnitSize); err != nil {
			return fmt.Errorf("extend %s: %w", path, err)
		}
		s.dirty = true
		q.writes.Add(1)
	}
	m, err := h.f.Map(units * UnitSize)
	if err != nil {
		return fmt.Errorf("map %s: %w", path, err)
	}
	if int64(len(m.Bytes())) != units*UnitSize {
		_ = m.Close()
		return fmt.Errorf("map %s: got %d bytes, want %d", path, len(m.Bytes()), units*UnitSize)
	}
	q.mu.Lock()
	old := h.m
	h.m, h.data, s.units = m, m.Bytes(), units
	q.mu.Unlock()
	// No reader holds the old mapping: readers use a mapping only under
	// q.mu.RLock, and the swap above waited for them.
	if err := old.Close(); err != nil {
		return fmt.Errorf("unmap %s: %w", path, err)
	}
	return nil
}

// createSegment creates and maps the file starting at queue offset base,
// with blanks blank units at its start, sized for them or firstFileUnits
// (see growTarget). With sync, the file and its directory entry are durable
// when it returns. The file is open (in the cache) unless OwnerSyncsFS
// (see writeUnits): then the handle is nil, and the descriptor is the
// writer's fresh one until closeFresh.
func (q *Queue) createSegment(base, blanks int64, sync bool) (*segment, *handle, error) {
	s := q.newSegment(base, growTarget(0, blanks, q.perFile))
	path := q.path(s)
	f, err := q.fs.Create(path)
	if err != nil {
		q.freeSegment(s)
		return nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	fail := func(err error) (*segment, *handle, error) {
		_ = f.Close() // err is the one to report
		q.freeSegment(s)
		return nil, nil, err
	}
	if err := f.Truncate(s.units * UnitSize); err != nil {
		return fail(fmt.Errorf("size %s: %w", path, err))
	}
	if blanks > 0 {
		buf := make([]byte, blanks*UnitSize)
		for i := int64(0); i < blanks; i++ {
			encodeUnit(buf[i*UnitSize:], rawUnit{size: blankSize})
		}
		if _, err := f.WriteAt(buf, 0); err != nil {
			return fail(fmt.Errorf("write %s: %w", path, err))
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("sync %s: %w", path, err))
		}
		if err := q.fs.SyncDir(q.dir()); err != nil {
			return fail(fmt.Errorf("sync dir %s: %w", q.dir(), err))
		}
		q.w.firstSynced = true
	} else {
		s.dirty = true
		q.writes.Add(1)
	}
	if q.ownerSyncs {
		if err := q.closeFresh(); err != nil {
			return fail(err)
		}
		q.w.fresh, q.w.freshSeg = f, s
		return s, nil, nil
	}
	m, err := f.Map(s.units * UnitSize)
	if err != nil {
		return fail(fmt.Errorf("map %s: %w", path, err))
	}
	h := &handle{q: q, s: s, f: f, m: m, data: m.Bytes()}
	q.cache.add(h)
	s.h.Store(h)
	return s, h, nil
}

// Sync writes the buffered units and makes the units written since the last
// Sync durable (fdatasync). After a failed write or sync it keeps returning
// that error.
func (q *Queue) Sync() error {
	err := q.sync()
	q.cache.maybeEvict()
	return err
}

func (q *Queue) sync() error {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed {
		return fmt.Errorf("consumequeue: sync %s: %w", q.name(), ErrClosed)
	}
	if err := q.syncLocked(); err != nil {
		return fmt.Errorf("consumequeue: sync %s: %w", q.name(), err)
	}
	return nil
}

func (q *Queue) syncLocked() error {
	if q.w.err != nil {
		return fmt.Errorf("earlier failure: %w", q.w.err)
	}
	if err := q.spillLocked(q.endLocked()); err != nil {
		return err
	}
	for _, s := range q.mu.segs {
		if !s.dirty {
			continue
		}
		var err error
		if h := s.h.Load(); h != nil {
			if err = h.f.Sync(); err != nil {
				err = fmt.Errorf("sync %s: %w", q.path(s), err)
			}
		} else {
			// Closed with unsynced writes (OwnerSyncsFS): fdatasync
			// through a descriptor of its own, outside the cache.
			err = q.withFile(q.path(s), "sync", func(f vfs.File) error { return f.Sync() })
		}
		if err != nil {
			return q.fail(err)
		}
		s.dirty = false
	}
	q.needSync.Store(false)
	return nil
}

// TruncateTo drops the units at offsets >= offset (recovery, and raft log
// suffix truncation): it zeroes them on disk, removes files left without
// units and syncs, so the dropped units cannot reappear after a crash that
// follows its return. A crash during TruncateTo may leave any part of the
// dropped units in place; the owner repeats the truncation on recovery.
// offset at or past the last unit put is a no-op (offset >= MaxOffset only
// drops buffered units); offset < MinOffset is ErrOffsetOutOfRange.
func (q *Queue) TruncateTo(offset int64) error {
	err := q.truncateTo(offset)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) truncateTo(offset int64) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: truncate %s to %d: %w", q.name(), offset, err)
	}
	if offset >= q.endLocked() {
		return nil
	}
	if offset < q.mu.min {
		return fmt.Errorf("consumequeue: truncate %s to %d: queue holds [%d, %d): %w",
			q.name(), offset, q.mu.min, q.endLocked(), ErrOffsetOutOfRange)
	}
	if err := q.truncateLocked(offset); err != nil {
		return fmt.Errorf("consumequeue: truncate %s to %d: %w", q.name(), offset, q.fail(err))
	}
	return nil
}

// TruncatePhy drops the units whose PhyOffset >= phyOffset, as TruncateTo
// does: the commit log was truncated at phyOffset.
func (q *Queue) TruncatePhy(phyOffset int64) error {
	err := q.truncatePhy(phyOffset)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) truncatePhy(phyOffset int64) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: truncate %s to phy %d: %w", q.name(), phyOffset, err)
	}
	end := q.endLocked()
	if q.mu.min == end || q.w.tailOK && q.w.tail.phy < phyOffset {
		return nil // no unit to drop: leave the files closed
	}
	off, err := q.searchPhyLocked(q.mu.min, end, phyOffset)
	if err != nil {
		return fmt.Errorf("consumequeue: truncate %s to phy %d: %w", q.name(), phyOffset, err)
	}
	if off >= end {
		return nil
	}
	if err := q.truncateLocked(off); err != nil {
		return fmt.Errorf("consumequeue: truncate %s to phy %d (offset %d): %w",
			q.name(), phyOffset, off, q.fail(err))
	}
	return nil
}

// truncateLocked implements TruncateTo for min <= offset < endLocked. Units
// only in memory are dropped without I/O. Otherwise files are removed last
// first, each removal made durable before the next, so a crash never leaves
// a hole; then the kept file's tail is zeroed and synced.
func (q *Queue) truncateLocked(offset int64) error {
	q.w.tailOK = false
	q.w.journaled = min(q.w.journaled, offset)
	if offset == q.mu.min {
		q.w.minPhyOK = false
	}
	if offset >= q.mu.disk {
		n := (offset - q.mu.disk) * UnitSize
		if offset < q.mu.max {
			q.mu.Lock()
			q.mu.max = offset
			q.mu.mem = q.mu.mem[:n:n]
			q.mu.Unlock()
		}
		// Later appends rewrite the dropped units' bytes, which no reader
		// can reach any more.
		q.w.pend = q.w.pend[:n]
		return nil
	}
	segs := q.mu.segs
	idx := (offset - segs[0].base) / q.perFile
	keep := segs[idx]
	cut := idx + 1
	if offset == keep.base && idx > 0 {
		cut = idx // keep would be left without units
	}
	oldDisk := q.mu.disk
	q.mu.Lock()
	q.mu.max, q.mu.disk, q.mu.mem = offset, offset, nil
	q.mu.segs = segs[:cut:cut]
	q.mu.Unlock()
	q.w.pend = q.w.pend[:0]
	for i := len(segs) - 1; i >= int(cut); i-- {
		if err := q.removeSegment(segs[i]); err != nil {
			return err
		}
	}
	if cut > idx {
		h, err := q.file(keep)
		if err != nil {
			return err
		}
		end := min(oldDisk, keep.base+keep.units)
		if err := q.zeroRange(keep, h, offset-keep.base, end-keep.base); err != nil {
			return err
		}
		keep.dirty = true
		q.writes.Add(1)
	}
	return q.syncLocked()
}

// searchPhyLocked returns the first offset in [lo, hi) whose unit has
// PhyOffset >= phy, or hi. Units' PhyOffsets increase with their offsets;
// hi is at most endLocked.
func (q *Queue) searchPhyLocked(lo, hi, phy int64) (int64, error) {
	if lo >= hi {
		return hi, nil
	}
	var err error
	i := sort.Search(int(hi-lo), func(i int) bool {
		u, _, e := q.writerUnitLocked(lo + int64(i))
		if e != nil {
			err = e
			return true
		}
		return u.phy >= phy
	})
	return lo + int64(i), err
}

// DeleteBefore applies retention once the commit log below minPhyOffset is
// gone: it removes whole files whose last unit's PhyOffset < minPhyOffset
// (never the last file, nor the one holding MaxOffset-1), then advances
// MinOffset to the first unit with PhyOffset >= minPhyOffset (MaxOffset if
// none), as RocketMQ's deleteExpiredFile and correctMinOffset do. It returns
// the number of files removed. A queue whose first unit is already at or
// past minPhyOffset is left alone without opening its files; any other
// writes (and makes visible) its buffered units first.
func (q *Queue) DeleteBefore(minPhyOffset int64) (removedFiles int, err error) {
	n, err := q.deleteBefore(minPhyOffset)
	q.cache.maybeEvict()
	return n, err
}

func (q *Queue) deleteBefore(minPhyOffset int64) (removedFiles int, err error) {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return 0, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, err)
	}
	if q.mu.min == q.endLocked() || q.w.minPhyOK && q.w.minPhy >= minPhyOffset {
		return 0, nil
	}
	if err := q.spillLocked(q.endLocked()); err != nil {
		return 0, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, err)
	}
	segs, maxOff := q.mu.segs, q.mu.max
	n := 0
	for n < len(segs)-1 {
		s := segs[n]
		if s.base+q.perFile-1 >= maxOff-1 {
			break
		}
		h, err := q.file(s)
		if err != nil {
			return 0, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, err)
		}
		if h.raw(q.perFile-1).phy >= minPhyOffset {
			break
		}
		n++
	}
	lo := max(q.mu.min, segs[n].base)
	newMin, err := q.searchPhyLocked(lo, maxOff, minPhyOffset)
	if err != nil {
		return 0, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, err)
	}
	q.w.minPhyOK = false
	if newMin < maxOff {
		if u, _, ok, err := q.rawLocked(newMin); err == nil && ok {
			q.w.minPhy, q.w.minPhyOK = u.phy, true
		}
	}
	q.mu.Lock()
	q.mu.segs = segs[n:]
	q.mu.min = newMin
	q.mu.Unlock()
	// First file first, each removal durable before the next: a crash never
	// leaves a hole.
	for i, s := range segs[:n] {
		if err := q.removeSegment(s); err != nil {
			return i, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, q.fail(err))
		}
	}
	return n, nil
}

// ResetTo drops every unit and makes offset both MinOffset and MaxOffset,
// for a replica that installs a snapshot and must continue the queue at the
// leader's offset. The start of the new file is filled with blank units
// (RocketMQ's fillPreBlank) so that the offset survives a restart; the file
// and its directory entry are synced, with or without OwnerSyncsFS. A crash
// during ResetTo may leave the queue partly reset; the owner repeats it.
func (q *Queue) ResetTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("consumequeue: reset %s to %d: %w", q.name(), offset, ErrInvalidArgument)
	}
	err := q.resetTo(offset)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) resetTo(offset int64) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: reset %s to %d: %w", q.name(), offset, err)
	}
	if err := q.resetLocked(offset); err != nil {
		return fmt.Errorf("consumequeue: reset %s to %d: %w", q.name(), offset, q.fail(err))
	}
	return nil
}

func (q *Queue) resetLocked(offset int64) error {
	q.w.tailOK, q.w.minPhyOK = false, false
	q.w.journaled = offset
	segs := q.mu.segs
	q.mu.Lock()
	q.mu.segs = q.segs0[:0] // segs0 is rewritten only by appends, after the loop below
	q.mu.min, q.mu.max, q.mu.disk, q.mu.mem = offset, offset, offset, nil
	q.mu.Unlock()
	q.w.pend = q.w.pend[:0] // dropped with every other unit
	for i := len(segs) - 1; i >= 0; i-- {
		if err := q.removeSegment(segs[i]); err != nil {
			return err
		}
	}
	q.needSync.Store(false)
	if offset == 0 {
		return nil
	}
	base := offset - offset%q.perFile
	s, _, err := q.createSegment(base, offset-base, true)
	if err != nil {
		return err
	}
	if err := q.closeFresh(); err != nil {
		return err
	}
	q.mu.Lock()
	q.mu.segs = append(q.segs0[:0], s)
	q.mu.Unlock()
	return nil
}
