package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

type queueKey struct {
	topic string
	queue int32
}

type offsetKey struct {
	group, topic string
	queue        int32
}

// state is the replicated state other than messages, held in memory and
// written to bbolt at each Persist. The apply goroutine writes it; readers
// take mu.
type state struct {
	mu          sync.RWMutex
	applied     uint64
	appliedTerm uint64
	topics      map[string]offsets.TopicConfig
	groups      map[string]offsets.SubscriptionGroupConfig
	consumer    map[offsetKey]int64
	queues      map[queueKey]*int64 // next queue offset to assign; entries never replaced (applyQueue.next)
	sched       map[int32]int64     // next unit to deliver of each schedule queue
	txns        map[int64]txn.Record
	pop         *pop.State
	acl         []byte // access-control state (Config.ApplyACL); nil: none
	// brokerConfig is the group-wide broker settings (OpBrokerConfig);
	// nil: none.
	brokerConfig map[string]string
	recall       schedule.Recalled // recalled scheduled messages
	// levels is each member's announced format level (OpFormatLevel,
	// level.go), replaced whole by each change; nil: none.
	levels map[uint64]uint32

	dirtyTopics       map[string]bool
	dirtyGroups       map[string]bool
	dirtyConsumer     map[offsetKey]bool
	dirtyQueues       map[queueKey]bool
	dirtySched        map[int32]bool
	dirtyTxns         map[int64]bool
	dirtyPop          map[pop.Key]bool
	dirtyACL          bool
	dirtyBrokerConfig bool
	dirtyRecall       bool
	dirtyLevels       bool
	// dirtyGen counts clearDirty calls (from 1), so that Apply marks a
	// queue dirty once per checkpoint (applyQueue.dirtyGen).
	dirtyGen  uint64
	persisted uint64 // applied index at the last persist
}

// nextOffset returns the next queue offset of queue k (0 for a queue that
// never had a message). The caller holds mu.
func (st *state) nextOffset(k queueKey) int64 {
	if p := st.queues[k]; p != nil {
		return *p
	}
	return 0
}

func loadState(db *offsets.DB) (*state, error) {
	st := &state{
		topics:   map[string]offsets.TopicConfig{},
		groups:   map[string]offsets.SubscriptionGroupConfig{},
		consumer: map[offsetKey]int64{},
		queues:   map[queueKey]*int64{},
		sched:    map[int32]int64{},
		txns:     map[int64]txn.Record{},
		pop:      pop.NewState(),
	}
	st.clearDirty()
	err := db.View(func(tx *offsets.Tx) error {
		var err error
		if st.applied, st.appliedTerm, err = tx.AppliedIndex(); err != nil {
			return err
		}
		ts, err := tx.Topics()
		if err != nil {
			return err
		}
		for _, t := range ts {
			st.topics[t.TopicName] = t
		}
		gs, err := tx.SubscriptionGroups()
		if err != nil {
			return err
		}
		for _, g := range gs {
			st.groups[g.GroupName] = g
		}
		if err := tx.ForEachConsumerOffset(func(group, topic string, q int32, off int64) error {
			st.consumer[offsetKey{group, topic, q}] = off
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachQueueOffset(func(topic string, q int32, off int64) error {
			st.queues[queueKey{topic, q}] = &off
			return nil
		}); err != nil {
			return err
		}
		if b, ok := tx.Meta(metaACL); ok {
			st.acl = b
		}
		if b, ok := tx.Meta(metaBrokerConfig); ok {
			if err := json.Unmarshal(b, &st.brokerConfig); err != nil {
				return fmt.Errorf("broker settings: %w", err)
			}
		}
		if b, ok := tx.Meta(metaFormatLevels); ok {
			if st.levels, err = decodeLevels(b); err != nil {
				return err
			}
		}
		if b, ok := tx.Meta(metaRecall); ok {
			if st.recall, err = schedule.DecodeRecalled(b); err != nil {
				return err
			}
		}
		if err := tx.ForEachScheduleOffset(func(q int32, next int64) error {
			st.sched[q] = next
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachTransaction(func(half int64, val []byte) error {
			r, err := txn.DecodeRecord(val)
			if err != nil {
				return fmt.Errorf("transaction at half offset %d: %w", half, err)
			}
			st.txns[half] = r
			return nil
		}); err != nil {
			return err
		}
		return tx.ForEachPopQueue(func(group, topic string, q int32, val []byte) error {
			pq, err := pop.DecodeQueue(val)
			if err != nil {
				return fmt.Errorf("pop state of %s/%s/%d: %w", group, topic, q, err)
			}
			st.pop.Queues[pop.Key{Group: group, Topic: topic, Queue: q}] = pq
			return nil
		})
	})
	st.pop.Reindex()
	if err != nil {
		return nil, fmt.Errorf("store: load state from meta.db: %w", err)
	}
	st.persisted = st.applied
	return st, nil
}

func (st *state) clearDirty() {
	st.dirtyTopics = map[string]bool{}
	st.dirtyGroups = map[string]bool{}
	st.dirtyConsumer = map[offsetKey]bool{}
	st.dirtyQueues = map[queueKey]bool{}
	st.dirtySched = map[int32]bool{}
	st.dirtyTxns = map[int64]bool{}
	st.dirtyPop = map[pop.Key]bool{}
	st.dirtyACL = false
	st.dirtyBrokerConfig = false
	st.dirtyRecall = false
	st.dirtyLevels = false
	st.dirtyGen++
}

// stateDelta is what changed in state since the last checkpoint, copied
// out so that it can be written to bbolt while Apply goes on. A nil map
// value (topics, groups) records a deletion.
type stateDelta struct {
	applied, appliedTerm uint64
	writeApplied         bool
	topics               map[string]*offsets.TopicConfig
	groups               map[string]*offsets.SubscriptionGroupConfig
	consumer             map[offsetKey]int64
	queues               map[queueKey]int64
	sched                map[int32]int64
	txns                 map[int64]*txn.Record // nil: ended
	pop                  map[pop.Key][]byte    // encoded queue state; nil: none
	acl                  []byte                // written when writeACL
	writeACL             bool
	brokerConfig         map[string]string // written when writeBrokerConfig
	writeBrokerConfig    bool
	recall               []byte            // written when not nil
	levels               map[uint64]uint32 // written when writeLevels
	writeLevels          bool
	// prevPersisted is the persisted index before this delta was taken
	// (restoreDelta puts it back).
	prevPersisted uint64
}

// takeDelta copies the dirty state and the applied index and clears the
// dirty marks. The caller holds Store.applyMu, so Apply does not run.
func (st *state) takeDelta() *stateDelta {
	st.mu.Lock()
	defer st.mu.Unlock()
	d := &stateDelta{
		applied: st.applied, appliedTerm: st.appliedTerm,
		writeApplied: st.applied > st.persisted || st.applied == 0,
		topics:       make(map[string]*offsets.TopicConfig, len(st.dirtyTopics)),
		groups:       make(map[string]*offsets.SubscriptionGroupConfig, len(st.dirtyGroups)),
		consumer:     make(map[offsetKey]int64, len(st.dirtyConsumer)),
		queues:       make(map[queueKey]int64, len(st.dirtyQueues)),
		sched:        make(map[int32]int64, len(st.dirtySched)),
		txns:         make(map[int64]*txn.Record, len(st.dirtyTxns)),
		pop:          make(map[pop.Key][]byte, len(st.dirtyPop)),
	}
	for k := range st.dirtyPop {
		if q, ok := st.pop.Queues[k]; ok {
			d.pop[k] = q.Encode()
		} else {
			d.pop[k] = nil
		}
	}
	for name := range st.dirtyTopics {
		var c *offsets.TopicConfig
		if tc, ok := st.topics[name]; ok {
			c = &tc
		}
		d.topics[name] = c
	}
	for name := range st.dirtyGroups {
		var c *offsets.SubscriptionGroupConfig
		if gc, ok := st.groups[name]; ok {
			c = &gc
		}
		d.groups[name] = c
	}
	for k := range st.dirtyConsumer {
		if off, ok := st.consumer[k]; ok {
			d.consumer[k] = off
		}
	}
	for k := range st.dirtyQueues {
		d.queues[k] = st.nextOffset(k)
	}
	for q := range st.dirtySched {
		d.sched[q] = st.sched[q]
	}
	d.acl, d.writeACL = st.acl, st.dirtyACL
	d.brokerConfig, d.writeBrokerConfig = st.brokerConfig, st.dirtyBrokerConfig
	d.levels, d.writeLevels = st.levels, st.dirtyLevels
	if st.dirtyRecall {
		d.recall = st.recall.Encode()
	}
	for h := range st.dirtyTxns {
		var r *txn.Record
		if rec, ok := st.txns[h]; ok {
			r = &rec
		}
		d.txns[h] = r
	}
	d.prevPersisted = st.persisted
	st.clearDirty()
	st.persisted = st.applied
	return d
}

// write commits the delta and the index checkpoint to db in one
// transaction. Store.persistMu orders the deltas: each is written before
// the next is taken.
func (d *stateDelta) write(db *offsets.DB, indexCheckpoint []byte, journal *journalMark) error {
	err := db.Update(func(tx *offsets.Tx) error {
		for name, c := range d.topics {
			if c != nil {
				if err := tx.PutTopic(*c); err != nil {
					return err
				}
			} else if _, err := tx.DeleteTopic(name); err != nil {
				return err
			}
		}
		for name, c := range d.groups {
			if c != nil {
				if err := tx.PutSubscriptionGroup(*c); err != nil {
					return err
				}
			} else if _, err := tx.DeleteSubscriptionGroup(name); err != nil {
				return err
			}
		}
		for k, off := range d.consumer {
			if err := tx.SetConsumerOffset(k.group, k.topic, k.queue, off); err != nil {
				return err
			}
		}
		for k, off := range d.queues {
			if err := tx.SetQueueOffset(k.topic, k.queue, off); err != nil {
				return err
			}
		}
		if d.writeBrokerConfig {
			b, err := json.Marshal(d.brokerConfig)
			if err != nil {
				return err
			}
			if err := tx.SetMeta(metaBrokerConfig, b); err != nil {
				return err
			}
		}
		if d.writeLevels {
			b, err := encodeLevels(d.levels)
			if err != nil {
				return err
			}
			if err := tx.SetMeta(metaFormatLevels, b); err != nil {
				return err
			}
		}
		if d.recall != nil {
			if err := tx.SetMeta(metaRecall, d.recall); err != nil {
				return err
			}
		}
		if d.writeACL {
			if err := tx.SetMeta(metaACL, d.acl); err != nil {
				return err
			}
		}
		for q, next := range d.sched {
			if err := tx.SetScheduleOffset(q, next); err != nil {
				return err
			}
		}
		for h, r := range d.txns {
			if r == nil {
				if err := tx.DeleteTransaction(h); err != nil {
					return err
				}
			} else if err := tx.PutTransaction(h, r.Encode()); err != nil {
				return err
			}
		}
		for k, v := range d.pop {
			if v == nil {
				if err := tx.DeletePopQueue(k.Group, k.Topic, k.Queue); err != nil {
					return err
				}
			} else if err := tx.PutPopQueue(k.Group, k.Topic, k.Queue, v); err != nil {
				return err
			}
		}
		if err := tx.SetMeta(metaIndexCheckpoint, indexCheckpoint); err != nil {
			return err
		}
		if journal != nil {
			if err := tx.SetMeta(metaTailJournal, journal.encode()); err != nil {
				return err
			}
		}
		if d.writeApplied {
			return tx.SetApplied(d.applied, d.appliedTerm)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: persist state: %w", err)
	}
	return nil
}

// Topic returns a topic's config.
func (s *Store) Topic(name string) (offsets.TopicConfig, bool) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	c, ok := s.state.topics[name]
	return c, ok
}

// Topics returns every topic, sorted by name.
func (s *Store) Topics() []offsets.TopicConfig {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	out := make([]offsets.TopicConfig, 0, len(s.state.topics))
	for _, c := range s.state.topics {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TopicName < out[j].TopicName })
	return out
}

// SubscriptionGroup returns a group's config.
func (s *Store) SubscriptionGroup(name string) (offsets.SubscriptionGroupConfig, bool) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	c, ok := s.state.groups[name]
	return c, ok
}

// SubscriptionGroups returns every subscription group's config, sorted by
// name.
func (s *Store) SubscriptionGroups() []offsets.SubscriptionGroupConfig {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	out := make([]offsets.SubscriptionGroupConfig, 0, len(s.state.groups))
	for _, c := range s.state.groups {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	return out
}

// ConsumerOffset returns a group's committed next offset in a queue.
func (s *Store) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	off, ok := s.state.consumer[offsetKey{group, topic, queueID}]
	return off, ok
}

// ConsumerOffsets lists a group's committed offsets in a topic.
func (s *Store) ConsumerOffsets(group, topic string) map[int32]int64 {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	out := map[int32]int64{}
	for k, v := range s.state.consumer {
		if k.group == group && k.topic == topic {
			out[k.queue] = v
		}
	}
	return out
}

// Recalled reports whether the scheduled message of topic with UNIQ_KEY
// id was recalled (schedule.Recalled).
func (s *Store) Recalled(topic, id string) bool {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.recall.Has(topic, id)
}

// ScheduleOffset returns the next unit to deliver of schedule queue q.
func (s *Store) ScheduleOffset(q int32) int64 {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.sched[q]
}

// PendingTxn is a pending transaction and its half message's queue offset.
type PendingTxn struct {
	HalfOffset int64
	txn.Record
}

// PendingTransactions lists the pending transactions by half offset.
func (s *Store) PendingTransactions() []PendingTxn {
	s.state.mu.RLock()
	out := make([]PendingTxn, 0, len(s.state.txns))
	for h, r := range s.state.txns {
		out = append(out, PendingTxn{HalfOffset: h, Record: r})
	}
	s.state.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].HalfOffset < out[j].HalfOffset })
	return out
}

// PendingTransaction returns the pending transaction of a half offset.
func (s *Store) PendingTransaction(halfOffset int64) (txn.Record, bool) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	r, ok := s.state.txns[halfOffset]
	return r, ok
}

// ACL returns the access-control state (nil if none) and its version
// (ACLVersion).
func (s *Store) ACL() ([]byte, uint64) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.acl, s.aclVersion.Load()
}

// ACLVersion changes whenever the access-control state does (an applied
// OpACL, a snapshot installed); without a lock, for a per-request check.
func (s *Store) ACLVersion() uint64 { return s.aclVersion.Load() }

// BrokerConfig returns the group-wide broker settings (OpBrokerConfig), a
// copy, and a version that changes whenever they do.
func (s *Store) BrokerConfig() (map[string]string, uint64) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return maps.Clone(s.state.brokerConfig), s.brokerConfigVersion.Load()
}

// BrokerConfigVersion is BrokerConfig's version, without the copy.
func (s *Store) BrokerConfigVersion() uint64 { return s.brokerConfigVersion.Load() }

// PopQueue returns a copy of a group's pop state in a queue.
func (s *Store) PopQueue(k pop.Key) (*pop.Queue, bool) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	q, ok := s.state.pop.Queues[k]
	if !ok {
		return nil, false
	}
	return q.Clone(), true
}

// PopDue lists the records hidden past their visible-again time at nowMs,
// by queue, at most limit in all (package pop).
func (s *Store) PopDue(nowMs int64, limit int) map[pop.Key][]pop.Record {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.pop.Due(nowMs, limit)
}

// PopGone lists, by queue, up to limit records (hidden or revived) whose
// message retention has deleted: their offset is below the queue's first
// readable offset. They can be delivered no more; the leader proposes
// their drop (pop.OpDrop). skip, if not nil, passes over a queue given its
// first readable offset (the caller's record of queues it found clean at
// that offset), so that a scan walks the records of the queues retention
// moved only. walked returns the first readable offset of each queue
// whose records were walked.
func (s *Store) PopGone(limit int, skip func(k pop.Key, minOffset int64) bool) (gone map[pop.Key][]pop.Record, walked map[pop.Key]int64) {
	s.state.mu.RLock()
	keys := make([]pop.Key, 0, len(s.state.pop.Queues))
	for k, q := range s.state.pop.Queues {
		if len(q.InFlight) > 0 {
			keys = append(keys, k)
		}
	}
	s.state.mu.RUnlock()
	gone, walked = map[pop.Key][]pop.Record{}, map[pop.Key]int64{}
	n := 0
	for _, k := range keys {
		if n >= limit {
			break
		}
		minOff := s.MinOffset(k.Topic, k.Queue)
		if skip != nil && skip(k, minOff) {
			continue
		}
		walked[k] = minOff
		var recs []pop.Record
		s.state.mu.RLock()
		if q, ok := s.state.pop.Queues[k]; ok {
			for off, r := range q.InFlight {
				if off < minOff {
					recs = append(recs, *r)
				}
			}
		}
		s.state.mu.RUnlock()
		if len(recs) == 0 {
			continue
		}
		slices.SortFunc(recs, func(a, b pop.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		if len(recs) > limit-n {
			recs = recs[:limit-n]
		}
		gone[k] = recs
		n += len(recs)
	}
	return gone, walked
}

// PopInFlight counts, by topic and queue, a group's messages in flight
// (popped and neither acked nor dead-lettered).
func (s *Store) PopInFlight(group string) map[pop.Key]int {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	out := map[pop.Key]int{}
	for k, q := range s.state.pop.Queues {
		if k.Group == group && len(q.InFlight) > 0 {
			out[k] = len(q.InFlight)
		}
	}
	return out
}

// PopTotals returns the number of queues with pop state and of messages
// in flight over all of them.
func (s *Store) PopTotals() (queues, inFlight int) {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	for _, q := range s.state.pop.Queues {
		inFlight += len(q.InFlight)
	}
	return len(s.state.pop.Queues), inFlight
}

// PopView is what a pop of a queue needs of its state (Store.PopView).
type PopView struct {
	Exists bool  // the queue has pop state
	Next   int64 // its cursor
	Busy   bool  // a record is hidden (pop.Queue.Busy)
	// Revived are up to n revived records popped before nowMs, by offset.
	Revived []pop.Record
}

// PopView returns a group's pop state of a queue as a pop needs it,
// without copying every record.
func (s *Store) PopView(k pop.Key, n int, nowMs int64) PopView {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	q, ok := s.state.pop.Queues[k]
	if !ok {
		return PopView{}
	}
	return PopView{Exists: true, Next: q.Next, Busy: q.Busy(), Revived: q.RevivedBefore(n, nowMs)}
}

// PopHidden returns, by offset, a group's hidden records of a queue
// (popped, not acked, not revived).
func (s *Store) PopHidden(k pop.Key) []pop.Record {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	q, ok := s.state.pop.Queues[k]
	if !ok {
		return nil
	}
	return q.Hidden()
}
