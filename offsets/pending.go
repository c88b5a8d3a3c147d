package offsets

import (
	"encoding/binary"
	"fmt"
)

// Schedule progress and pending transactions: the replicated state of
// delayed messages and of transactional half messages (see doc.go for the
// layouts). The values of the transactions bucket belong to the caller: this
// package stores them as given.

// ScheduleOffset returns the next unit to deliver of schedule queue
// queueID; zero if none is stored.
func (t *Tx) ScheduleOffset(queueID int32) (int64, error) {
	v := t.schedule.Get(appendQueueID(nil, queueID))
	if v == nil {
		return 0, nil
	}
	return decodeInt64(v)
}

// SetScheduleOffset stores the next unit to deliver of schedule queue
// queueID.
func (t *Tx) SetScheduleOffset(queueID int32, next int64) error {
	if queueID < 0 || next < 0 {
		return fmt.Errorf("offsets: set schedule offset %d of queue %d: %w", next, queueID, ErrInvalidArgument)
	}
	return t.put(t.schedule, appendQueueID(nil, queueID), encodeInt64(next), "schedule offset")
}

// ForEachScheduleOffset calls fn for every stored schedule offset, by queue
// id. An error from fn stops the walk and is returned unchanged.
func (t *Tx) ForEachScheduleOffset(fn func(queueID int32, next int64) error) error {
	c := t.schedule.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		q, err := decodeQueueID(k)
		if err != nil {
			return fmt.Errorf("offsets: schedule key %x: %w", k, err)
		}
		next, err := decodeInt64(v)
		if err != nil {
			return fmt.Errorf("offsets: schedule offset of queue %d: %w", q, err)
		}
		if err := fn(q, next); err != nil {
			return err
		}
	}
	return nil
}

// PutTransaction stores the record of a pending transaction, keyed by its
// half message's queue offset.
func (t *Tx) PutTransaction(halfOffset int64, val []byte) error {
	if halfOffset < 0 {
		return fmt.Errorf("offsets: put transaction at half offset %d: %w", halfOffset, ErrInvalidArgument)
	}
	return t.put(t.transactions, binary.BigEndian.AppendUint64(nil, uint64(halfOffset)), val, "transaction")
}

// DeleteTransaction removes a transaction's record; absent is not an error.
func (t *Tx) DeleteTransaction(halfOffset int64) error {
	return t.del(t.transactions, binary.BigEndian.AppendUint64(nil, uint64(halfOffset)), "transaction")
}

// ForEachTransaction calls fn for every stored transaction in half-offset
// order. val is only valid during the call. An error from fn stops the walk
// and is returned unchanged.
func (t *Tx) ForEachTransaction(fn func(halfOffset int64, val []byte) error) error {
	c := t.transactions.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || k[0]&0x80 != 0 {
			return fmt.Errorf("offsets: transaction key %x: %w", k, ErrCorrupt)
		}
		if err := fn(int64(binary.BigEndian.Uint64(k)), v); err != nil {
			return err
		}
	}
	return nil
}

// PutPopQueue stores the pop state of a group's view of a queue.
func (t *Tx) PutPopQueue(group, topic string, queueID int32, val []byte) error {
	if err := checkQueueArgs(topic, queueID, 0); err != nil || group == "" {
		return fmt.Errorf("offsets: put pop state of %q %q %d: %w", group, topic, queueID, ErrInvalidArgument)
	}
	return t.put(t.pop, encodeConsumerOffsetKey(group, topic, queueID), val, "pop state")
}

// DeletePopQueue removes the pop state of a group's view of a queue;
// absent is not an error.
func (t *Tx) DeletePopQueue(group, topic string, queueID int32) error {
	return t.del(t.pop, encodeConsumerOffsetKey(group, topic, queueID), "pop state")
}

// ForEachPopQueue calls fn for every stored pop state, ordered as consumer
// offsets are. val is only valid during the call. An error from fn stops
// the walk and is returned unchanged.
func (t *Tx) ForEachPopQueue(fn func(group, topic string, queueID int32, val []byte) error) error {
	c := t.pop.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		group, topic, q, err := decodeConsumerOffsetKey(k)
		if err != nil {
			return fmt.Errorf("offsets: pop key %x: %w", k, err)
		}
		if err := fn(group, topic, q, v); err != nil {
			return err
		}
	}
	return nil
}
