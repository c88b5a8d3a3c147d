package store

import (
	"fmt"
	"sort"
	"strings"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/store/pop"
)

// Forced retention (the disk above Retention.ForceRatio) deletes segments
// before they expire, and with them messages that consumer groups may not
// have read. countUnconsumed counts those messages
// (ForcedUnconsumedMessages, exported as
// raftmq_retention_forced_unconsumed_messages_total) and logs the groups
// that lose them. A group counts in a queue where it has a committed
// offset (as in ConsumerLags); a message counts once however many groups
// had not consumed it; a message the group popped and has not acked
// (store/pop) is not consumed, even below its offset. Expired segments deleted in the same pass do not
// count: time-based retention deletes them anyway.

// maxUnconsumedLogged bounds the group and topic pairs one log line names.
const maxUnconsumedLogged = 20

// ForcedUnconsumedMessages returns how many messages forced retention has
// deleted, since the store opened, that a consumer group with an offset in
// their queue had not consumed.
func (s *Store) ForcedUnconsumedMessages() uint64 { return s.forcedUnconsumed.Load() }

// countUnconsumed counts the messages whose units start below phy (the end
// of the segments forced retention deletes before they expired) and that a
// group has not consumed, adds them to ForcedUnconsumedMessages and logs
// them with the groups. The caller holds applyMu (consumer offsets and
// queues do not move) and calls it before the queues drop those units.
func (s *Store) countUnconsumed(phy int64) {
	type groupOff struct {
		group string
		off   int64
	}
	byQueue := map[queueKey][]groupOff{}
	s.state.mu.RLock()
	for k, off := range s.state.consumer {
		// A popped message not acked is not consumed, whatever the
		// offset says (a reset or a pull commit can move it past).
		if pq, ok := s.state.pop.Queues[pop.Key{Group: k.group, Topic: k.topic, Queue: k.queue}]; ok && len(pq.InFlight) > 0 {
			off = min(off, pq.LowWater())
		}
		q := queueKey{k.topic, k.queue}
		byQueue[q] = append(byQueue[q], groupOff{k.group, off})
	}
	s.state.mu.RUnlock()

	type groupTopic struct{ group, topic string }
	perGroup := map[groupTopic]int64{}
	var total int64
	for qk, groups := range byQueue {
		q, err := s.cqs.Find(qk.topic, qk.queue)
		if err != nil {
			continue // no unit ever applied to the queue
		}
		lo, hi := q.MinOffset(), q.MaxOffset()
		from := hi // the first offset some group has not consumed
		for _, g := range groups {
			from = min(from, max(g.off, lo))
		}
		if from >= hi {
			continue
		}
		end, err := firstAtOrAfter(q, from, hi, phy)
		if err != nil {
			s.log.Warn("store: forced retention: cannot count unconsumed messages", "topic", qk.topic, "queue", qk.queue, "err", err)
			continue
		}
		if end <= from {
			continue
		}
		total += end - from
		for _, g := range groups {
			if n := end - max(g.off, lo); n > 0 {
				perGroup[groupTopic{g.group, qk.topic}] += n
			}
		}
	}
	if total == 0 {
		return
	}
	s.forcedUnconsumed.Add(uint64(total))
	pairs := make([]groupTopic, 0, len(perGroup))
	for k := range perGroup {
		pairs = append(pairs, k)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if perGroup[pairs[i]] != perGroup[pairs[j]] {
			return perGroup[pairs[i]] > perGroup[pairs[j]]
		}
		if pairs[i].group != pairs[j].group {
			return pairs[i].group < pairs[j].group
		}
		return pairs[i].topic < pairs[j].topic
	})
	var b strings.Builder
	for i, k := range pairs {
		if i == maxUnconsumedLogged {
			fmt.Fprintf(&b, "; and %d more", len(pairs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %d unread in %s", k.group, perGroup[k], k.topic)
	}
	s.log.Warn("store: disk above the force-clean ratio: deleting messages consumer groups have not consumed",
		"unconsumed", total, "groups", b.String(), "force_ratio", s.cfg.Retention.ForceRatio)
}

// firstAtOrAfter returns the first queue offset in [lo, hi) whose unit
// starts at or after phy in the log, or hi: units go up the log with the
// offsets.
func firstAtOrAfter(q *consumequeue.Queue, lo, hi, phy int64) (int64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, err := q.Get(mid)
		if err != nil {
			return 0, fmt.Errorf("store: %w", err)
		}
		if u.PhyOffset >= phy {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
