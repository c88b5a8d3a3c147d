package consumequeue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A tail journal lets an owner that checkpoints with OwnerSyncsFS make the
// units its queues hold in memory durable with one sequential write per
// checkpoint, instead of one write per queue (see Set.MarkJournal). The
// owner keeps the journal file; this package encodes its records and
// replays them (Queue.ReplayJournal, DecodeJournalRecord).
//
// A record holds units of one queue, from a queue offset on:
//
//	| off | size | field                                                |
//	|   0 |    4 | n: length of the rest after the checksum (big-endian) |
//	|   4 |    4 | CRC-32C of those n bytes                              |
//	|   8 |    2 | topic length t                                        |
//	|  10 |    t | topic                                                 |
//	|10+t |    4 | queue id                                              |
//	|14+t |    8 | queue offset of the first unit                        |
//	|22+t |  20k | k units, as in the files                              |
const journalRecordHead = 8

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// JournalRecord is one decoded record: Units holds whole units, encoded as
// in the files, the first at queue offset Start.
type JournalRecord struct {
	Topic   string
	QueueID int32
	Start   int64
	Units   []byte
}

// DecodeJournalRecord decodes the record at the start of b and returns it
// and its length. A record cut short or whose checksum does not match is
// an error wrapping ErrCorrupt.
func DecodeJournalRecord(b []byte) (JournalRecord, int, error) {
	if len(b) < journalRecordHead {
		return JournalRecord{}, 0, fmt.Errorf("consumequeue: journal record cut short (%d bytes): %w", len(b), ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-journalRecordHead || n < 14 {
		return JournalRecord{}, 0, fmt.Errorf("consumequeue: journal record of %d bytes, %d left: %w", n, len(b)-journalRecordHead, ErrCorrupt)
	}
	p := b[journalRecordHead : journalRecordHead+n]
	if crc32.Checksum(p, journalCRC) != binary.BigEndian.Uint32(b[4:]) {
		return JournalRecord{}, 0, fmt.Errorf("consumequeue: journal record checksum mismatch: %w", ErrCorrupt)
	}
	t := int(binary.BigEndian.Uint16(p))
	if 2+t+12 > n || (n-2-t-12)%UnitSize != 0 {
		return JournalRecord{}, 0, fmt.Errorf("consumequeue: journal record layout (%d bytes, topic %d): %w", n, t, ErrCorrupt)
	}
	r := JournalRecord{
		Topic:   string(p[2 : 2+t]),
		QueueID: int32(binary.BigEndian.Uint32(p[2+t:])),
		Start:   int64(binary.BigEndian.Uint64(p[6+t:])),
		Units:   p[14+t:],
	}
	return r, journalRecordHead + n, nil
}

// appendJournalRecord appends a record of units (at queue offset start) of
// q to b.
func (q *Queue) appendJournalRecord(b []byte, start int64, units []byte) []byte {
	n := 2 + len(q.topic) + 12 + len(units)
	at := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(q.topic)))
	b = append(b, q.topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(q.queueID))
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	b = append(b, units...)
	binary.BigEndian.PutUint32(b[at+4:], crc32.Checksum(b[at+journalRecordHead:], journalCRC))
	return b
}

// MarkJournal is MarkFlushed for an owner that keeps a tail journal: rather
// than writing each dirty queue's units to its files, it appends to b a
// record of the units that Flush made visible and that are neither in the
// queue's files nor in a record an earlier MarkJournal returned, and keeps
// them in memory until their normal spill. A queue that has no file yet is
// written as MarkFlushed writes it (once per queue: a record is replayed
// into an existing queue). The owner writes b to its journal before the
// SyncFS that the marks are for, and replays the journal
// (Queue.ReplayJournal) before it cuts the queues back after a crash.
// written counts the queues that got a record or a write.
//
// The units kept in memory are bounded: a queue whose units not in its
// files exceed budget bytes divided by the number of dirty queues (at
// least one page) is written as MarkFlushed writes it, and needs no
// record. So the queues hold at most about budget bytes of units between
// spills however many are active, and the larger that share, the fewer
// queues a checkpoint writes.
//
// Every operation that rewrites units (TruncateTo, TruncatePhy, ResetTo,
// DeleteBefore) is for the owner to follow with MarkFlushed and a new
// journal: a record is only valid over the units it was written beside.
func (s *Set) MarkJournal(b []byte, budget int64) (_ []byte, marks []SyncMark, written int, err error) {
	dirty := s.all(true)
	marks = make([]SyncMark, 0, len(dirty))
	limit := max(budget/int64(max(len(dirty), 1)), 4096) / UnitSize
	for _, q := range dirty {
		var m SyncMark
		var w bool
		b, m, w, err = q.journalForMark(b, limit)
		s.cache.maybeEvict()
		if err != nil {
			return nil, nil, 0, err
		}
		if w {
			written++
		}
		marks = append(marks, m)
	}
	return b, marks, written, nil
}

func (q *Queue) journalForMark(b []byte, limit int64) ([]byte, SyncMark, bool, error) {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed {
		return b, SyncMark{q: q, writes: q.writes.Load(), firstGen: q.w.firstGen}, false, nil
	}
	if q.w.err != nil {
		return b, SyncMark{}, false, q.w.err
	}
	wrote := false
	if q.mu.max > q.mu.disk && (len(q.mu.segs) == 0 || q.mu.max-q.mu.disk > limit) {
		if err := q.spillLocked(q.mu.max); err != nil {
			return b, SyncMark{}, false, err
		}
		wrote = true
	}
	from := max(q.w.journaled, q.mu.disk)
	if to := q.mu.max; to > from {
		i := (from - q.mu.disk) * UnitSize
		b = q.appendJournalRecord(b, from, q.w.pend[i:(to-q.mu.disk)*UnitSize])
		q.w.journaled = to
		wrote = true
	}
	return b, SyncMark{q: q, writes: q.writes.Load(), firstGen: q.w.firstGen}, wrote, nil
}

// ReplayJournal puts the units of a journal record (from queue offset
// start) into the queue after a crash, before the owner cuts the queue
// back to its checkpoint: units the files hold already are checked, and
// from the first that differs (a write that a crash tore) or is missing,
// the queue is truncated and the record's units put. Units below
// MinOffset (dropped by retention) are skipped; a record that starts past
// the queue's end (units lost from the files) is an error wrapping
// ErrCorrupt.
func (q *Queue) ReplayJournal(start int64, units []byte) error {
	err := q.replayJournal(start, units)
	q.cache.maybeEvict()
	return err
}

func (q *Queue) replayJournal(start int64, units []byte) error {
	q.w.Lock()
	defer q.w.Unlock()
	if err := q.writableLocked(); err != nil {
		return fmt.Errorf("consumequeue: replay journal into %s: %w", q.name(), err)
	}
	for i := 0; i+UnitSize <= len(units); i += UnitSize {
		off := start + int64(i/UnitSize)
		u, _ := decodeUnit(units[i:])
		if off < q.mu.min {
			continue // retention dropped it since
		}
		if end := q.endLocked(); off > end {
			return fmt.Errorf("consumequeue: replay journal into %s: unit at %d, queue holds [%d, %d): %w",
				q.name(), off, q.mu.min, end, ErrCorrupt)
		}
		if off < q.endLocked() {
			have, _, err := q.writerUnitLocked(off)
			if err != nil {
				return fmt.Errorf("consumequeue: replay journal into %s at %d: %w", q.name(), off, err)
			}
			if have == u {
				continue
			}
			q.warn("consumequeue: unit differs from the journal's, truncating", "offset", off, "have", have, "journal", u)
			if err := q.truncateLocked(off); err != nil {
				return fmt.Errorf("consumequeue: replay journal into %s at %d: %w", q.name(), off, q.fail(err))
			}
		}
		if err := q.putLocked(off, u.phy, u.size, u.tags); err != nil {
			return fmt.Errorf("consumequeue: replay journal: %w", err)
		}
	}
	if err := q.flushLocked(); err != nil {
		return fmt.Errorf("consumequeue: replay journal into %s: %w", q.name(), q.fail(err))
	}
	return nil
}
