package store

import (
	"fmt"
	"math"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/schedule"
)

// ScheduleUnits returns up to limit units of schedule queue q from offset
// from: what the leader's scheduler looks at, from the queue's cursor
// (ScheduleOffset). Only applied units are visible.
func (s *Store) ScheduleUnits(q int32, from int64, limit int) ([]consumequeue.Unit, error) {
	// Called for every schedule queue every 10 ms: most do not exist.
	cq, err := s.cqs.Find(schedule.Topic, q)
	if err != nil {
		return nil, fmt.Errorf("store: schedule queue %d: %w", q, err)
	}
	if cq == nil {
		return nil, nil
	}
	from = max(from, cq.MinOffset())
	end := min(cq.MaxOffset(), from+int64(limit))
	out := make([]consumequeue.Unit, 0, max(end-from, 0))
	for o := from; o < end; o++ {
		u, err := cq.Get(o)
		if err != nil {
			return out, fmt.Errorf("store: schedule queue %d offset %d: %w", q, o, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// RecordAt decodes the record stored at a physical offset, queued or not
// (a schedule unit or a half message points at it). The message's Body
// aliases a buffer of its own.
func (s *Store) RecordAt(phy int64) (message.Message, error) {
	rec, err := s.readRecord(phy)
	if err != nil {
		return message.Message{}, err
	}
	m, _, err := message.Decode(rec)
	if err != nil {
		return message.Message{}, fmt.Errorf("store: record at physical offset %d: %w", phy, err)
	}
	m.PhysicalOffset = phy
	return m, nil
}

// pendingFloor returns the lowest commit-log position a waiting message
// (a schedule unit not delivered yet, a pending transaction's half
// message) points at, or math.MaxInt64: retention keeps it. Units of a
// schedule queue are in position order, so its cursor's unit is its
// lowest.
func (s *Store) pendingFloor() int64 {
	floor := int64(math.MaxInt64)
	for q := int32(0); q < schedule.QueueCount; q++ {
		units, err := s.ScheduleUnits(q, s.ScheduleOffset(q), 1)
		if err != nil {
			s.log.Warn("store: retention: read schedule queue", "queue", q, "err", err)
		}
		for _, u := range units {
			floor = min(floor, u.PhyOffset)
		}
	}
	for _, t := range s.PendingTransactions() {
		floor = min(floor, t.Phy)
	}
	return floor
}
