package consumequeue

import (
	"fmt"
)

// scanFactor bounds Read: one call examines at most max*scanFactor units, so
// a selective filter cannot make it unbounded.
const scanFactor = 64

// rawLocked returns the unit at off and its file (nil for a unit only in
// memory); ok is false when off is not below max or not in a file, and err
// reports a file that could not be opened. Callers hold q.mu (either mode)
// or q.w.
func (q *Queue) rawLocked(off int64) (u rawUnit, s *segment, ok bool, err error) {
	if off < 0 || off >= q.mu.max {
		return rawUnit{}, nil, false, nil
	}
	if off >= q.mu.disk {
		u, _ = decodeUnit(q.mu.mem[(off-q.mu.disk)*UnitSize:])
		return u, nil, true, nil
	}
	segs := q.mu.segs
	if len(segs) == 0 || off < segs[0].base {
		return rawUnit{}, nil, false, nil
	}
	s = segs[(off-segs[0].base)/q.perFile]
	h, err := q.file(s)
	if err != nil {
		return rawUnit{}, s, false, err
	}
	return h.raw(off - s.base), s, true, nil
}

// Get returns the unit at offset; ErrOffsetOutOfRange outside [MinOffset,
// MaxOffset).
func (q *Queue) Get(offset int64) (Unit, error) {
	u, err := q.get(offset)
	q.cache.maybeEvict()
	return u, err
}

func (q *Queue) get(offset int64) (Unit, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.mu.closed {
		return Unit{}, fmt.Errorf("consumequeue: get %s offset %d: %w", q.name(), offset, ErrClosed)
	}
	if offset < q.mu.min || offset >= q.mu.max {
		return Unit{}, fmt.Errorf("consumequeue: get %s offset %d: queue holds [%d, %d): %w",
			q.name(), offset, q.mu.min, q.mu.max, ErrOffsetOutOfRange)
	}
	u, s, _, err := q.rawLocked(offset)
	if err == nil && !u.valid() {
		err = fmt.Errorf("queue offset %d: invalid unit %v in memory: %w", offset, u, ErrCorrupt)
		if s != nil {
			err = q.corruptAt(s, offset-s.base, "invalid unit %v", u)
		}
	}
	if err != nil {
		return Unit{}, fmt.Errorf("consumequeue: get %s: %w", q.name(), err)
	}
	return u.unit(offset), nil
}

// Read returns up to max units at or after offset whose tags code passes
// filter (nil passes all), skipping the others. It examines at most
// max*64 units and stops at MaxOffset; next is the offset after the last
// unit examined, where the caller continues. offset == MaxOffset returns no
// units and next == offset; offsets outside [MinOffset, MaxOffset] are
// ErrOffsetOutOfRange. filter runs with the queue's read lock held and must
// not call the methods of any Queue or Set.
func (q *Queue) Read(offset int64, max int, filter func(tagsCode int64) bool) (units []Unit, next int64, err error) {
	units, next, err = q.read(offset, max, filter)
	q.cache.maybeEvict()
	return units, next, err
}

func (q *Queue) read(offset int64, max int, filter func(tagsCode int64) bool) (units []Unit, next int64, err error) {
	if max <= 0 {
		return nil, offset, fmt.Errorf("consumequeue: read %s: max %d: %w", q.name(), max, ErrInvalidArgument)
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.mu.closed {
		return nil, offset, fmt.Errorf("consumequeue: read %s offset %d: %w", q.name(), offset, ErrClosed)
	}
	if offset < q.mu.min || offset > q.mu.max {
		return nil, offset, fmt.Errorf("consumequeue: read %s offset %d: queue holds [%d, %d): %w",
			q.name(), offset, q.mu.min, q.mu.max, ErrOffsetOutOfRange)
	}
	end := q.mu.max
	if int64(max) <= (end-offset)/scanFactor {
		end = offset + int64(max)*scanFactor
	}
	units = make([]Unit, 0, min(int64(max), end-offset))
	next = offset
	for next < end && len(units) < max {
		if next >= q.mu.disk {
			// The rest is in memory: units put and flushed, not yet
			// written to the files.
			mem := q.mu.mem[(next-q.mu.disk)*UnitSize:]
			for ; next < end && len(units) < max; next++ {
				u, _ := decodeUnit(mem)
				mem = mem[UnitSize:]
				if filter == nil || filter(u.tags) {
					units = append(units, u.unit(next))
				}
			}
			break
		}
		s := q.mu.segs[(next-q.mu.segs[0].base)/q.perFile]
		h, err := q.file(s)
		if err != nil {
			return nil, offset, fmt.Errorf("consumequeue: read %s: %w", q.name(), err)
		}
		stop := min(end, s.base+q.perFile, q.mu.disk)
		for ; next < stop && len(units) < max; next++ {
			u := h.raw(next - s.base)
			if !u.valid() {
				return nil, offset, fmt.Errorf("consumequeue: read %s: %w", q.name(),
					q.corruptAt(s, next-s.base, "invalid unit %v", u))
			}
			if filter == nil || filter(u.tags) {
				units = append(units, u.unit(next))
			}
		}
	}
	return units, next, nil
}

// SearchOffset returns the first offset in [MinOffset, MaxOffset) whose
// message was stored at or after timestamp, or MaxOffset if none was; it
// binary-searches, so store timestamps must not decrease along the queue.
// storeTime returns a message's store timestamp, read from the commit log.
// It is called without the queue's locks held.
func (q *Queue) SearchOffset(timestamp int64, storeTime func(phyOffset int64, size int32) (int64, error)) (int64, error) {
	q.mu.RLock()
	lo, hi, closed := q.mu.min, q.mu.max, q.mu.closed
	q.mu.RUnlock()
	if closed {
		return 0, fmt.Errorf("consumequeue: search %s: %w", q.name(), ErrClosed)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, err := q.Get(mid)
		if err != nil {
			return 0, fmt.Errorf("consumequeue: search %s: %w", q.name(), err)
		}
		t, err := storeTime(u.PhyOffset, u.Size)
		if err != nil {
			return 0, fmt.Errorf("consumequeue: search %s: store time of offset %d (phy %d): %w",
				q.name(), mid, u.PhyOffset, err)
		}
		if t >= timestamp {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
