package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// Result is the outcome of applying one entry.
type Result struct {
	Index, Term uint64
	BatchID     uint64
	Kind        byte            // 0 for no-ops and conf changes
	Messages    []MessageResult // for KindMessages (and the records of other kinds)
	// Pop holds a pop entry's results, one per op (package pop).
	Pop []pop.Result
	Err error // for a command, or a malformed entry
}

// MessageResult is where one message landed.
type MessageResult struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhyOffset      int64
	Size           int32
	StoreTimestamp int64
	StoreHost      netip.AddrPort
	UniqKey        string
	// Duplicate: the UNIQ_KEY was already stored within the dedupe window;
	// the fields describe the original, and nothing new was queued.
	Duplicate bool
	Err       error
	// topic is Apply's record of Topic, for TopicAux; nil for a message
	// not stored.
	topic *applyTopic
}

// TopicAux returns a slot in which the node answering the send keeps what
// it needs of the message's topic on every send (its per-topic counters),
// so that a send costs no lookup by name: the same slot for every message
// of the topic until the topic is deleted or made again, when a new,
// empty one replaces it. Nil for a message that was not stored (an error,
// a duplicate). Its value is the caller's; Store never reads it.
func (r *MessageResult) TopicAux() *atomic.Value {
	if r.topic == nil {
		return nil
	}
	return &r.topic.aux
}

// MsgID returns the message's offsetMsgId. It is computed on demand: only
// the node answering the send needs it.
func (r *MessageResult) MsgID() string { return message.OffsetMsgID(r.StoreHost, r.PhyOffset) }

// applyChunk bounds the entry bytes read from the log at a time (copied, or
// aliasing its tail cache).
const applyChunk = 8 << 20

// applyBatch is Apply's scratch state between two flushes of the consume
// queues; guarded by Store.applyMu.
//
// Apply buffers consume-queue units (Queue.PutBuffered) and publishes them
// (Queue.Flush) at the end of each chunk of entries: from then on readers
// see them, served from the queue's memory until the queue writes them in
// whole pages or at the next checkpoint (consumequeue's OwnerSyncsFS). Until
// the flush they are invisible, and the applied index does not move past
// their entries (see Apply).
type applyBatch struct {
	// queues are the consume queues holding buffered units, each once
	// (applyQueue.batchGen).
	queues []*consumequeue.Queue
	// gen counts flushes (from 1, set by Open): a queue is in queues when
	// its applyQueue.batchGen is gen.
	gen uint64
	// queued lists the messages with a UNIQ_KEY queued since the last flush,
	// in physical-offset order. Their units are not in the consume queues
	// yet, so queueOffsetOf cannot find them; deduplication looks here
	// first, so that a retry in the same batch as its original is still
	// recognised.
	queued []queuedMsg
	// topics is what Apply keeps of each topic it applied messages to, so
	// that a message costs one map lookup, not one per table (topic config,
	// consume queue, queue offset, dirty marks, this batch): with thousands
	// of queues each lookup is a cache miss. It holds existing topics only.
	topics map[string]*applyTopic
}

// applyTopic is Apply's copy of a topic's config, valid while
// Store.topicsVersion is version (every change of the topic table bumps it
// under applyMu, which Apply holds), and its queues.
type applyTopic struct {
	// name is the topic, shared by the results of all its messages (no
	// string allocated per message).
	name string
	// uniqPrefix is the Java hash of name + "#", the index key of a
	// UNIQ_KEY without the key (index.KeyHash): no key built per message.
	uniqPrefix  int32
	version     uint64
	perm        int32
	writeQueues int32
	// touchGen is the Store.touchGen in which the topic was last listed
	// in Store.touched.
	touchGen uint64
	// queues, by queue id, holds at least writeQueues slots.
	queues []applyQueue
	// aux is what the node answering sends keeps of the topic
	// (MessageResult.TopicAux): a new record, with aux empty, replaces
	// this one when the topic is deleted and made again.
	aux atomic.Value
}

// applyQueue is Apply's handle on one consume queue. A Set never forgets
// a queue it opened, so q stays valid for the Store's life.
type applyQueue struct {
	q *consumequeue.Queue // nil until the queue's first unit
	// next is the queue's entry in state.queues, nil until Apply first
	// needs it after the topic record was made (applyTopicOf clears it
	// whenever the topic table's version moves, as a snapshot replaces
	// state.queues), so that a message costs no lookup in that map.
	next *int64
	// dirtyGen is the state.dirtyGen in which the queue was last marked
	// dirty: it is in state.dirtyQueues when the two are equal.
	dirtyGen uint64
	// batchGen is the applyBatch.gen in which the queue was last added to
	// applyBatch.queues.
	batchGen uint64
}

type queuedMsg struct{ phy, queueOffset int64 }

// queueOffset returns the queue offset of a message queued since the last
// flush, by physical offset.
func (b *applyBatch) queueOffset(phy int64) (int64, bool) {
	i, ok := slices.BinarySearchFunc(b.queued, phy, func(m queuedMsg, phy int64) int { return cmp.Compare(m.phy, phy) })
	if !ok {
		return 0, false
	}
	return b.queued[i].queueOffset, true
}

// Apply applies committed entries up to and including upTo, in order, and
// returns one Result per entry. Call it from one goroutine. It fails only on
// a storage error, after which the node must stop: the failure is sticky,
// and later calls to Apply and Persist return it, so that no checkpoint can
// cover a half-applied entry or an unwritten unit.
//
// Entries are read from the log in chunks of up to applyChunk bytes. The
// consume-queue units of a chunk are published when the chunk is done, and
// only then does the applied index (AppliedIndex) move to its last entry: a
// caller or reader told that an entry is applied can read its messages. A
// storage error in the middle of a chunk still writes, and publishes, the
// entries before the one that failed; if writing the units fails, the
// results of the chunk are not returned.
func (s *Store) Apply(upTo uint64) ([]Result, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.applyErr != nil {
		return nil, fmt.Errorf("store: refusing to apply after an earlier failure: %w", s.applyErr)
	}
	if err := s.persistFailure(); err != nil {
		return nil, fmt.Errorf("store: refusing to apply after a failed checkpoint: %w", err)
	}
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
		before := len(results)
		var last *commitlog.Entry // the last entry applied whole
		var aerr error
		for i := range ents {
			r, err := s.applyEntry(&ents[i])
			if err != nil {
				aerr = err
				break
			}
			results = append(results, r)
			last = &ents[i]
		}
		if err := s.flushQueuesLocked(); err != nil {
			s.applyErr = errors.Join(aerr, err)
			return results[:before], s.applyErr
		}
		if last != nil {
			s.state.mu.Lock()
			s.state.applied, s.state.appliedTerm = last.Index, last.Term
			s.state.mu.Unlock()
		}
		if aerr != nil {
			s.applyErr = aerr
			return results, aerr
		}
	}
	if len(results) > 0 {
		s.notifyApplied()
	}
	every := time.Duration(s.persistEvery.Load())
	if every == 0 {
		every = s.cfg.PersistInterval
	}
	if time.Since(s.lastPersist) >= every {
		s.lastPersist = time.Now()
		s.kickPersist()
	}
	return results, nil
}

// flushQueuesLocked publishes the units buffered since the last call (the
// queues write them to their files in whole pages, or at the next
// checkpoint) and resets the batch. The queues' errors are
// sticky.
func (s *Store) flushQueuesLocked() error {
	b := &s.batch
	var errs []error
	for _, q := range b.queues {
		if err := q.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("store: write consume queue: %w", err))
		}
	}
	clear(b.queues)
	b.queues = b.queues[:0]
	b.gen++
	b.queued = b.queued[:0]
	return errors.Join(errs...)
}

// applyEntry applies one entry. The caller publishes it as applied.
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
			r.Messages, err = s.applyMessages(payload, base, true)
			if err != nil {
				return r, err
			}
		case kind == KindCommand:
			r.Err = s.applyCommand(payload)
		case kind == KindSchedule:
			r.Messages, r.Err, err = s.applyDelivery(payload, e.Pos+commitlog.HeaderSize+BodyHeaderSize)
			if err != nil {
				return r, err
			}
		case kind == KindTxn:
			r.Messages, r.Err, err = s.applyTxn(payload, e.Pos+commitlog.HeaderSize+BodyHeaderSize)
			if err != nil {
				return r, err
			}
		case kind == KindPop:
			r.Pop, r.Messages, r.Err, err = s.applyPop(payload, e.Pos+commitlog.HeaderSize+BodyHeaderSize)
			if err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// applyMessages dispatches each record of a messages payload. A malformed
// record fails it and every later record of the payload, identically on
// every replica. dedupe is false for the records of schedule and
// transaction entries, which apply at most once by their own rule.
func (s *Store) applyMessages(payload []byte, base int64, dedupe bool) ([]MessageResult, error) {
	out := make([]MessageResult, 0, message.CountRecords(payload)) // one result per record, and one for a bad tail
	for off := 0; off < len(payload); {
		v, err := message.Parse(payload[off:], false)
		if err != nil {
			out = append(out, MessageResult{Err: fmt.Errorf("%w: record at %d: %w", ErrBadEntry, off, err)})
			break
		}
		phy := base + int64(off)
		off += v.Size
		mr, err := s.applyMessage(&v, phy, dedupe)
		if err != nil {
			return out, err
		}
		out = append(out, mr)
	}
	return out, nil
}

func (s *Store) applyMessage(v *message.View, phy int64, dedupeOK bool) (MessageResult, error) {
	t := s.applyTopicOf(v.Topic)
	var topic string
	if t != nil {
		topic = t.name
	} else {
		topic = string(v.Topic)
	}
	mr := MessageResult{Topic: topic, QueueID: v.QueueID, PhyOffset: phy, Size: int32(v.Size), StoreTimestamp: v.StoreTimestamp, StoreHost: v.StoreHost}
	uniq, _ := message.PropertyValue(v.Properties, message.PropertyUniqKey)
	mr.UniqKey = uniq
	switch {
	case t == nil:
		mr.Err = fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
		return mr, nil
	case t.perm&offsets.PermWrite == 0:
		mr.Err = fmt.Errorf("%w: %q", ErrNotWritable, topic)
		return mr, nil
	case v.QueueID < 0 || v.QueueID >= t.writeQueues:
		mr.Err = fmt.Errorf("%w: queue %d of %q (%d write queues)", ErrBadQueue, v.QueueID, topic, t.writeQueues)
		return mr, nil
	}
	var uniqHash int32 // the index hash of the UNIQ_KEY (key topic#uniq), for the lookup and the Put
	if uniq != "" {
		uniqHash = index.KeyHash(t.uniqPrefix, uniq)
	}
	dedupe := dedupeOK && uniq != "" && s.cfg.DedupeWindow > 0
	if failpoint.On(s.cfg.Failpoints, failpoint.NoDedupe) {
		dedupe = noDedupe(dedupe)
	}
	if dedupe {
		orig, found, err := s.findByUniqKey(topic, uniq, uniqHash, v.ReconsumeTimes, v.StoreTimestamp, s.cfg.DedupeWindow)
		if err != nil {
			return mr, err
		}
		if found {
			orig.Duplicate = true
			return orig, nil
		}
	}
	var tagsCode int64
	if topic == schedule.Topic {
		// A schedule unit carries its release time (package schedule).
		tagsCode = schedule.Release(v.QueueID, v.StoreTimestamp)
	} else {
		tags, _ := message.PropertyBytes(v.Properties, message.PropertyTags)
		tagsCode = message.TagsCodeBytes(tags)
	}
	qo, err := s.enqueue(t, v.QueueID, phy, int32(v.Size), tagsCode)
	if err != nil {
		return mr, err
	}
	mr.topic = t
	if t.touchGen != s.touchGen+1 {
		t.touchGen = s.touchGen + 1 // zero in a new record
		s.touch(topic)
	}
	if topic == txn.HalfTopic {
		group, _ := message.PropertyValue(v.Properties, message.PropertyProducerGroup)
		var immunity int64
		if sec, ok := message.PropertyValue(v.Properties, message.PropertyCheckImmunityTimeSeconds); ok {
			if n, err := strconv.ParseInt(sec, 10, 64); err == nil && n > 0 && n < 1<<31 {
				immunity = n * 1000
			}
		}
		s.state.mu.Lock()
		s.state.txns[qo] = txn.Record{Phy: phy, Size: int32(v.Size), StoreMs: v.StoreTimestamp, ImmunityMs: immunity, Group: group}
		s.state.dirtyTxns[qo] = true
		s.state.mu.Unlock()
	}
	if dedupe {
		s.batch.queued = append(s.batch.queued, queuedMsg{phy: phy, queueOffset: qo})
	}
	mr.QueueOffset = qo
	if uniq != "" {
		if err := s.idx.PutHash(uniqHash, phy, v.StoreTimestamp); err != nil {
			return mr, fmt.Errorf("store: index: %w", err)
		}
	}
	if keys, ok := message.PropertyBytes(v.Properties, message.PropertyKeys); ok {
		// Split on spaces only, as RocketMQ's index and Message.Keys do: a
		// tab is part of a key.
		for key := range bytes.SplitSeq(keys, []byte(message.KeySeparator)) {
			if len(key) == 0 {
				continue
			}
			if err := s.idx.Put(topic+"#"+string(key), phy, v.StoreTimestamp); err != nil {
				return mr, fmt.Errorf("store: index: %w", err)
			}
		}
	}
	return mr, nil
}

// applyTopicOf returns Apply's record of the topic named name, nil if
// there is no such topic. It reads the topic table only when the table
// changed since the record was made.
func (s *Store) applyTopicOf(name []byte) *applyTopic {
	b := &s.batch
	ver := s.topicsVersion.Load()
	t := b.topics[string(name)] // no allocation
	if t != nil && t.version == ver {
		return t
	}
	s.state.mu.RLock()
	tc, ok := s.state.topics[string(name)]
	s.state.mu.RUnlock()
	if !ok {
		if t != nil {
			delete(b.topics, t.name)
		}
		return nil
	}
	if t == nil {
		if b.topics == nil {
			b.topics = make(map[string]*applyTopic)
		}
		t = &applyTopic{name: tc.TopicName, uniqPrefix: message.JavaHashCode(tc.TopicName + "#")}
		b.topics[t.name] = t
	}
	t.version, t.perm, t.writeQueues = ver, tc.Perm, tc.WriteQueueNums
	for i := range t.queues {
		t.queues[i].next = nil
	}
	if n := int(tc.WriteQueueNums); n > len(t.queues) {
		t.queues = append(t.queues, make([]applyQueue, n-len(t.queues))...)
	}
	return t
}

// enqueue appends a unit to a consume queue of t (queueID is one of its
// write queues), buffered until the chunk's flush, and returns its queue
// offset.
func (s *Store) enqueue(t *applyTopic, queueID int32, phy int64, size int32, tagsCode int64) (int64, error) {
	h := &t.queues[queueID]
	if h.q == nil {
		q, err := s.cqs.Queue(t.name, queueID, true)
		if err != nil {
			return 0, fmt.Errorf("store: open consume queue: %w", err)
		}
		h.q = q
	}
	st := s.state
	st.mu.Lock()
	if h.next == nil {
		k := queueKey{t.name, queueID}
		if h.next = st.queues[k]; h.next == nil {
			h.next = new(int64)
			st.queues[k] = h.next
		}
	}
	qo := *h.next
	*h.next = qo + 1
	if h.dirtyGen != st.dirtyGen {
		st.dirtyQueues[queueKey{t.name, queueID}] = true
		h.dirtyGen = st.dirtyGen
	}
	st.mu.Unlock()
	if err := h.q.PutBuffered(qo, phy, size, tagsCode); err != nil {
		return 0, fmt.Errorf("store: dispatch to consume queue: %w", err)
	}
	if b := &s.batch; h.batchGen != b.gen {
		h.batchGen = b.gen
		b.queues = append(b.queues, h.q)
	}
	return qo, nil
}

// applyDelivery applies a schedule entry (package schedule): when it starts
// at its queue's cursor, its records (messages delivered to their topics,
// and hops: copies to another schedule queue) are applied as messages and
// the cursor moves past its units. Otherwise nothing changes and the
// result says why (resErr). err is a storage error.
func (s *Store) applyDelivery(payload []byte, base int64) (msgs []MessageResult, resErr, err error) {
	d, recs, derr := schedule.DecodeDelivery(payload)
	if derr != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEntry, derr), nil
	}
	st := s.state
	st.mu.RLock()
	cur, end := st.sched[d.Queue], st.nextOffset(queueKey{schedule.Topic, d.Queue})
	st.mu.RUnlock()
	if failpoint.On(s.cfg.Failpoints, failpoint.ScheduleInMemory) {
		cur = scheduleInMemory(cur, d)
	}
	switch {
	case d.From != cur:
		return nil, fmt.Errorf("%w: queue %d is at %d, the entry starts at %d", ErrScheduleMoved, d.Queue, cur, d.From), nil
	case d.From+int64(d.Count) > end:
		return nil, fmt.Errorf("%w: delivery of %d units from %d of schedule queue %d, which ends at %d", ErrBadEntry, d.Count, d.From, d.Queue, end), nil
	case message.CountRecords(recs)+int(d.Skips) != int(d.Count):
		return nil, fmt.Errorf("%w: delivery of %d units carries %d records and %d skips", ErrBadEntry, d.Count, message.CountRecords(recs), d.Skips), nil
	}
	if err := recalledIn(st, recs); err != nil {
		return nil, err, nil
	}
	msgs, err = s.applyMessages(recs, base+int64(len(payload)-len(recs)), false)
	if err != nil {
		return msgs, nil, err
	}
	st.mu.Lock()
	st.sched[d.Queue] = max(st.sched[d.Queue], cur+int64(d.Count))
	st.dirtySched[d.Queue] = true
	if st.recall.Delivered(d.Now) {
		st.dirtyRecall = true
	}
	st.mu.Unlock()
	return msgs, nil, nil
}

// recalledIn returns ErrScheduleMoved when a record of a delivery entry
// delivers (not hops) a recalled message: the leader built it before the
// recall applied, and builds it again without it.
func recalledIn(st *state, recs []byte) error {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.recall.Len() == 0 {
		return nil
	}
	for off := 0; off < len(recs); {
		v, err := message.Parse(recs[off:], false)
		if err != nil {
			return fmt.Errorf("%w: delivery record at %d: %w", ErrBadEntry, off, err)
		}
		off += v.Size
		if string(v.Topic) == schedule.Topic {
			continue
		}
		if id, ok := message.PropertyValue(v.Properties, message.PropertyUniqKey); ok && st.recall.Has(string(v.Topic), id) {
			return fmt.Errorf("%w: message %s of %s was recalled", ErrScheduleMoved, id, v.Topic)
		}
	}
	return nil
}

// applyTxn applies a transaction entry (package txn) to a pending
// transaction: a check is counted; a commit, rollback or discard ends it
// and applies its records (the real message, the op message). For a
// transaction not pending nothing changes (resErr). err is a storage error.
func (s *Store) applyTxn(payload []byte, base int64) (msgs []MessageResult, resErr, err error) {
	op, recs, derr := txn.DecodeOp(payload)
	if derr != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEntry, derr), nil
	}
	st := s.state
	st.mu.Lock()
	rec, ok := st.txns[op.HalfOffset]
	if !ok {
		st.mu.Unlock()
		return nil, fmt.Errorf("%w: half offset %d (%v)", ErrTxnNotPending, op.HalfOffset, op.Action), nil
	}
	if op.Action == txn.Check {
		rec.Checks++
		rec.LastCheckMs = op.Now
		st.txns[op.HalfOffset] = rec
	} else {
		delete(st.txns, op.HalfOffset)
	}
	st.dirtyTxns[op.HalfOffset] = true
	st.mu.Unlock()
	if op.Action == txn.Check || len(recs) == 0 {
		return nil, nil, nil
	}
	msgs, err = s.applyMessages(recs, base+int64(len(payload)-len(recs)), false)
	return msgs, nil, err
}

// applyPop applies a pop entry (package pop): each op in turn, against
// the replicated pop state; the record of a revive that moves its message
// to the dead-letter topic is stored only if the revive applied. Each
// queue whose state changed also moves its group's consumer offset forward
// to the queue's low water (pop.Queue.LowWater), so that pull-side tools
// (progress, lag, a later pull consumer) see what pop consumers finished.
// Apply-time failures are per op (pop.Result.Err); resErr is a malformed
// entry, nothing of which applies; err is a storage error.
func (s *Store) applyPop(payload []byte, base int64) (pops []pop.Result, msgs []MessageResult, resErr, err error) {
	b, recs, derr := pop.DecodeBatch(payload)
	if derr != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadEntry, derr), nil
	}
	dlqs := 0
	for i := range b.Ops {
		if b.Ops[i].DLQ {
			dlqs++
		}
	}
	if n := message.CountRecords(recs); n != dlqs {
		return nil, nil, fmt.Errorf("%w: pop entry with %d dead-letter revives carries %d records", ErrBadEntry, dlqs, n), nil
	}
	pops = make([]pop.Result, len(b.Ops))
	st := s.state
	st.mu.Lock()
	for i := range b.Ops {
		o := &b.Ops[i]
		if err := offsets.CheckGroupName(o.Group); err != nil {
			pops[i].Err = fmt.Errorf("%w: %w", pop.ErrBadOp, err)
			continue
		}
		if _, ok := st.topics[o.Topic]; !ok {
			pops[i].Err = fmt.Errorf("%w: %q", ErrUnknownTopic, o.Topic)
			continue
		}
		if o.Queue < 0 {
			pops[i].Err = fmt.Errorf("%w: queue %d", pop.ErrBadOp, o.Queue)
			continue
		}
		if failpoint.On(s.cfg.Failpoints, failpoint.ReviveEarly) {
			reviveEarly(o)
		}
		s.touch(o.Topic)
		r := st.pop.ApplyOp(b.Now, o)
		pops[i] = r
		k := o.Key()
		if _, ok := st.pop.Queues[k]; !ok {
			continue
		}
		st.dirtyPop[k] = true
		ok := offsetKey{o.Group, o.Topic, o.Queue}
		if cur, has := st.consumer[ok]; !has || r.LowWater > cur {
			st.consumer[ok] = r.LowWater
			st.dirtyConsumer[ok] = true
		}
	}
	st.mu.Unlock()
	if dlqs == 0 {
		return pops, nil, nil, nil
	}
	recBase := base + int64(len(payload)-len(recs))
	off := 0
	for i := range b.Ops {
		if !b.Ops[i].DLQ {
			continue
		}
		v, perr := message.Parse(recs[off:], false)
		if perr != nil {
			// Counted above, so it parses; keep the check for safety.
			return pops, msgs, fmt.Errorf("%w: dead-letter record at %d: %w", ErrBadEntry, off, perr), nil
		}
		phy := recBase + int64(off)
		off += v.Size
		if !pops[i].DLQ {
			continue // the revive did not apply: its copy is not stored
		}
		mr, err := s.applyMessage(&v, phy, false)
		if err != nil {
			return pops, msgs, nil, err
		}
		msgs = append(msgs, mr)
	}
	return pops, msgs, nil, nil
}

func (s *Store) applyCommand(payload []byte) error {
	var c Command
	if err := json.Unmarshal(payload, &c); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if c.Op == OpCommitOffsets {
		for _, o := range c.Offsets {
			s.touch(o.Topic)
		}
	} else if c.Op != OpFormatLevel {
		s.touchAll = true // configuration: any topic's pops may see it
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
		s.topicsVersion.Add(1)
	case OpDeleteTopic:
		if _, ok := st.topics[c.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
		}
		delete(st.topics, c.Name)
		st.dirtyTopics[c.Name] = true
		s.topicsVersion.Add(1)
	case OpRecall:
		if c.Recall == nil {
			return fmt.Errorf("%w: recall without its message", ErrBadCommand)
		}
		if err := st.recall.Apply(*c.Recall); err != nil {
			return err
		}
		st.dirtyRecall = true
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
	case OpCommitOffsets, OpAdvanceOffsets:
		// Validate all first: a commit applies whole or not at all.
		for _, oc := range c.Offsets {
			if oc.Group == "" || oc.Offset < 0 || oc.QueueID < 0 {
				return fmt.Errorf("%w: offset commit %+v", ErrBadCommand, oc)
			}
			// A name the offsets table would refuse at the checkpoint
			// must be refused here, or every checkpoint after it fails.
			if err := offsets.CheckGroupName(oc.Group); err != nil {
				return fmt.Errorf("%w: offset commit: %w", ErrBadCommand, err)
			}
			if _, ok := st.topics[oc.Topic]; !ok {
				return fmt.Errorf("%w: %q", ErrUnknownTopic, oc.Topic)
			}
			if max := st.nextOffset(queueKey{oc.Topic, oc.QueueID}); oc.Offset > max {
				return fmt.Errorf("%w: offset %d beyond queue %s/%d max %d", ErrBadCommand, oc.Offset, oc.Topic, oc.QueueID, max)
			}
		}
		for _, oc := range c.Offsets {
			k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
			if cur, ok := st.consumer[k]; ok && c.Op == OpAdvanceOffsets && oc.Offset <= cur {
				continue
			}
			st.consumer[k] = oc.Offset
			st.dirtyConsumer[k] = true
		}
	case OpImportConfig:
		return s.applyImportLocked(&c)
	case OpFormatLevel:
		return st.applyFormatLevelLocked(&c)
	case OpACL:
		if s.cfg.ApplyACL == nil {
			return fmt.Errorf("%w: access control is not supported by this store", ErrBadCommand)
		}
		next, err := s.cfg.ApplyACL(st.acl, c.ACL)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		st.acl = next
		st.dirtyACL = true
		s.aclVersion.Add(1)
	case OpBrokerConfig:
		if len(c.Settings) == 0 {
			return fmt.Errorf("%w: brokerConfig without settings", ErrBadCommand)
		}
		for k, v := range c.Settings {
			if k == "" || strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
				return fmt.Errorf("%w: broker setting %q=%q", ErrBadCommand, k, v)
			}
		}
		next := maps.Clone(st.brokerConfig)
		if next == nil {
			next = map[string]string{}
		}
		for k, v := range c.Settings {
			if v == "" {
				delete(next, k)
			} else {
				next[k] = v
			}
		}
		st.brokerConfig = next
		st.dirtyBrokerConfig = true
		s.brokerConfigVersion.Add(1)
	default:
		return fmt.Errorf("%w: unknown op %q", ErrBadCommand, c.Op)
	}
	return nil
}

// findByUniqKey looks for a stored message of topic with UNIQ_KEY uniq (index
// key topic#uniq, of hash h) and reconsume count reconsume whose store time is within
// window of ts. Index hits are
// re-checked against the stored record, so a hash collision never matches.
// The index serves entries put earlier in the same Apply from its write
// buffer, and applyBatch the queue offsets of their still-buffered units.
// After the index, it consults the dedupe table of an installed snapshot.
func (s *Store) findByUniqKey(topic, uniq string, h int32, reconsume int32, ts int64, window time.Duration) (MessageResult, bool, error) {
	w := window.Milliseconds()
	cands, err := s.idx.QueryHash(h, 64, ts-w, ts+w)
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
		if v.ReconsumeTimes != reconsume {
			// A retry of a message keeps its UNIQ_KEY but counts one more
			// consumption: not a duplicate of the earlier retry.
			continue
		}
		qo, ok := s.batch.queueOffset(phy)
		if !ok {
			qo, ok = s.queueOffsetOf(topic, v.QueueID, phy)
		}
		if !ok {
			continue // a rejected send, never queued
		}
		return MessageResult{Topic: topic, QueueID: v.QueueID, QueueOffset: qo, PhyOffset: phy, Size: int32(v.Size),
			StoreTimestamp: v.StoreTimestamp, StoreHost: v.StoreHost, UniqKey: uniq}, true, nil
	}
	// Then the messages stored before an installed snapshot, older than
	// everything in this node's log, as a replica with the whole log would
	// meet them after its index's newer candidates.
	if r, ok := s.lookupDedupeTable(topic, uniq, reconsume, ts, w); ok {
		return r, true, nil
	}
	return MessageResult{}, false, nil
}
