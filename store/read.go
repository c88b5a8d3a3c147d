package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
)

// GetStatus is the outcome of GetMessages, named as RocketMQ's
// GetMessageStatus.
type GetStatus int

// GetMessages outcomes.
const (
	Found GetStatus = iota
	NoMatchedMessage
	MessageWasRemoving
	OffsetFoundNull
	OffsetOverflowBadly
	OffsetOverflowOne
	OffsetTooSmall
	NoMatchedLogicQueue
	NoMessageInQueue
)

func (g GetStatus) String() string {
	return [...]string{"FOUND", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "OFFSET_FOUND_NULL",
		"OFFSET_OVERFLOW_BADLY", "OFFSET_OVERFLOW_ONE", "OFFSET_TOO_SMALL", "NO_MATCHED_LOGIC_QUEUE",
		"NO_MESSAGE_IN_QUEUE"}[g]
}

// GetResult holds messages read from a queue.
type GetResult struct {
	Status GetStatus
	// Records are complete RocketMQ records with QUEUEOFFSET and
	// PHYSICALOFFSET filled in: what a PULL_MESSAGE response carries.
	Records [][]byte
	// Body holds Records back to back, as one buffer they are slices of,
	// so a pull response can send it without another copy. A caller that
	// adds records appends them to Body too.
	Body            []byte
	QueueOffsets    []int64
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
}

// GetMessages reads up to maxMsgs messages (and at most maxBytes bytes,
// always at least one) from a queue starting at offset, skipping those whose
// tag code filter rejects (filter nil accepts all). Only committed, applied
// messages are ever visible.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxMsgs, maxBytes int, filter func(tagsCode int64) bool) (GetResult, error) {
	q, err := s.cqs.Queue(topic, queueID, false)
	if err != nil && !errors.Is(err, consumequeue.ErrNoQueue) {
		return GetResult{}, fmt.Errorf("store: %w", err)
	}
	if q == nil {
		return GetResult{Status: NoMatchedLogicQueue}, nil
	}
	r := GetResult{MinOffset: q.MinOffset(), MaxOffset: q.MaxOffset()}
	switch {
	case r.MaxOffset == 0:
		r.Status, r.NextBeginOffset = NoMessageInQueue, 0
		return r, nil
	case offset < r.MinOffset:
		r.Status, r.NextBeginOffset = OffsetTooSmall, r.MinOffset
		return r, nil
	case offset == r.MaxOffset:
		r.Status, r.NextBeginOffset = OffsetOverflowOne, offset
		return r, nil
	case offset > r.MaxOffset:
		r.Status, r.NextBeginOffset = OffsetOverflowBadly, r.MaxOffset
		return r, nil
	}
	if maxMsgs <= 0 {
		maxMsgs = 32
	}
	units, next, err := q.Read(offset, maxMsgs, filter)
	if err != nil {
		if errors.Is(err, consumequeue.ErrOffsetOutOfRange) { // retention moved min meanwhile
			r.Status, r.NextBeginOffset = OffsetTooSmall, q.MinOffset()
			return r, nil
		}
		return r, fmt.Errorf("store: read consume queue %s/%d: %w", topic, queueID, err)
	}
	r.NextBeginOffset = next
	// One buffer for all the records: one allocation per pull, and the
	// pull response's body as it is.
	total, n := 0, 0
	for i, u := range units {
		if i > 0 && total+int(u.Size) > maxBytes {
			r.NextBeginOffset = u.Offset
			break
		}
		total += int(u.Size)
		n++
	}
	units = units[:n]
	all := make([]byte, total)
	bufs := make([][]byte, n)
	pos := make([]int64, n)
	off := 0
	for i, u := range units {
		bufs[i] = all[off : off+int(u.Size) : off+int(u.Size)]
		pos[i] = u.PhyOffset
		off += int(u.Size)
	}
	if err := s.clog.ReadMany(bufs, pos); err != nil {
		if errors.Is(err, commitlog.ErrBadPosition) { // segment deleted under us
			r.Status, r.NextBeginOffset = MessageWasRemoving, q.MinOffset()
			return r, nil
		}
		return r, fmt.Errorf("store: read messages of %s/%d: %w", topic, queueID, err)
	}
	r.QueueOffsets = make([]int64, 0, n)
	for i, b := range bufs {
		message.PatchQueueOffset(b, units[i].Offset)
		message.PatchPhysicalOffset(b, units[i].PhyOffset)
		r.QueueOffsets = append(r.QueueOffsets, units[i].Offset)
	}
	r.Records, r.Body = bufs, all
	if len(bufs) == 0 {
		r.Status = NoMatchedMessage
	} else {
		r.Status = Found
	}
	return r, nil
}

// MaxOffset returns a queue's next offset (0 for an unknown queue).
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil {
		return 0
	}
	return q.MaxOffset()
}

// MinOffset returns a queue's first readable offset.
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil {
		return 0
	}
	return q.MinOffset()
}

// SearchOffset returns the first offset of a queue whose message was stored
// at or after timestamp (ms).
func (s *Store) SearchOffset(topic string, queueID int32, timestamp int64) (int64, error) {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil {
		return 0, fmt.Errorf("%w: queue %s/%d", ErrNotFound, topic, queueID)
	}
	return q.SearchOffset(timestamp, func(phy int64, size int32) (int64, error) {
		rec := make([]byte, size)
		if err := s.clog.ReadAt(rec, phy); err != nil {
			return 0, err
		}
		v, err := message.Parse(rec, false)
		if err != nil {
			return 0, err
		}
		return v.StoreTimestamp, nil
	})
}

// readRecord reads the whole record at a physical offset.
func (s *Store) readRecord(phy int64) ([]byte, error) {
	var hdr [4]byte
	if err := s.clog.ReadAt(hdr[:], phy); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 4 || int(n) > s.cfg.MaxMessageSize+(64<<10) {
		return nil, fmt.Errorf("store: no message record at physical offset %d (size %d): %w", phy, n, commitlog.ErrBadPosition)
	}
	rec := make([]byte, n)
	if err := s.clog.ReadAt(rec, phy); err != nil {
		return nil, err
	}
	return rec, nil
}

// queueOffsetOf finds the queue offset of the unit pointing at phy: units of
// a queue are in physical-offset order, so it is a binary search.
func (s *Store) queueOffsetOf(topic string, queueID int32, phy int64) (int64, bool) {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil {
		return 0, false
	}
	lo, hi := q.MinOffset(), q.MaxOffset()
	var failed bool
	i := sort.Search(int(hi-lo), func(k int) bool {
		u, err := q.Get(lo + int64(k))
		if err != nil {
			failed = true
			return true
		}
		return u.PhyOffset >= phy
	})
	if failed || int64(i) >= hi-lo {
		return 0, false
	}
	u, err := q.Get(lo + int64(i))
	if err != nil || u.PhyOffset != phy {
		return 0, false
	}
	return u.Offset, true
}

// StoredMessage is a message found by a query, with its offsets filled in.
type StoredMessage struct {
	message.Message
	MsgID string
	Raw   []byte
}

func (s *Store) stored(phy int64) (StoredMessage, error) {
	rec, err := s.readRecord(phy)
	if err != nil {
		return StoredMessage{}, err
	}
	m, _, err := message.Decode(rec)
	if err != nil {
		return StoredMessage{}, fmt.Errorf("%w: no message record at physical offset %d", commitlog.ErrBadPosition, phy)
	}
	// Only queued messages are served: this also rejects an offset that
	// happens to decode but is not where a queued record starts.
	qo, ok := s.queueOffsetOf(m.Topic, m.QueueID, phy)
	if !ok {
		return StoredMessage{}, fmt.Errorf("%w: no queued message at physical offset %d", commitlog.ErrBadPosition, phy)
	}
	m.PhysicalOffset, m.QueueOffset = phy, qo
	message.PatchPhysicalOffset(rec, phy)
	message.PatchQueueOffset(rec, qo)
	return StoredMessage{Message: m, MsgID: message.OffsetMsgID(m.StoreHost, phy), Raw: rec}, nil
}

// QueryByKey returns up to maxNum messages of topic whose KEYS or UNIQ_KEY
// contain key, stored within [begin, end] (ms), newest first.
func (s *Store) QueryByKey(topic, key string, maxNum int, begin, end int64) ([]StoredMessage, error) {
	cands, err := s.idx.Query(topic+"#"+key, maxNum, begin, end)
	if err != nil {
		return nil, fmt.Errorf("store: index query: %w", err)
	}
	var out []StoredMessage
	for _, phy := range cands {
		m, err := s.stored(phy)
		if errors.Is(err, commitlog.ErrBadPosition) {
			continue
		}
		if err != nil {
			return out, err
		}
		if m.Topic != topic || !hasKey(&m.Message, key) {
			continue // a hash collision
		}
		out = append(out, m)
	}
	return out, nil
}

func hasKey(m *message.Message, key string) bool {
	if m.UniqKey() == key {
		return true
	}
	for _, k := range m.Keys() {
		if k == key {
			return true
		}
	}
	return false
}

// QueryByUniqKey returns the message of topic with the given UNIQ_KEY (the
// client-side msgId).
func (s *Store) QueryByUniqKey(topic, uniq string) (StoredMessage, error) {
	ms, err := s.QueryByKey(topic, uniq, 64, 0, 1<<62)
	if err != nil {
		return StoredMessage{}, err
	}
	for _, m := range ms {
		if m.UniqKey() == uniq {
			return m, nil
		}
	}
	return StoredMessage{}, fmt.Errorf("%w: topic %q uniq key %q", ErrNotFound, topic, uniq)
}

// MessageAt returns the queued message stored at a physical (commit-log)
// offset, or an error wrapping ErrNotFound if no queued message starts
// there.
func (s *Store) MessageAt(phy int64) (StoredMessage, error) {
	m, err := s.stored(phy)
	if errors.Is(err, commitlog.ErrBadPosition) {
		return StoredMessage{}, fmt.Errorf("%w: no message at physical offset %d", ErrNotFound, phy)
	}
	return m, err
}

// QueryByOffsetMsgID returns the message an offsetMsgId points at.
func (s *Store) QueryByOffsetMsgID(id string) (StoredMessage, error) {
	_, phy, err := message.ParseOffsetMsgID(id)
	if err != nil {
		return StoredMessage{}, fmt.Errorf("store: %w", err)
	}
	return s.MessageAt(phy)
}
