package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/commitlog/message"
	"github.com/raftmq/raftmq/offsets"
)

// Result is the outcome of applying one entry.
type Result struct {
	Index, Term uint64
	BatchID     uint64
	Kind        byte            // 0 for no-ops and conf changes
	Messages    []MessageResult // for KindMessages
	Err         error           // for a command, or a malformed entry
}

// MessageResult is where one message landed.
type MessageResult struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhyOffset      int64
	Size           int32
	StoreTimestamp int64
	MsgID          string // offsetMsgId
	UniqKey        string
	// Duplicate: the UNIQ_KEY was already stored within the dedupe window;
	// the fields describe the original, and nothing new was queued.
	Duplicate bool
	Err       error
}

// applyChunk bounds the bytes copied out of the log per read.
const applyChunk = 8 << 20

// Apply applies committed entries up to and including upTo, in order, and
// returns one Result per entry. Call it from one goroutine. It fails only on
// a storage error, after which the node must stop.
func (s *Store) Apply(upTo uint64) ([]Result, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var results []Result
	for {
		next := s.state.applied + 1
		if next > upTo {
			break
		}
		ents, err := s.clog.Entries(next, upTo+1, applyChunk)
		if err != nil {
			return results, fmt.Errorf("store: read entries %d..%d: %w", next, upTo, err)
		}
		for i := range ents {
			r, err := s.applyEntry(&ents[i])
			if err != nil {
				return results, err
			}
			results = append(results, r)
		}
	}
	if len(results) > 0 {
		s.notify()
	}
	if time.Since(s.lastPersist) >= s.cfg.PersistInterval {
		if err := s.persistLocked(); err != nil {
			return results, err
		}
	}
	return results, nil
}

func (s *Store) applyEntry(e *commitlog.Entry) (Result, error) {
	r := Result{Index: e.Index, Term: e.Term}
	if e.Type == 0 && len(e.Data) > 0 {
		kind, batch, payload, err := parseBody(e.Data)
		r.Kind, r.BatchID = kind, batch
		switch {
		case err != nil:
			r.Err = err
		case kind == KindMessages:
			base := e.Pos + commitlog.HeaderSize + BodyHeaderSize
			r.Messages, err = s.applyMessages(payload, base)
			if err != nil {
				return r, err
			}
		case kind == KindCommand:
			r.Err = s.applyCommand(payload)
		}
	}
	s.state.mu.Lock()
	s.state.applied, s.state.appliedTerm = e.Index, e.Term
	s.state.mu.Unlock()
	return r, nil
}

// applyMessages dispatches each record of a messages payload. A malformed
// record fails it and every later record of the payload, identically on
// every replica.
func (s *Store) applyMessages(payload []byte, base int64) ([]MessageResult, error) {
	var out []MessageResult
	for off := 0; off < len(payload); {
		v, err := message.Parse(payload[off:], false)
		if err != nil {
			out = append(out, MessageResult{Err: fmt.Errorf("%w: record at %d: %w", ErrBadEntry, off, err)})
			break
		}
		phy := base + int64(off)
		rec := payload[off : off+v.Size]
		off += v.Size
		mr, err := s.applyMessage(&v, rec, phy)
		if err != nil {
			return out, err
		}
		out = append(out, mr)
	}
	return out, nil
}

func (s *Store) applyMessage(v *message.View, rec []byte, phy int64) (MessageResult, error) {
	topic := string(v.Topic)
	mr := MessageResult{Topic: topic, QueueID: v.QueueID, PhyOffset: phy, Size: int32(v.Size), StoreTimestamp: v.StoreTimestamp}
	mr.MsgID = message.OffsetMsgID(v.StoreHost, phy)
	uniq, _ := message.PropertyValue(v.Properties, message.PropertyUniqKey)
	mr.UniqKey = uniq
	s.state.mu.RLock()
	tc, ok := s.state.topics[topic]
	s.state.mu.RUnlock()
	switch {
	case !ok:
		mr.Err = fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
		return mr, nil
	case tc.Perm&offsets.PermWrite == 0:
		mr.Err = fmt.Errorf("%w: %q", ErrNotWritable, topic)
		return mr, nil
	case v.QueueID < 0 || v.QueueID >= tc.WriteQueueNums:
		mr.Err = fmt.Errorf("%w: queue %d of %q (%d write queues)", ErrBadQueue, v.QueueID, topic, tc.WriteQueueNums)
		return mr, nil
	}
	if uniq != "" && s.cfg.DedupeWindow > 0 && !s.cfg.Mutants.NoDedupe {
		orig, found, err := s.findByUniqKey(topic, uniq, v.StoreTimestamp, s.cfg.DedupeWindow)
		if err != nil {
			return mr, err
		}
		if found {
			orig.Duplicate = true
			return orig, nil
		}
	}
	k := queueKey{topic, v.QueueID}
	q, err := s.cqs.Queue(topic, v.QueueID, true)
	if err != nil {
		return mr, fmt.Errorf("store: open consume queue: %w", err)
	}
	s.state.mu.Lock()
	qo := s.state.queues[k]
	s.state.queues[k] = qo + 1
	s.state.dirtyQueues[k] = true
	s.state.mu.Unlock()
	tags, _ := message.PropertyValue(v.Properties, message.PropertyTags)
	if err := q.Put(qo, phy, int32(v.Size), message.TagsCode(tags)); err != nil {
		return mr, fmt.Errorf("store: dispatch to consume queue: %w", err)
	}
	mr.QueueOffset = qo
	if uniq != "" {
		if err := s.idx.Put(topic+"#"+uniq, phy, v.StoreTimestamp); err != nil {
			return mr, fmt.Errorf("store: index: %w", err)
		}
	}
	if keys, ok := message.PropertyValue(v.Properties, message.PropertyKeys); ok {
		for _, key := range strings.Fields(keys) {
			if err := s.idx.Put(topic+"#"+key, phy, v.StoreTimestamp); err != nil {
				return mr, fmt.Errorf("store: index: %w", err)
			}
		}
	}
	return mr, nil
}

func (s *Store) applyCommand(payload []byte) error {
	var c Command
	if err := json.Unmarshal(payload, &c); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	switch c.Op {
	case OpCreateTopic:
		if c.Topic == nil {
			return fmt.Errorf("%w: createTopic without topic", ErrBadCommand)
		}
		if err := c.Topic.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		st.topics[c.Topic.TopicName] = *c.Topic
		st.dirtyTopics[c.Topic.TopicName] = true
	case OpDeleteTopic:
		if _, ok := st.topics[c.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
		}
		delete(st.topics, c.Name)
		st.dirtyTopics[c.Name] = true
	case OpUpdateGroup:
		if c.Group == nil {
			return fmt.Errorf("%w: updateGroup without group", ErrBadCommand)
		}
		if err := c.Group.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		st.groups[c.Group.GroupName] = *c.Group
		st.dirtyGroups[c.Group.GroupName] = true
	case OpDeleteGroup:
		delete(st.groups, c.Name)
		st.dirtyGroups[c.Name] = true
	case OpCommitOffsets:
		// Validate all first: a commit applies whole or not at all.
		for _, oc := range c.Offsets {
			if oc.Group == "" || oc.Offset < 0 || oc.QueueID < 0 {
				return fmt.Errorf("%w: offset commit %+v", ErrBadCommand, oc)
			}
			if _, ok := st.topics[oc.Topic]; !ok {
				return fmt.Errorf("%w: %q", ErrUnknownTopic, oc.Topic)
			}
			if max := st.queues[queueKey{oc.Topic, oc.QueueID}]; oc.Offset > max {
				return fmt.Errorf("%w: offset %d beyond queue %s/%d max %d", ErrBadCommand, oc.Offset, oc.Topic, oc.QueueID, max)
			}
		}
		for _, oc := range c.Offsets {
			k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
			st.consumer[k] = oc.Offset
			st.dirtyConsumer[k] = true
		}
	default:
		return fmt.Errorf("%w: unknown op %q", ErrBadCommand, c.Op)
	}
	return nil
}

// findByUniqKey looks for a stored message of topic with UNIQ_KEY uniq whose
// store time is within window of ts. Index hits are re-checked against the
// stored record, so a hash collision never matches.
func (s *Store) findByUniqKey(topic, uniq string, ts int64, window time.Duration) (MessageResult, bool, error) {
	w := window.Milliseconds()
	cands, err := s.idx.Query(topic+"#"+uniq, 64, ts-w, ts+w)
	if err != nil {
		return MessageResult{}, false, fmt.Errorf("store: index query: %w", err)
	}
	for _, phy := range cands {
		rec, err := s.readRecord(phy)
		if err != nil {
			if errors.Is(err, commitlog.ErrBadPosition) {
				continue // retention removed it
			}
			return MessageResult{}, false, err
		}
		v, err := message.Parse(rec, false)
		if err != nil {
			return MessageResult{}, false, fmt.Errorf("store: stored record at %d: %w", phy, err)
		}
		if string(v.Topic) != topic {
			continue
		}
		if u, _ := message.PropertyValue(v.Properties, message.PropertyUniqKey); u != uniq {
			continue
		}
		qo, ok := s.queueOffsetOf(topic, v.QueueID, phy)
		if !ok {
			continue // a rejected send, never queued
		}
		return MessageResult{Topic: topic, QueueID: v.QueueID, QueueOffset: qo, PhyOffset: phy, Size: int32(v.Size),
			StoreTimestamp: v.StoreTimestamp, MsgID: message.OffsetMsgID(v.StoreHost, phy), UniqKey: uniq}, true, nil
	}
	return MessageResult{}, false, nil
}
