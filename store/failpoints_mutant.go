//go:build mutant

package store

import (
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
)

// The failpoints of the store (internal/failpoint), compiled only with
// -tags mutant. Their hooks: Store.open (ack-before-fsync), applyMessage
// (no-dedupe), applyDelivery (schedule-in-memory), applyPop
// (revive-early); cluster's uncommitted-reads hook calls
// UncommittedRecords.

// ackBeforeFsync is the ack-before-fsync failpoint: the commit log
// acknowledges appends from the page cache and syncs once a second.
func ackBeforeFsync(o *commitlog.Options) {
	o.Flush, o.FlushInterval = commitlog.FlushAsync, time.Second
}

// noDedupe is the no-dedupe failpoint: a retried send whose UNIQ_KEY is
// already stored is never looked up, whatever dedupe said, and is queued
// again.
func noDedupe(dedupe bool) bool { return false }

// scheduleInMemory is the schedule-in-memory failpoint's side of the
// store: a delivery entry is applied from the cursor it carries (the
// leader's memory, cluster's memSchedule), not the replicated cursor cur,
// so a new leader's delivery from the start is applied again.
func scheduleInMemory(cur int64, d schedule.Delivery) int64 { return d.From }

// UncommittedRecords is the uncommitted-reads failpoint's read: it
// returns copies of the message records of topic/queueID found in the log
// past the applied index, numbered with provisional queue offsets that
// continue the consume queue, for offsets >= from (at most max records). A
// correct broker never calls it: it serves data that may be truncated.
func (s *Store) UncommittedRecords(topic string, queueID int32, from int64, max int) [][]byte {
	next := s.MaxOffset(topic, queueID)
	var out [][]byte
	lo := s.AppliedIndex() + 1
	if lo > s.clog.LastIndex() {
		return nil
	}
	_ = s.clog.Scan(lo, false, func(e commitlog.EntryRef) error {
		if e.Type != 0 || len(e.Body) == 0 {
			return nil
		}
		kind, _, payload, err := parseBody(e.Body)
		if err != nil || kind != KindMessages {
			return nil
		}
		for off := 0; off < len(payload) && len(out) < max; {
			v, err := message.Parse(payload[off:], false)
			if err != nil {
				break
			}
			rec := payload[off : off+v.Size]
			off += v.Size
			if string(v.Topic) != topic || v.QueueID != queueID {
				continue
			}
			if next >= from {
				cp := append([]byte(nil), rec...)
				message.PatchQueueOffset(cp, next)
				out = append(out, cp)
			}
			next++
		}
		return nil
	})
	return out
}

// reviveEarly is the revive-early failpoint: a pop or a change of
// invisible time hides its messages for a third of the time it asks, so
// the leader revives them, and hands them out again, while their
// consumer still holds them.
func reviveEarly(o *pop.Op) {
	if o.Type == pop.OpPop || o.Type == pop.OpChange {
		o.Invisible = max(o.Invisible/3, min(o.Invisible, 1))
	}
}
