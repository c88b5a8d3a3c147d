package checker

import (
	"fmt"

	"github.com/raftmq/raftmq/jepsen/history"
)

// observation is the first time a (queue, offset) was seen with a value
// beyond the final log (or anywhere, without a final log).
type observation struct {
	value string
	what  string
}

// qo is a queue offset.
type qo struct {
	queue  int
	offset int64
}

// checkReadConsistency is the O(n) version-order check: every message an
// ok poll returned (drains included) and every acknowledged send must
// agree with the final log at its queue offset. It reports
// inconsistent offsets (a different value there), reads of uncommitted or
// lost data (a value the final log does not hold), acknowledgements the
// final log contradicts, G1a (a read of a value whose every send failed)
// and reads of values never sent. Without a final log it still checks
// that observations agree with each other.
func checkReadConsistency(run *history.Run, final *FinalLog, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	if len(run.Ops) == 0 {
		r.notef("empty history")
		return r.done()
	}
	if final == nil {
		r.notef("no final log: observations only checked against each other")
	}
	_, sends := summarizeSends(run.Ops)
	seen := make(map[qo]observation) // observations not covered by the final log
	firstAt := make(map[string]qo)   // where a value was first observed
	dupReported := make(map[string]bool)
	var reads, inconsistent, uncommitted, g1a, neverSent, dups, acks, badAcks int64

	// observe checks one (queue, offset, value) observation.
	observe := func(q int, o int64, v, what string) {
		if fv, ok := final.At(q, o); ok {
			if fv != v {
				if locs := final.Locations(v); len(locs) == 0 {
					uncommitted++
					r.errorf("queue %d offset %d: %s read %s, which is not in the final log (read of uncommitted/lost data; final log has %s there)",
						q, o, what, v, fv)
				} else {
					inconsistent++
					r.errorf("queue %d offset %d: %s read %s but final log has %s (%s is at %s)",
						q, o, what, v, fv, v, describeLocs(locs))
				}
			}
		} else if final != nil {
			if locs := final.Locations(v); len(locs) == 0 {
				uncommitted++
				r.errorf("queue %d offset %d: %s read %s, which is not in the final log (read of uncommitted/lost data; the queue ends at offset %d)",
					q, o, what, v, final.Len(q))
			} else {
				inconsistent++
				r.errorf("queue %d offset %d: %s read %s beyond the end of the final log (offset %d), which has it at %s",
					q, o, what, v, final.Len(q), describeLocs(locs))
			}
		} else {
			k := qo{q, o}
			if prev, ok := seen[k]; !ok {
				seen[k] = observation{value: v, what: what}
			} else if prev.value != v {
				inconsistent++
				r.errorf("queue %d offset %d: %s read %s but %s read %s (inconsistent offsets)",
					q, o, what, v, prev.what, prev.value)
			}
		}
		// one value at two positions
		k := qo{q, o}
		if prev, ok := firstAt[v]; !ok {
			firstAt[v] = k
		} else if prev != k && !dupReported[v] {
			dupReported[v] = true
			dups++
			if final == nil && run.Meta.Dedupe {
				r.errorf("%s seen at queue %d offset %d and at queue %d offset %d although the broker deduplicates (duplicate)",
					v, prev.queue, prev.offset, q, o)
			}
		}
	}

	for i := range run.Ops {
		op := &run.Ops[i]
		switch {
		case op.Kind == history.Poll && op.Outcome == history.OK:
			what := fmt.Sprintf("poll by process %d on node %d at %s", op.Process, op.Node, secs(op.Complete))
			if op.Drain {
				what = fmt.Sprintf("drain of node %d", op.Node)
			}
			for _, m := range op.Msgs {
				reads++
				observe(op.Queue, m.Offset, m.Value, what)
				s := sends[m.Value]
				switch {
				case s == nil:
					neverSent++
					r.errorf("queue %d offset %d: %s read %s, which was never sent", op.Queue, m.Offset, what, m.Value)
				case s.ok == 0 && s.info == 0:
					g1a++
					r.errorf("queue %d offset %d: %s read %s, whose send failed (G1a)", op.Queue, m.Offset, what, m.Value)
				case s.queue != op.Queue:
					inconsistent++
					r.errorf("queue %d offset %d: %s read %s, which was sent to queue %d", op.Queue, m.Offset, what, m.Value, s.queue)
				}
			}
		case op.Kind == history.Send && op.Outcome == history.OK:
			acks++
			if final == nil {
				observe(op.Queue, op.Offset, op.Value, fmt.Sprintf("send by process %d (ack at %s)", op.Process, secs(op.Complete)))
				continue
			}
			fv, ok := final.At(op.Queue, op.Offset)
			switch {
			case ok && fv == op.Value:
			case ok:
				badAcks++
				r.errorf("queue %d offset %d: acked %s at %s but final log has %s", op.Queue, op.Offset, op.Value, secs(op.Complete), fv)
			default:
				badAcks++
				r.errorf("queue %d offset %d: acked %s at %s but the final log ends at offset %d", op.Queue, op.Offset, op.Value, secs(op.Complete), final.Len(op.Queue))
			}
		}
	}
	r.set("reads", reads)
	r.set("acks-checked", acks)
	r.set("ack-mismatches", badAcks)
	r.set("inconsistent-offsets", inconsistent)
	r.set("uncommitted-reads", uncommitted)
	r.set("g1a", g1a)
	r.set("never-sent-reads", neverSent)
	r.set("duplicates", dups)
	return r.done()
}
