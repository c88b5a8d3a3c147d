package bench

import (
	"fmt"
	"math/bits"
	"sync/atomic"
)

// queueRange is the part of one queue a consume run reads: offsets
// [Lo, Hi).
type queueRange struct {
	Queue  int32
	Lo, Hi int64
}

// seenSet records which offsets of a consume run's queue ranges were
// delivered, so that a run ends when every message was consumed at least
// once and reports the deliveries beyond the first as duplicates. Its
// methods are safe for concurrent use: one bit per offset, set atomically.
type seenSet struct {
	queues []seenQueue // by queue id; a queue outside the run has no bits
	total  int64

	distinct, dups atomic.Int64
	done           chan struct{} // closed when distinct reaches total
}

type seenQueue struct {
	lo, hi int64
	bits   []atomic.Uint64
}

// newSeenSet returns an empty set over ranges. Queue ids must be >= 0 and
// appear once; a range with Hi <= Lo is empty.
func newSeenSet(ranges []queueRange) (*seenSet, error) {
	s := &seenSet{done: make(chan struct{})}
	listed := map[int32]bool{}
	for _, r := range ranges {
		if r.Queue < 0 {
			return nil, fmt.Errorf("bench: negative queue id %d", r.Queue)
		}
		if listed[r.Queue] {
			return nil, fmt.Errorf("bench: queue %d listed twice", r.Queue)
		}
		listed[r.Queue] = true
		if int(r.Queue) >= len(s.queues) {
			s.queues = append(s.queues, make([]seenQueue, int(r.Queue)+1-len(s.queues))...)
		}
		q := &s.queues[r.Queue]
		if r.Hi <= r.Lo {
			continue
		}
		q.lo, q.hi = r.Lo, r.Hi
		q.bits = make([]atomic.Uint64, (r.Hi-r.Lo+63)/64)
		s.total += r.Hi - r.Lo
	}
	if s.total == 0 {
		close(s.done)
	}
	return s, nil
}

// mark records a delivery of queue q's offset off. It reports whether
// the offset is in the run (inRange) and whether this is its first
// delivery. It does not count: the caller adds a batch's outcome with
// count, so that a batch costs one update of the shared counters.
func (s *seenSet) mark(q int32, off int64) (first, inRange bool) {
	if q < 0 || int(q) >= len(s.queues) {
		return false, false
	}
	sq := &s.queues[q]
	if off < sq.lo || off >= sq.hi {
		return false, false
	}
	i := off - sq.lo
	bit := uint64(1) << (i % 64)
	old := sq.bits[i/64].Or(bit)
	return old&bit == 0, true
}

// count adds first deliveries and duplicates; the delivery that
// completes the set closes done.
func (s *seenSet) count(first, dups int64) {
	if dups > 0 {
		s.dups.Add(dups)
	}
	if first > 0 && s.distinct.Add(first) == s.total {
		close(s.done)
	}
}

// missing returns how many offsets of the run were not delivered yet and
// the first of them (queue, offset), for a report of a stalled run.
func (s *seenSet) missing() (n int64, queue int32, offset int64) {
	queue, offset = -1, -1
	for q := range s.queues {
		sq := &s.queues[q]
		for w := range sq.bits {
			v := sq.bits[w].Load()
			span := min(sq.hi-sq.lo-int64(w)*64, 64) // offsets this word covers
			unseen := int64(span) - int64(bits.OnesCount64(v))
			if unseen == 0 {
				continue
			}
			if queue < 0 {
				queue = int32(q)
				offset = sq.lo + int64(w)*64 + int64(bits.TrailingZeros64(^v))
			}
			n += unseen
		}
	}
	return n, queue, offset
}
