package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// The dedupe table: the stored messages below a snapshot's index that a
// retry applied after it could still match (see ARCHITECTURE.md,
// "deduplication"). A leader builds it when it makes a snapshot; a replica
// that installs the snapshot keeps it in the bbolt dedupe bucket (so a
// restart still has it) and in memory, and findByUniqKey consults it after
// the index. It is replaced at each install and pruned at each snapshot.

// dedupeHit is what a duplicate's answer needs of one stored message.
type dedupeHit struct {
	QueueID        int32
	QueueOffset    int64
	PhyOffset      int64
	Size           int32
	StoreTimestamp int64
	StoreHost      netip.AddrPort
}

// dedupeTable maps dedupeKey(topic, UNIQ_KEY, reconsume count) to the
// messages stored under it, newest in log order first (the order of the
// index's answers, so a follower picks the same original as the leader).
type dedupeTable map[string][]dedupeHit

// dedupeKey is a table key: topic, a zero byte, the reconsume count (4
// bytes, big-endian) and the UNIQ_KEY. A topic has no zero byte.
func dedupeKey(topic, uniq string, reconsume int32) string {
	b := make([]byte, 0, len(topic)+5+len(uniq))
	b = append(b, topic...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(reconsume))
	b = append(b, uniq...)
	return string(b)
}

// newest returns the greatest store time of hits.
func newest(hits []dedupeHit) int64 {
	ts := int64(math.MinInt64)
	for _, h := range hits {
		ts = max(ts, h.StoreTimestamp)
	}
	return ts
}

// Hit encoding (bucket values and snapshot sections), big-endian:
//
//	| count u16 | count × hit |
//	hit: | queue id i32 | queue offset i64 | physical offset i64 | size i32 |
//	     | store time i64 | host length u8 | host (netip.AddrPort binary) |
const hitFixed = 4 + 8 + 8 + 4 + 8 + 1

func appendHits(b []byte, hits []dedupeHit) ([]byte, error) {
	if len(hits) > math.MaxUint16 {
		return nil, fmt.Errorf("store: dedupe table: %d messages under one key", len(hits))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(hits)))
	for _, h := range hits {
		b = binary.BigEndian.AppendUint32(b, uint32(h.QueueID))
		b = binary.BigEndian.AppendUint64(b, uint64(h.QueueOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(h.PhyOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(h.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(h.StoreTimestamp))
		host, err := h.StoreHost.MarshalBinary()
		if err != nil || len(host) > math.MaxUint8 {
			return nil, fmt.Errorf("store: dedupe table: store host %v: %v", h.StoreHost, err)
		}
		b = append(b, byte(len(host)))
		b = append(b, host...)
	}
	return b, nil
}

// readHits decodes what appendHits wrote at the start of b and returns the
// rest of b.
func readHits(b []byte) ([]dedupeHit, []byte, error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: dedupe hits truncated", ErrBadSnapshot)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	hits := make([]dedupeHit, 0, n)
	for range n {
		if len(b) < hitFixed {
			return nil, nil, fmt.Errorf("%w: dedupe hit truncated", ErrBadSnapshot)
		}
		h := dedupeHit{
			QueueID:        int32(binary.BigEndian.Uint32(b)),
			QueueOffset:    int64(binary.BigEndian.Uint64(b[4:])),
			PhyOffset:      int64(binary.BigEndian.Uint64(b[12:])),
			Size:           int32(binary.BigEndian.Uint32(b[20:])),
			StoreTimestamp: int64(binary.BigEndian.Uint64(b[24:])),
		}
		hl := int(b[32])
		b = b[hitFixed:]
		if len(b) < hl {
			return nil, nil, fmt.Errorf("%w: dedupe hit host truncated", ErrBadSnapshot)
		}
		if err := h.StoreHost.UnmarshalBinary(b[:hl]); err != nil {
			return nil, nil, fmt.Errorf("%w: dedupe hit host: %w", ErrBadSnapshot, err)
		}
		b = b[hl:]
		hits = append(hits, h)
	}
	return hits, b, nil
}

// Snapshot section (version 2), big-endian: | key count u32 | keys |, each
// key | length u16 | key bytes | hits |, keys in ascending order.
func encodeDedupeTable(t dedupeTable) ([]byte, error) {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := binary.BigEndian.AppendUint32(nil, uint32(len(keys)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		var err error
		if b, err = appendHits(b, t[k]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func decodeDedupeTable(b []byte) (dedupeTable, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: dedupe table truncated", ErrBadSnapshot)
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	t := make(dedupeTable, min(int(n), len(b)/2))
	for range n {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			return nil, fmt.Errorf("%w: dedupe key truncated", ErrBadSnapshot)
		}
		kl := int(binary.BigEndian.Uint16(b))
		k := string(b[2 : 2+kl])
		hits, rest, err := readHits(b[2+kl:])
		if err != nil {
			return nil, err
		}
		t[k], b = hits, rest
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the dedupe table", ErrBadSnapshot, len(b))
	}
	return t, nil
}

// loadDedupeTable reads the table from the database's dedupe bucket.
func loadDedupeTable(db *offsets.DB) (dedupeTable, error) {
	t := dedupeTable{}
	err := db.View(func(tx *offsets.Tx) error {
		return tx.ForEachDedupe(func(k []byte, _ int64, v []byte) error {
			hits, rest, err := readHits(v)
			if err != nil || len(rest) != 0 {
				return fmt.Errorf("store: dedupe entry %q: %w (%d bytes left)", k, err, len(rest))
			}
			t[string(k)] = hits
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: load dedupe table: %w", err)
	}
	return t, nil
}

// saveDedupeTable replaces the database's dedupe bucket with t. Keys too
// long for the bucket are left out (a UNIQ_KEY of kilobytes).
func saveDedupeTable(db *offsets.DB, t dedupeTable) error {
	err := db.Update(func(tx *offsets.Tx) error {
		if _, err := tx.ClearDedupe(); err != nil {
			return err
		}
		for k, hits := range t {
			if len(k) > offsets.MaxDedupeKeyLen {
				continue
			}
			v, err := appendHits(nil, hits)
			if err != nil {
				return err
			}
			if err := tx.PutDedupe(k, max(newest(hits), 0), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: save dedupe table: %w", err)
	}
	return nil
}

// lookupDedupeTable returns the newest table entry of (topic, uniq,
// reconsume) stored within window (ms) of ts.
func (s *Store) lookupDedupeTable(topic, uniq string, reconsume int32, ts, w int64) (MessageResult, bool) {
	if len(s.dedupeTab) == 0 {
		return MessageResult{}, false
	}
	for _, h := range s.dedupeTab[dedupeKey(topic, uniq, reconsume)] {
		if h.StoreTimestamp < ts-w || h.StoreTimestamp > ts+w {
			continue
		}
		return MessageResult{Topic: topic, QueueID: h.QueueID, QueueOffset: h.QueueOffset, PhyOffset: h.PhyOffset, Size: h.Size,
			StoreTimestamp: h.StoreTimestamp, StoreHost: h.StoreHost, UniqKey: uniq}, true
	}
	return MessageResult{}, false
}

// buildDedupeTable collects, at the applied index (under applyMu, after a
// persist), every queued message with a UNIQ_KEY whose store time is within
// the dedupe window of the newest store time of the queues' last messages
// (and of the current table), from the consume queues and the current
// table, among those stored in the last Config.DedupeTableBytes of the log
// before end (the log position after the applied index). It returns the
// table and the cutoff store time below which nothing was kept.
//
// Store times need not increase along the log (they are the leaders'
// clocks), so each queue is scanned back past the cutoff until a message
// more than one more window older than the cutoff, the byte bound, or the
// queue's start. The byte bound caps the scan (which runs on the raft
// goroutine) and the table's size under heavy load.
func (s *Store) buildDedupeTable(end int64) (dedupeTable, int64, error) {
	w := s.cfg.DedupeWindow.Milliseconds()
	t := dedupeTable{}
	if w <= 0 {
		return t, math.MaxInt64, nil
	}
	ref := int64(math.MinInt64)
	for _, hits := range s.dedupeTab {
		ref = max(ref, newest(hits))
	}
	queues := s.cqs.Queues()
	for _, q := range queues {
		if q.MaxOffset() <= q.MinOffset() {
			continue
		}
		v, ok, err := s.dedupeRecordAt(q.Topic(), q.QueueID(), q.MaxOffset()-1)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			ref = max(ref, v.StoreTimestamp)
		}
	}
	if ref == math.MinInt64 {
		return t, math.MaxInt64, nil
	}
	cutoff := ref - w
	floor := end - s.cfg.DedupeTableBytes
	for _, q := range queues {
		for off := q.MaxOffset() - 1; off >= q.MinOffset(); off-- {
			u, err := q.Get(off)
			if errors.Is(err, consumequeue.ErrOffsetOutOfRange) {
				break // retention removed the queue's head meanwhile
			}
			if err != nil {
				return nil, 0, fmt.Errorf("store: dedupe table: %w", err)
			}
			if u.PhyOffset < floor {
				break
			}
			rec, err := s.readRecord(u.PhyOffset)
			if errors.Is(err, commitlog.ErrBadPosition) {
				break // the record went with a deleted segment
			}
			if err != nil {
				return nil, 0, fmt.Errorf("store: dedupe table: %w", err)
			}
			v, err := message.Parse(rec, false)
			if err != nil {
				return nil, 0, fmt.Errorf("store: dedupe table: stored record at %d: %w", u.PhyOffset, err)
			}
			if v.StoreTimestamp < cutoff-w {
				break
			}
			if v.StoreTimestamp < cutoff {
				continue
			}
			uniq, _ := message.PropertyValue(v.Properties, message.PropertyUniqKey)
			if uniq == "" {
				continue
			}
			k := dedupeKey(q.Topic(), uniq, v.ReconsumeTimes)
			if len(k) > offsets.MaxDedupeKeyLen {
				continue // a UNIQ_KEY of kilobytes: not kept (the bucket's key limit)
			}
			t[k] = append(t[k], dedupeHit{QueueID: q.QueueID(), QueueOffset: off, PhyOffset: u.PhyOffset, Size: int32(v.Size),
				StoreTimestamp: v.StoreTimestamp, StoreHost: v.StoreHost})
		}
	}
	for k, hits := range s.dedupeTab {
		for _, h := range hits {
			if h.StoreTimestamp >= cutoff && h.PhyOffset >= floor {
				t[k] = append(t[k], h)
			}
		}
	}
	for _, hits := range t {
		slices.SortFunc(hits, func(a, b dedupeHit) int { return cmp.Compare(b.PhyOffset, a.PhyOffset) })
	}
	return t, cutoff, nil
}

// dedupeRecordAt parses the message at a queue offset; ok is false when
// its record is gone (retention).
func (s *Store) dedupeRecordAt(topic string, queueID int32, off int64) (message.View, bool, error) {
	q, _ := s.cqs.Queue(topic, queueID, false)
	if q == nil {
		return message.View{}, false, nil
	}
	u, err := q.Get(off)
	if errors.Is(err, consumequeue.ErrOffsetOutOfRange) {
		return message.View{}, false, nil
	}
	if err != nil {
		return message.View{}, false, fmt.Errorf("store: dedupe table: %w", err)
	}
	rec, err := s.readRecord(u.PhyOffset)
	if errors.Is(err, commitlog.ErrBadPosition) {
		return message.View{}, false, nil
	}
	if err != nil {
		return message.View{}, false, fmt.Errorf("store: dedupe table: %w", err)
	}
	v, err := message.Parse(rec, false)
	if err != nil {
		return message.View{}, false, fmt.Errorf("store: dedupe table: stored record at %d: %w", u.PhyOffset, err)
	}
	return v, true, nil
}

// pruneDedupeTable drops the table's keys whose messages are all older
// than cutoff, in memory and in the database.
func (s *Store) pruneDedupeTable(cutoff int64) error {
	if len(s.dedupeTab) == 0 {
		return nil
	}
	for k, hits := range s.dedupeTab {
		if newest(hits) < cutoff {
			delete(s.dedupeTab, k)
		}
	}
	if err := s.db.Update(func(tx *offsets.Tx) error {
		_, err := tx.ExpireDedupe(max(cutoff, 0))
		return err
	}); err != nil {
		return fmt.Errorf("store: prune dedupe table: %w", err)
	}
	return nil
}
