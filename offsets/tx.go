package offsets

import (
	"bytes"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

// Limits on caller-chosen keys (bbolt's own key limit is 32 KiB).
const (
	MaxMetaNameLen  = 1024
	MaxDedupeKeyLen = 4096
)

// Tx is one bbolt transaction, valid only inside the View or Update callback
// that received it. Slices it returns are copies unless stated otherwise.
// Setters return an error wrapping bbolt's ErrTxNotWritable inside View.
// ForEach callbacks must not modify the database.
type Tx struct {
	tx              *bolt.Tx
	meta            *bolt.Bucket
	consumerOffsets *bolt.Bucket
	queueOffsets    *bolt.Bucket
	topics          *bolt.Bucket
	groups          *bolt.Bucket
	dedupe          *bolt.Bucket
	dedupeByTime    *bolt.Bucket
	schedule        *bolt.Bucket
	transactions    *bolt.Bucket
	pop             *bolt.Bucket
}

func newTx(btx *bolt.Tx) (*Tx, error) {
	tx := &Tx{tx: btx}
	for _, b := range []struct {
		name string
		dst  **bolt.Bucket
	}{
		{bucketMeta, &tx.meta},
		{bucketConsumerOffsets, &tx.consumerOffsets},
		{bucketQueueOffsets, &tx.queueOffsets},
		{bucketTopics, &tx.topics},
		{bucketGroups, &tx.groups},
		{bucketDedupe, &tx.dedupe},
		{bucketDedupeByTime, &tx.dedupeByTime},
		{bucketSchedule, &tx.schedule},
		{bucketTransactions, &tx.transactions},
		{bucketPop, &tx.pop},
	} {
		if *b.dst = btx.Bucket([]byte(b.name)); *b.dst == nil {
			return nil, fmt.Errorf("offsets: bucket %q missing: %w", b.name, ErrCorrupt)
		}
	}
	return tx, nil
}

// AppliedIndex returns the raft index and term of the last applied entry,
// or zeros if nothing was applied yet.
func (t *Tx) AppliedIndex() (index, term uint64, err error) {
	v := t.meta.Get(metaAppliedKey())
	if v == nil {
		return 0, 0, nil
	}
	return decodeApplied(v)
}

// SetApplied records the last applied raft entry. The applied position only
// moves forward: an index below the stored one, a term below the stored one,
// or the same index with another term is rejected with ErrAppliedRegress.
// Setting the stored position again is allowed.
func (t *Tx) SetApplied(index, term uint64) error {
	cur, curTerm, err := t.AppliedIndex()
	if err != nil {
		return err
	}
	if index < cur || term < curTerm || (index == cur && term != curTerm) {
		return fmt.Errorf("offsets: set applied %d/%d, stored %d/%d (index/term): %w",
			index, term, cur, curTerm, ErrAppliedRegress)
	}
	return t.put(t.meta, metaAppliedKey(), encodeApplied(index, term), "applied index")
}

// Meta returns the opaque blob stored under name by SetMeta.
func (t *Tx) Meta(name string) ([]byte, bool) {
	if name == "" {
		return nil, false
	}
	v := t.meta.Get(metaBlobKey(name))
	if v == nil {
		return nil, false
	}
	return bytes.Clone(v), true
}

// SetMeta stores an opaque blob (for example the store's consume-queue
// checkpoint) under a non-empty name of at most MaxMetaNameLen bytes.
func (t *Tx) SetMeta(name string, val []byte) error {
	if name == "" || len(name) > MaxMetaNameLen {
		return fmt.Errorf("offsets: set meta: name length %d not in 1..%d: %w", len(name), MaxMetaNameLen, ErrInvalidArgument)
	}
	if val == nil {
		val = []byte{} // bbolt reports a nil value as absent within the tx
	}
	return t.put(t.meta, metaBlobKey(name), val, "meta "+name)
}

// DeleteMeta removes the blob stored under name, if any.
func (t *Tx) DeleteMeta(name string) error {
	if name == "" {
		return nil
	}
	return t.del(t.meta, metaBlobKey(name), "meta "+name)
}

// ConsumerOffset returns the next offset group will consume in
// (topic, queueID), and whether one is stored.
func (t *Tx) ConsumerOffset(group, topic string, queueID int32) (int64, bool, error) {
	v := t.consumerOffsets.Get(encodeConsumerOffsetKey(group, topic, queueID))
	if v == nil {
		return 0, false, nil
	}
	off, err := decodeInt64(v)
	return off, err == nil, err
}

// SetConsumerOffset stores the next offset group will consume in
// (topic, queueID). Names must be valid RocketMQ names, queueID and offset
// non-negative.
func (t *Tx) SetConsumerOffset(group, topic string, queueID int32, offset int64) error {
	if err := checkGroupName(group, ErrInvalidArgument); err != nil {
		return fmt.Errorf("offsets: set consumer offset: %w", err)
	}
	if err := checkQueueArgs(topic, queueID, offset); err != nil {
		return fmt.Errorf("offsets: set consumer offset: %w", err)
	}
	return t.put(t.consumerOffsets, encodeConsumerOffsetKey(group, topic, queueID), encodeInt64(offset), "consumer offset")
}

func checkQueueArgs(topic string, queueID int32, offset int64) error {
	if err := checkTopicName(topic, ErrInvalidArgument); err != nil {
		return err
	}
	if queueID < 0 {
		return fmt.Errorf("negative queue id %d: %w", queueID, ErrInvalidArgument)
	}
	if offset < 0 {
		return fmt.Errorf("negative offset %d: %w", offset, ErrInvalidArgument)
	}
	return nil
}

// ConsumerOffsets returns group's offsets in topic, by queue id.
func (t *Tx) ConsumerOffsets(group, topic string) (map[int32]int64, error) {
	out := make(map[int32]int64)
	if group == "" || topic == "" {
		return out, nil
	}
	err := t.scanConsumerOffsets(consumerOffsetPrefix(group, topic), func(_, _ string, q int32, off int64) error {
		out[q] = off
		return nil
	})
	return out, err
}

// ForEachConsumerOffset calls fn for every stored consumer offset, ordered by
// group, then topic (byte order), then queue id. An error from fn stops the
// walk and is returned unchanged.
func (t *Tx) ForEachConsumerOffset(fn func(group, topic string, queueID int32, offset int64) error) error {
	return t.scanConsumerOffsets(nil, fn)
}

func (t *Tx) scanConsumerOffsets(prefix []byte, fn func(group, topic string, queueID int32, offset int64) error) error {
	c := t.consumerOffsets.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		group, topic, q, err := decodeConsumerOffsetKey(k)
		if err != nil {
			return fmt.Errorf("offsets: consumer offset key %x: %w", k, err)
		}
		off, err := decodeInt64(v)
		if err != nil {
			return fmt.Errorf("offsets: consumer offset %s/%s/%d: %w", group, topic, q, err)
		}
		if err := fn(group, topic, q, off); err != nil {
			return err
		}
	}
	return nil
}

// DeleteConsumerOffsets removes group's offsets in topic, or in every topic
// if topic is empty, and returns how many queue offsets it removed.
func (t *Tx) DeleteConsumerOffsets(group, topic string) (int, error) {
	if group == "" {
		return 0, nil
	}
	return t.deletePrefix(t.consumerOffsets, consumerOffsetPrefix(group, topic), "consumer offsets")
}

// QueueOffset returns the next queue offset the store assigns in
// (topic, queueID); zero if none is stored.
func (t *Tx) QueueOffset(topic string, queueID int32) (int64, error) {
	v := t.queueOffsets.Get(encodeQueueOffsetKey(topic, queueID))
	if v == nil {
		return 0, nil
	}
	return decodeInt64(v)
}

// SetQueueOffset stores the next queue offset to assign in (topic, queueID).
func (t *Tx) SetQueueOffset(topic string, queueID int32, next int64) error {
	if err := checkQueueArgs(topic, queueID, next); err != nil {
		return fmt.Errorf("offsets: set queue offset: %w", err)
	}
	return t.put(t.queueOffsets, encodeQueueOffsetKey(topic, queueID), encodeInt64(next), "queue offset")
}

// ForEachQueueOffset calls fn for every stored queue offset, ordered by topic
// then queue id. An error from fn stops the walk and is returned unchanged.
func (t *Tx) ForEachQueueOffset(fn func(topic string, queueID int32, next int64) error) error {
	c := t.queueOffsets.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		topic, q, err := decodeQueueOffsetKey(k)
		if err != nil {
			return fmt.Errorf("offsets: queue offset key %x: %w", k, err)
		}
		next, err := decodeInt64(v)
		if err != nil {
			return fmt.Errorf("offsets: queue offset %s/%d: %w", topic, q, err)
		}
		if err := fn(topic, q, next); err != nil {
			return err
		}
	}
	return nil
}

// Dedupe returns the stored result of the send with producer key key.
func (t *Tx) Dedupe(key string) ([]byte, bool, error) {
	if key == "" {
		return nil, false, nil
	}
	v := t.dedupe.Get([]byte(key))
	if v == nil {
		return nil, false, nil
	}
	_, result, err := decodeDedupeValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("offsets: dedupe %q: %w", key, err)
	}
	return result, true, nil
}

// PutDedupe records the result of the send with producer key key, made at
// tsMillis (a replicated timestamp, see doc.go). A second put of the same
// key replaces the first, timestamp included.
func (t *Tx) PutDedupe(key string, tsMillis int64, result []byte) error {
	if key == "" || len(key) > MaxDedupeKeyLen {
		return fmt.Errorf("offsets: put dedupe: key length %d not in 1..%d: %w", len(key), MaxDedupeKeyLen, ErrInvalidArgument)
	}
	if tsMillis < 0 {
		return fmt.Errorf("offsets: put dedupe %q: negative timestamp %d: %w", key, tsMillis, ErrInvalidArgument)
	}
	if old := t.dedupe.Get([]byte(key)); old != nil {
		oldTS, _, err := decodeDedupeValue(old)
		if err != nil {
			return fmt.Errorf("offsets: put dedupe %q: %w", key, err)
		}
		if err := t.del(t.dedupeByTime, encodeDedupeTimeKey(oldTS, key), "dedupe index"); err != nil {
			return err
		}
	}
	if err := t.put(t.dedupe, []byte(key), encodeDedupeValue(tsMillis, result), "dedupe"); err != nil {
		return err
	}
	return t.put(t.dedupeByTime, encodeDedupeTimeKey(tsMillis, key), []byte{}, "dedupe index")
}

// ExpireDedupe removes every dedupe entry with a timestamp before
// beforeMillis, oldest first, and returns how many it removed.
func (t *Tx) ExpireDedupe(beforeMillis int64) (int, error) {
	var expired [][]byte
	c := t.dedupeByTime.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		ts, _, err := decodeDedupeTimeKey(k)
		if err != nil {
			return 0, fmt.Errorf("offsets: expire dedupe: key %x: %w", k, err)
		}
		if ts >= beforeMillis {
			break
		}
		expired = append(expired, bytes.Clone(k))
	}
	for _, k := range expired {
		if err := t.del(t.dedupe, k[dedupeTSLen:], "dedupe"); err != nil {
			return 0, err
		}
		if err := t.del(t.dedupeByTime, k, "dedupe index"); err != nil {
			return 0, err
		}
	}
	return len(expired), nil
}

// ForEachDedupe calls fn with every dedupe entry in key order; the slices
// are valid only during the call.
func (t *Tx) ForEachDedupe(fn func(key []byte, tsMillis int64, result []byte) error) error {
	return t.dedupe.ForEach(func(k, v []byte) error {
		ts, result, err := decodeDedupeValue(v)
		if err != nil {
			return fmt.Errorf("offsets: dedupe %q: %w", k, err)
		}
		return fn(k, ts, result)
	})
}

// ClearDedupe removes every dedupe entry and returns how many it removed.
func (t *Tx) ClearDedupe() (int, error) {
	return t.ExpireDedupe(math.MaxInt64)
}

func (t *Tx) put(b *bolt.Bucket, k, v []byte, what string) error {
	if err := b.Put(k, v); err != nil {
		return fmt.Errorf("offsets: put %s: %w", what, err)
	}
	return nil
}

func (t *Tx) del(b *bolt.Bucket, k []byte, what string) error {
	if err := b.Delete(k); err != nil {
		return fmt.Errorf("offsets: delete %s: %w", what, err)
	}
	return nil
}

// deletePrefix deletes every key of b starting with prefix.
func (t *Tx) deletePrefix(b *bolt.Bucket, prefix []byte, what string) (int, error) {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := t.del(b, k, what); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
