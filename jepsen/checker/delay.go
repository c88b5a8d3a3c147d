package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// DelayChecker judges the delay workload's delayed and timer messages.
const DelayChecker = "delay"

// DelayTolerance is how much earlier than its send's invocation plus its
// delay a delayed message may be seen: the harness and the brokers share
// one machine's clock, so only scheduling noise separates them.
const DelayTolerance = 100 * time.Millisecond

// delaySum is what the history says about one delayed value.
type delaySum struct {
	value       string
	queue       int
	delay       time.Duration
	firstInvoke int64
	attempts    int
	outcomes
}

// checkDelay is the delay checker. With the history's DelaySend ops and the
// drain of their topic (TopicPoll ops) it checks that
//
//   - every node drained the same topic (as final-log does for the main
//     topic);
//   - every acknowledged delayed send is in the final log (lost);
//   - no value is stored at two offsets (duplicated: a schedule entry
//     delivered twice), except values whose send was repeated by the
//     client, which are only counted (duplicated-retried); no value is
//     in the final log that no send, or only failed sends, carried
//     (unexpected), nor in a queue other than the one it was sent to;
//   - no poll (drains included) returned a delayed message before its
//     first send attempt's invocation plus its delay, minus
//     DelayTolerance (early). Skipped in runs with the clock nemesis,
//     which skews the brokers' clocks by up to a minute.
func checkDelay(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	sends := map[string]*delaySum{}
	var topic string
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.DelaySend {
			continue
		}
		topic = op.Topic
		s := sends[op.Value]
		if s == nil {
			s = &delaySum{value: op.Value, queue: op.Queue, delay: time.Duration(op.DelayMs) * time.Millisecond, firstInvoke: op.Invoke}
			sends[op.Value] = s
		}
		s.firstInvoke = min(s.firstInvoke, op.Invoke)
		s.attempts++
		s.add(op.Outcome)
	}
	if len(sends) == 0 {
		r.notef("no delayed sends in this run")
		return r.done()
	}
	var acked, indeterminate int64
	for _, s := range sends {
		if s.ok > 0 {
			acked++
		} else if s.info > 0 {
			indeterminate++
		}
	}
	r.set("values", int64(len(sends)))
	r.set("acked", acked)
	r.set("indeterminate", indeterminate)

	final, ok := topicFinalLog(r, run, topic, run.Meta.Queues, opts)
	checkEarly(r, run, topic, sends)
	if !ok {
		return r.done()
	}
	r.set("messages", final.Size())

	var lost, recovered, dup, dupRetried, unexpected, misrouted int64
	for _, v := range sortedValues(sends) {
		s := sends[v]
		locs := final.Locations(v)
		switch {
		case s.ok > 0 && len(locs) == 0:
			lost++
			r.errorf("%s: acknowledged delayed send %s (queue %d, delay %v, sent at %s) is not in the final log (lost)",
				topic, v, s.queue, s.delay, secs(s.firstInvoke))
		case s.ok == 0 && len(locs) > 0:
			if s.info > 0 {
				recovered++
			} else {
				unexpected++
				r.errorf("%s: %s is in the final log at queue %d offset %d, but its only send failed (unexpected)",
					topic, v, locs[0].Queue, locs[0].Offset)
			}
		}
		if len(locs) > 1 {
			if s.attempts > 1 {
				dupRetried++
			} else {
				dup++
				r.errorf("%s: %s is stored at %s: a delayed message delivered more than once (duplicated)", topic, v, formatLocs(locs))
			}
		}
		for _, l := range locs {
			if l.Queue != s.queue {
				misrouted++
				r.errorf("%s: %s was sent to queue %d but is at queue %d offset %d (misrouted)", topic, v, s.queue, l.Queue, l.Offset)
				break
			}
		}
	}
	// Values no send carried.
	var strays []string
	for q, vals := range final.Queues {
		for o, v := range vals {
			if v != "" && sends[v] == nil {
				unexpected++
				strays = append(strays, fmt.Sprintf("%s at queue %d offset %d", v, q, o))
			}
		}
	}
	sort.Strings(strays)
	for _, s := range strays {
		r.errorf("%s: %s was never sent (unexpected)", topic, s)
	}
	r.set("lost", lost)
	r.set("recovered", recovered)
	r.set("duplicated", dup)
	r.set("duplicated-retried", dupRetried)
	r.set("unexpected", unexpected)
	r.set("misrouted", misrouted)
	return r.done()
}

// checkEarly is the delay checker's rule on early deliveries.
func checkEarly(r *report, run *history.Run, topic string, sends map[string]*delaySum) {
	if slices.Contains(run.Meta.Nemesis, "clock") || slices.Contains(run.Meta.Nemesis, "all") {
		r.notef("early deliveries not checked: the clock nemesis skews the brokers' clocks")
		return
	}
	tol := int64(DelayTolerance)
	minMargin, haveMargin, seen := int64(0), false, map[string]bool{}
	var early, observed int64
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.TopicPoll || op.Topic != topic || op.Outcome != history.OK {
			continue
		}
		for _, m := range op.Msgs {
			s := sends[m.Value]
			if s == nil {
				continue
			}
			due := s.firstInvoke + int64(s.delay)
			margin := op.Complete - due
			if !seen[m.Value] {
				seen[m.Value] = true
				observed++
			}
			if !haveMargin || margin < minMargin {
				minMargin, haveMargin = margin, true
			}
			if margin < -tol {
				early++
				r.errorf("%s: %s (delay %v, first sent at %s) was returned by a poll of node %d completed at %s, %v before it was due (early)",
					topic, m.Value, s.delay, secs(s.firstInvoke), op.Node, secs(op.Complete), time.Duration(-margin).Round(time.Millisecond))
			}
		}
	}
	r.set("early", early)
	r.set("observed", observed)
	if observed > 0 {
		r.set("min-margin-ms", minMargin/1e6)
	}
}

// topicFinalLog builds the final log of topic (queues 0..queues-1) from
// its drain reads (TopicPoll ops), reporting the nodes' disagreements as
// the final-log checker does, prefixed with the topic. ok is false when
// there is no drain.
func topicFinalLog(r *report, run *history.Run, topic string, queues int, opts Options) (*FinalLog, bool) {
	sub := &history.Run{Meta: run.Meta}
	sub.Meta.Queues = queues
	for i := range run.Ops {
		op := run.Ops[i]
		if op.Kind == history.TopicPoll && op.Topic == topic && op.Drain {
			op.Kind = history.Poll
			sub.Ops = append(sub.Ops, op)
		}
	}
	if len(sub.Ops) == 0 {
		r.errorf("%s: no drain reads: its final log is unknown", topic)
		return nil, false
	}
	final, fr := checkFinalLog(sub, opts)
	for _, e := range fr.Errors {
		r.errorf("%s: %s", topic, e)
	}
	if !fr.Valid {
		r.add("final-log-errors", int64(max(len(fr.Errors), 1)))
	}
	return final, final != nil
}

func formatLocs(locs []Loc) string {
	s := ""
	for i, l := range locs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("queue %d offset %d", l.Queue, l.Offset)
	}
	return s
}

func sortedValues[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
