//go:build mutant

package store

import (
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/message"
)

// UncommittedRecords is the uncommitted-reads mutant (internal/mutant),
// compiled only with -tags mutant (nomutant.go has the default build's): it
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
