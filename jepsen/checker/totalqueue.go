package checker

import (
	"sort"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/jepsen/history"
)

// sendSummary is what the history says about one logical send (value).
type sendSummary struct {
	value string
	queue int
	outcomes
	okOffset    int64 // offset of the first acknowledged attempt
	okAt        int64 // completion of the first acknowledged attempt
	firstInvoke int64
}

// outcomes counts the attempts of one operation by outcome.
type outcomes struct{ ok, info, fail int }

func (o *outcomes) add(out history.Outcome) {
	switch out {
	case history.OK:
		o.ok++
	case history.Info:
		o.info++
	default:
		o.fail++
	}
}

// summarizeSends groups send attempts by value, in order of first
// invocation.
func summarizeSends(ops []history.Op) ([]*sendSummary, map[string]*sendSummary) {
	byValue := make(map[string]*sendSummary)
	var list []*sendSummary
	for i := range ops {
		op := &ops[i]
		if op.Kind != history.Send {
			continue
		}
		s := byValue[op.Value]
		if s == nil {
			s = &sendSummary{value: op.Value, queue: op.Queue, firstInvoke: op.Invoke}
			byValue[op.Value] = s
			list = append(list, s)
		}
		s.firstInvoke = min(s.firstInvoke, op.Invoke)
		if op.Outcome == history.OK && (s.ok == 0 || op.Complete < s.okAt) {
			s.okOffset, s.okAt = op.Offset, op.Complete
		}
		s.add(op.Outcome)
	}
	sort.SliceStable(list, func(a, b int) bool { return list[a].firstInvoke < list[b].firstInvoke })
	return list, byValue
}

// producerSeq splits a value "p<process>-<seq>" into its producer and
// sequence number; ok is false for other values.
func producerSeq(v string) (producer string, seq int64, ok bool) {
	i := strings.LastIndexByte(v, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return v[:i], n, true
}

// checkTotalQueue is Jepsen's total-queue checker on the final log: every
// acknowledged send must be in it (lost), everything in it must have been
// sent (unexpected), and with dedupe no value may be in it twice
// (duplicated). Lost values are split NATS-style by where they fall in
// their producer's sequence relative to the producer's values that did
// arrive: lost-prefix (before the first), lost-middle (between, the worst
// kind) and lost-postfix (after the last).
func checkTotalQueue(run *history.Run, final *FinalLog, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	list, byValue := summarizeSends(run.Ops)
	var attempts int64
	for i := range run.Ops {
		if run.Ops[i].Kind == history.Send {
			attempts++
		}
	}
	r.set("attempts", attempts)
	if final == nil {
		if len(run.Ops) == 0 {
			r.notef("empty history")
		} else {
			r.notef("skipped: no final log (no drain reads)")
		}
		return r.done()
	}

	var acked, okCount, lost, recovered, duplicated, unexpected, failedPresent int64
	// producer → range of sequence numbers that arrived
	type seqRange struct{ lo, hi int64 }
	arrived := make(map[string]seqRange)
	for _, s := range list {
		if len(final.Locations(s.value)) == 0 {
			continue
		}
		if p, n, ok := producerSeq(s.value); ok {
			rg, seen := arrived[p]
			if !seen {
				rg = seqRange{n, n}
			}
			rg.lo, rg.hi = min(rg.lo, n), max(rg.hi, n)
			arrived[p] = rg
		}
	}
	var lostPrefix, lostMiddle, lostPostfix int64
	for _, s := range list {
		locs := final.Locations(s.value)
		if s.ok > 0 {
			acked++
		}
		if len(locs) > 0 {
			okCount++
			if s.ok == 0 && s.info > 0 {
				recovered++
			}
			if s.ok == 0 && s.info == 0 {
				failedPresent++
			}
		}
		if s.ok > 0 && len(locs) == 0 {
			lost++
			kind := "lost"
			if p, n, ok := producerSeq(s.value); ok {
				rg, seen := arrived[p]
				switch {
				case !seen || n < rg.lo:
					kind = "lost-prefix"
					lostPrefix++
				case n > rg.hi:
					kind = "lost-postfix"
					lostPostfix++
				default:
					kind = "lost-middle"
					lostMiddle++
				}
			}
			r.errorf("%s: %s acked at queue %d offset %d at %s is not in the final log",
				kind, s.value, s.queue, s.okOffset, secs(s.okAt))
		}
	}
	// values of the final log: unexpected and duplicated
	qs := make([]int, 0, len(final.Queues))
	for q := range final.Queues {
		qs = append(qs, q)
	}
	sort.Ints(qs)
	reported := make(map[string]bool)
	for _, q := range qs {
		for o, v := range final.Queues[q] {
			if v == "" || reported[v] {
				continue
			}
			if byValue[v] == nil {
				unexpected++
				reported[v] = true
				r.errorf("unexpected: queue %d offset %d holds %s, which was never sent", q, o, v)
				continue
			}
			if locs := final.Locations(v); len(locs) > 1 {
				duplicated++
				reported[v] = true
				if run.Meta.Dedupe {
					r.errorf("duplicated: %s is in the final log %d times (%s) although the broker deduplicates",
						v, len(locs), describeLocs(locs))
				}
			}
		}
	}
	r.set("acknowledged", acked)
	r.set("ok", okCount)
	r.set("lost", lost)
	r.set("lost-prefix", lostPrefix)
	r.set("lost-middle", lostMiddle)
	r.set("lost-postfix", lostPostfix)
	r.set("unexpected", unexpected)
	r.set("duplicated", duplicated)
	r.set("recovered", recovered)
	r.set("failed-present", failedPresent)
	if duplicated > 0 && !run.Meta.Dedupe {
		r.notef("%d duplicated values allowed: the broker does not deduplicate", duplicated)
	}
	if failedPresent > 0 {
		r.notef("%d values whose every send failed are in the final log (see read-consistency, G1a)", failedPresent)
	}
	return r.done()
}

// describeLocs renders positions as "queue 1 offset 4, queue 1 offset 9".
func describeLocs(locs []Loc) string {
	parts := make([]string, len(locs))
	for i, l := range locs {
		parts[i] = "queue " + strconv.Itoa(l.Queue) + " offset " + strconv.FormatInt(l.Offset, 10)
	}
	return strings.Join(parts, ", ")
}
