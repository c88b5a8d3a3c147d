package store

import "sort"

// GroupLag is a consumer group's backlog in one topic: over the queues the
// group has committed an offset in, the messages stored at or after that
// offset.
type GroupLag struct {
	Group, Topic string
	Lag          int64
	Committed    int64 // the sum of the committed offsets
	Queues       int   // queues with a committed offset
}

// ConsumerLags returns every group's lag per topic from the applied state,
// sorted by group then topic. Queues the group never committed an offset
// in do not count (as in RocketMQ's consumer progress). It costs one pass
// over the committed offsets under the state's read lock.
func (s *Store) ConsumerLags() []GroupLag {
	type gt struct{ group, topic string }
	acc := map[gt]*GroupLag{}
	s.state.mu.RLock()
	for k, off := range s.state.consumer {
		g := acc[gt{k.group, k.topic}]
		if g == nil {
			g = &GroupLag{Group: k.group, Topic: k.topic}
			acc[gt{k.group, k.topic}] = g
		}
		g.Queues++
		g.Committed += off
		if end := s.state.nextOffset(queueKey{k.topic, k.queue}); end > off {
			g.Lag += end - off
		}
	}
	s.state.mu.RUnlock()
	out := make([]GroupLag, 0, len(acc))
	for _, g := range acc {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Topic < out[j].Topic
	})
	return out
}
