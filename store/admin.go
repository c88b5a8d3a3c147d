package store

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// Read-only helpers for the broker's admin views (cluster/admin.go), and
// the apply of OpImportConfig.

// StoreTimeAt returns the store timestamp (Unix ms) of the message at a
// queue offset, or an error wrapping ErrNotFound if the queue has no
// readable message there (empty, removed by retention, or past the end).
func (s *Store) StoreTimeAt(topic string, queueID int32, offset int64) (int64, error) {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil || offset < q.MinOffset() || offset >= q.MaxOffset() {
		return 0, fmt.Errorf("%w: %s/%d offset %d", ErrNotFound, topic, queueID, offset)
	}
	u, err := q.Get(offset)
	if err != nil {
		return 0, fmt.Errorf("store: %s/%d offset %d: %w", topic, queueID, offset, err)
	}
	rec := make([]byte, u.Size)
	if err := s.clog.ReadAt(rec, u.PhyOffset); err != nil {
		return 0, fmt.Errorf("store: %s/%d offset %d: %w", topic, queueID, offset, err)
	}
	v, err := message.Parse(rec, false)
	if err != nil {
		return 0, fmt.Errorf("store: %s/%d offset %d: %w", topic, queueID, offset, err)
	}
	return v.StoreTimestamp, nil
}

// GroupTopics returns, sorted, the topics in which group has a committed
// offset.
func (s *Store) GroupTopics(group string) []string {
	s.state.mu.RLock()
	seen := map[string]bool{}
	for k := range s.state.consumer {
		if k.group == group {
			seen[k.topic] = true
		}
	}
	s.state.mu.RUnlock()
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// applyImportLocked applies an OpImportConfig under state.mu: every topic
// and group is validated, and every offset checked against the topics as
// they will be (a queue's offset may not pass its end), before anything
// changes.
func (s *Store) applyImportLocked(c *Command) error {
	st := s.state
	for _, tc := range c.Topics {
		if err := tc.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
	}
	for _, gc := range c.Groups {
		if err := gc.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
	}
	imported := make(map[string]bool, len(c.Topics))
	for _, tc := range c.Topics {
		imported[tc.TopicName] = true
	}
	for _, oc := range c.Offsets {
		if oc.Group == "" || oc.Offset < 0 || oc.QueueID < 0 {
			return fmt.Errorf("%w: offset %+v", ErrBadCommand, oc)
		}
		if err := offsets.CheckGroupName(oc.Group); err != nil {
			return fmt.Errorf("%w: offset: %w", ErrBadCommand, err)
		}
		if _, ok := st.topics[oc.Topic]; !ok && !imported[oc.Topic] {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, oc.Topic)
		}
		if max := st.nextOffset(queueKey{oc.Topic, oc.QueueID}); oc.Offset > max {
			return fmt.Errorf("%w: offset %d beyond queue %s/%d max %d", ErrBadCommand, oc.Offset, oc.Topic, oc.QueueID, max)
		}
	}
	for _, tc := range c.Topics {
		st.topics[tc.TopicName] = tc
		st.dirtyTopics[tc.TopicName] = true
	}
	if len(c.Topics) > 0 {
		s.topicsVersion.Add(1)
	}
	for _, gc := range c.Groups {
		st.groups[gc.GroupName] = gc
		st.dirtyGroups[gc.GroupName] = true
	}
	for _, oc := range c.Offsets {
		k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
		st.consumer[k] = oc.Offset
		st.dirtyConsumer[k] = true
	}
	return nil
}
