package consumequeue

import (
	"fmt"
	"sort"
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

// maxPending bounds the units one queue buffers: PutBuffered writes the
// buffer once it holds this many (80 KiB), so a long replay neither grows
// memory without bound nor delays readers for long.
const maxPending = 4096

// keepPendingCap is the largest buffer capacity kept after a flush; a larger
// buffer (left by a burst) is released, as a Set may hold many queues.
const keepPendingCap = 16 << 10

// Put stores the unit for queueOffset, which must be MaxOffset (plus the
// units PutBuffered is holding, if any). Putting a unit identical to the one
// already stored (or buffered) at an offset in [MinOffset, MaxOffset) is a
// no-op, so the owner can replay committed entries after a
// crash; any other offset fails with ErrOffsetMismatch. A unit must have
// size > 0 and phyOffset >= 0, and must not overlap the previous unit in the
// commit log (ErrInvalidUnit). The unit is visible to readers when Put
// returns and durable after the next Sync. Put is PutBuffered followed by
// Flush: it also writes the units buffered before it.
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

// PutBuffered is Put without the write: the unit joins the queue's write
// buffer, and the offset it takes counts as written for the next
// PutBuffered or Put (which continues at MaxOffset plus the buffered units,
// checks replays and overlaps against the buffered units too). Buffered
// units are written, in order and with one WriteAt per file, by Flush, Sync,
// Close, the next Put, DeleteBefore, or once maxPending units are waiting;
// only then do readers (MaxOffset, Get, Read, SearchOffset) see them, so a
// reader never sees a unit that is not in the file. TruncateTo, TruncatePhy
// and ResetTo drop the buffered units they cut off without writing them. An
// error writing the buffer is sticky, like any write error, and the buffered
// units are then dropped. The owner calls Flush before telling anyone that
// the units are stored.
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
		if err := q.flushLocked(); err != nil {
			return fmt.Errorf("consumequeue: put %s offset %d: %w", q.name(), queueOffset, err)
		}
	}
	return nil
}

// Flush writes the buffered units (see PutBuffered) and makes them visible
// to readers; they are durable after the next Sync. After a failed write or
// sync it returns that error.
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
	n := len(q.w.pend)
	q.w.pend = append(q.w.pend, make([]byte, UnitSize)...)
	encodeUnit(q.w.pend[n:], u)
	q.w.tail, q.w.tailOK = u, true
	if !q.needSync.Load() {
		q.needSync.Store(true) // so Set.SyncDirty writes and syncs it
	}
	return nil
}

// endLocked is the writer's end of the queue: MaxOffset plus the buffered
// units. Callers hold q.w.
func (q *Queue) endLocked() int64 { return q.mu.max + int64(len(q.w.pend)/UnitSize) }

// writerUnitLocked returns the unit at off as the writer sees it: written,
// or buffered. ok is false outside [first file, endLocked). Callers hold q.w.
func (q *Queue) writerUnitLocked(off int64) (u rawUnit, ok bool, err error) {
	if off >= q.mu.max {
		i := (off - q.mu.max) * UnitSize
		if off < 0 || i >= int64(len(q.w.pend)) {
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

// flushLocked writes the buffered units at max, one WriteAt per file they
// fall in, and publishes each file's share (moves max past it) only after
// its write succeeded. On failure the error is made sticky and the units not
// yet published are dropped: the queue refuses writes from then on, and its
// owner rebuilds them from the commit log after a restart.
func (q *Queue) flushLocked() error {
	pend := q.w.pend
	for done := 0; done < len(pend); {
		s, h, err := q.segmentForWriteLocked(q.mu.max)
		if err != nil {
			q.dropAllPending()
			return q.fail(err)
		}
		n := min(int64(len(pend)-done), (s.base+q.perFile-q.mu.max)*UnitSize)
		if end := q.mu.max - s.base + n/UnitSize; end > s.units {
			if err := q.growLocked(s, h, end); err != nil {
				q.dropAllPending()
				return q.fail(err)
			}
		}
		if _, err := h.f.WriteAt(pend[done:done+int(n)], (q.mu.max-s.base)*UnitSize); err != nil {
			q.dropAllPending()
			return q.fail(fmt.Errorf("write %s: %w", q.path(s), err))
		}
		s.dirty = true
		q.needSync.Store(true)
		q.writes.Add(1)
		q.mu.Lock()
		q.mu.max += n / UnitSize
		q.mu.Unlock()
		done += int(n)
	}
	if cap(pend) > keepPendingCap {
		q.w.pend = nil
	} else {
		q.w.pend = pend[:0]
	}
	return nil
}

// dropAllPending drops the buffered units after a failed write.
func (q *Queue) dropAllPending() {
	q.w.pend = q.w.pend[:0]
	q.w.tailOK = false
}

// dropPendingFrom drops the buffered units at offsets >= off (>= max).
func (q *Queue) dropPendingFrom(off int64) {
	if n := (off - q.mu.max) * UnitSize; n < int64(len(q.w.pend)) {
		q.w.pend = q.w.pend[:max(n, 0)]
		q.w.tailOK = false
	}
}

// segmentForWriteLocked returns the file that holds offset off, which is
// max, and its open handle, creating the file (after syncing the previous
// one) if needed.
func (q *Queue) segmentForWriteLocked(off int64) (*segment, *handle, error) {
	segs := q.mu.segs
	n := len(segs)
	if n > 0 && off < segs[n-1].base+q.perFile {
		s := segs[n-1]
		h, err := q.file(s)
		return s, h, err
	}
	if n > 0 && segs[n-1].dirty {
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
	}
	s, h, err := q.createSegment(off-off%q.perFile, 0)
	if err != nil {
		return nil, nil, err
	}
	q.mu.Lock()
	q.mu.segs = append(q.mu.segs, s)
	q.mu.Unlock()
	return s, h, nil
}

// growLocked makes s's file (open as h) hold at least need units: it
// extends the file (with zeros) to growTarget units and maps it again. The
// growth is durable with the next Sync of the file, like the units written
// into it.
func (q *Queue) growLocked(s *segment, h *handle, need int64) error {
	units := growTarget(s.units, need, q.perFile)
	path := q.path(s)
	if err := h.f.Truncate(units * UnitSize); err != nil {
		return fmt.Errorf("extend %s: %w", path, err)
	}
	s.dirty = true
	q.writes.Add(1)
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
// (see growTarget). The file and its directory entry are durable when it
// returns, and the file is open.
func (q *Queue) createSegment(base, blanks int64) (*segment, *handle, error) {
	s := &segment{base: base, units: growTarget(0, blanks, q.perFile)}
	path := q.path(s)
	f, err := q.fs.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	fail := func(err error) (*segment, *handle, error) {
		_ = f.Close() // err is the one to report
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
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync %s: %w", path, err))
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fail(fmt.Errorf("sync dir %s: %w", q.dir, err))
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
	if err := q.flushLocked(); err != nil {
		return err
	}
	for _, s := range q.mu.segs {
		if !s.dirty {
			continue
		}
		h, err := q.file(s) // open: closing a dirty file syncs it
		if err != nil {
			return q.fail(err)
		}
		if err := h.f.Sync(); err != nil {
			return q.fail(fmt.Errorf("sync %s: %w", q.path(s), err))
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
// offset >= MaxOffset is a no-op; offset < MinOffset is ErrOffsetOutOfRange.
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
	if offset >= q.mu.max {
		q.dropPendingFrom(offset) // never written: nothing to zero
		return nil
	}
	if offset < q.mu.min {
		return fmt.Errorf("consumequeue: truncate %s to %d: queue holds [%d, %d): %w",
			q.name(), offset, q.mu.min, q.endLocked(), ErrOffsetOutOfRange)
	}
	q.w.pend = q.w.pend[:0]
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
	if len(q.w.pend) == 0 && (q.mu.min == q.mu.max || q.w.tailOK && q.w.tail.phy < phyOffset) {
		return nil // no unit to drop: leave the files closed
	}
	off, err := q.searchPhyLocked(q.mu.min, q.mu.max, phyOffset)
	if err != nil {
		return fmt.Errorf("consumequeue: truncate %s to phy %d: %w", q.name(), phyOffset, err)
	}
	if off >= q.mu.max {
		// Only buffered units can go: they were never written.
		for end := q.endLocked(); off < end; off++ {
			if u, _, _ := q.writerUnitLocked(off); u.phy >= phyOffset {
				break
			}
		}
		q.dropPendingFrom(off)
		return nil
	}
	q.w.pend = q.w.pend[:0]
	if err := q.truncateLocked(off); err != nil {
		return fmt.Errorf("consumequeue: truncate %s to phy %d (offset %d): %w",
			q.name(), phyOffset, off, q.fail(err))
	}
	return nil
}

// truncateLocked implements TruncateTo for min <= offset < max. Files are
// removed last first, each removal made durable before the next, so a crash
// never leaves a hole; then the kept file's tail is zeroed and synced.
func (q *Queue) truncateLocked(offset int64) error {
	segs := q.mu.segs
	idx := (offset - segs[0].base) / q.perFile
	keep := segs[idx]
	cut := idx + 1
	if offset == keep.base && idx > 0 {
		cut = idx // keep would be left without units
	}
	oldMax := q.mu.max
	q.mu.Lock()
	q.mu.max = offset
	q.mu.segs = segs[:cut:cut]
	q.mu.Unlock()
	q.w.tailOK = false
	if offset == q.mu.min {
		q.w.minPhyOK = false
	}
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
		end := min(oldMax, keep.base+keep.units)
		if err := q.zeroRange(keep, h, offset-keep.base, end-keep.base); err != nil {
			return err
		}
		keep.dirty = true
		q.writes.Add(1)
	}
	return q.syncLocked()
}

// searchPhyLocked returns the first offset in [lo, hi) whose unit has
// PhyOffset >= phy, or hi. Units' PhyOffsets increase with their offsets.
func (q *Queue) searchPhyLocked(lo, hi, phy int64) (int64, error) {
	if lo >= hi {
		return hi, nil
	}
	var err error
	i := sort.Search(int(hi-lo), func(i int) bool {
		u, _, _, e := q.rawLocked(lo + int64(i))
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
// past minPhyOffset is left alone without opening its files.
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
	if err := q.flushLocked(); err != nil {
		return 0, fmt.Errorf("consumequeue: delete %s before phy %d: %w", q.name(), minPhyOffset, err)
	}
	segs, maxOff := q.mu.segs, q.mu.max
	if len(segs) == 0 || q.mu.min == maxOff || q.w.minPhyOK && q.w.minPhy >= minPhyOffset {
		return 0, nil
	}
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
// (RocketMQ's fillPreBlank) so that the offset survives a restart. A crash
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
	q.w.pend = q.w.pend[:0] // dropped with every other unit
	q.w.tailOK, q.w.minPhyOK = false, false
	segs := q.mu.segs
	q.mu.Lock()
	q.mu.segs = nil
	q.mu.min, q.mu.max = offset, offset
	q.mu.Unlock()
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
	s, _, err := q.createSegment(base, offset-base)
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.mu.segs = []*segment{s}
	q.mu.Unlock()
	return nil
}
