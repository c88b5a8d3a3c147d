package checker

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// RetryChecker judges the retry workload's consumer retries and dead
// letters.
const RetryChecker = "retry"

// retrySum is what the history says about one value of the retry
// workload.
type retrySum struct {
	queue, failures, max int
	group                string
	outcomes
	delivers []*history.Op
}

// checkRetry is the retry checker. With the history's RetrySend and
// RetryDeliver ops and the drains of the topic and of the group's
// dead-letter topic %DLQ%group (TopicPoll ops) it checks, for every value:
//
//   - an acknowledged send is in the topic's final log (lost);
//   - a value planned to fail at most MaxReconsume times is consumed
//     successfully (never-consumed), only with a reconsume count equal to
//     its planned failures (reconsume-mismatch), after a failed delivery
//     at each lower count (missing-retry), and is not in the dead-letter
//     queue (dead-lettered-early);
//   - a value planned to fail more often is in the dead-letter queue once
//     its last delivery failed at reconsume count MaxReconsume (not
//     dead-lettered), and is never consumed successfully;
//   - no value is both consumed and dead-lettered, and nothing that was
//     never sent, or whose sends all failed, is delivered or
//     dead-lettered (unexpected).
//
// A consumer whose send-back fails (no node reachable, or an answer lost)
// consumes the message again itself, its reconsume count one higher, as
// RocketMQ's clients do, with no maximum; meanwhile the send-back may have
// been stored after all, and that copy goes on to the dead-letter queue.
// Such local retries are deliveries from the same topic (a RetryDeliver's
// Topic is the one it was consumed from: the topic, or the group's retry
// topic for a broker's retry), queue and offset as an earlier delivery of
// the value with a lower count: the two rules about the maximum above do
// not count their successes, and a value past the maximum that a local
// retry consumed need not be in the dead-letter queue (its send-back
// failed, so the broker may never have stored it).
//
// Values whose sends were only indeterminate are judged only if they were
// delivered.
func checkRetry(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	vals := map[string]*retrySum{}
	var topic, group string
	for i := range run.Ops {
		op := &run.Ops[i]
		switch op.Kind {
		case history.RetrySend:
			topic, group = op.Topic, op.Group
			s := vals[op.Value]
			if s == nil {
				s = &retrySum{queue: op.Queue, failures: op.Failures, max: op.MaxReconsume, group: op.Group}
				vals[op.Value] = s
			}
			s.add(op.Outcome)
		}
	}
	if len(vals) == 0 {
		r.notef("no retry sends in this run")
		return r.done()
	}
	var strayDelivers []string
	deliveries := 0
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.RetryDeliver {
			continue
		}
		deliveries++
		s := vals[op.Value]
		if s == nil {
			strayDelivers = append(strayDelivers, fmt.Sprintf("%s (at %s)", op.Value, secs(op.Invoke)))
			continue
		}
		s.delivers = append(s.delivers, op)
	}
	r.set("values", int64(len(vals)))
	r.set("deliveries", int64(deliveries))

	final, okFinal := topicFinalLog(r, run, topic, run.Meta.Queues, opts)
	dlqTopic := "%DLQ%" + group
	dlq, okDLQ := topicFinalLog(r, run, dlqTopic, 1, opts)
	if okDLQ {
		r.set("dead-letters", dlq.Size())
	}

	var lost, never, mismatch, missingRetry, notDead, earlyDead, consumedPastMax, both, unexpected, retried, deadLettered int64
	for _, v := range sortedValues(vals) {
		s := vals[v]
		if okFinal && s.ok > 0 && len(final.Locations(v)) == 0 {
			lost++
			r.errorf("%s: acknowledged send %s is not in the final log (lost)", topic, v)
		}
		if s.ok == 0 && s.info == 0 {
			if len(s.delivers) > 0 || (okDLQ && len(dlq.Locations(v)) > 0) {
				unexpected++
				r.errorf("%s: %s was delivered or dead-lettered, but its only send failed (unexpected)", topic, v)
			}
			continue
		}
		if s.ok == 0 && len(s.delivers) == 0 {
			continue // indeterminate and never seen: not judged
		}
		if s.failures > 0 {
			retried++
		}
		successes := map[int]int{} // reconsume count -> successful deliveries
		brokerSuccesses := 0       // of them, deliveries not local retries
		localSuccesses := 0        // and local retries
		failedAt := map[int]bool{}
		type at struct {
			topic  string
			queue  int
			offset int64
		}
		firstCount := map[at]int{} // lowest reconsume count delivered from each queue offset
		for _, d := range s.delivers {
			k := at{d.Topic, d.Queue, d.Offset}
			first, seen := firstCount[k]
			local := seen && d.Reconsume > first
			if !seen || d.Reconsume < first {
				firstCount[k] = d.Reconsume
			}
			if d.Decision == history.DecisionSuccess {
				successes[d.Reconsume]++
				if local {
					localSuccesses++
				} else {
					brokerSuccesses++
				}
			} else {
				failedAt[d.Reconsume] = true
			}
		}
		inDLQ := okDLQ && len(dlq.Locations(v)) > 0
		if inDLQ {
			deadLettered++
		}
		if brokerSuccesses > 0 && inDLQ {
			both++
			r.errorf("%s: %s was consumed and is in %s too", topic, v, dlqTopic)
		}
		if s.failures <= s.max {
			if len(successes) == 0 {
				never++
				r.errorf("%s: %s, to be failed %d times, was never consumed successfully (deliveries: %s)", topic, v, s.failures, formatDelivers(s.delivers))
			}
			for _, n := range sortedInts(successes) {
				if n != s.failures {
					mismatch++
					r.errorf("%s: %s, to be failed %d times, was consumed with reconsume count %d", topic, v, s.failures, n)
				}
			}
			if len(successes) > 0 {
				for n := 0; n < s.failures; n++ {
					if !failedAt[n] {
						missingRetry++
						r.errorf("%s: %s was consumed after %d failures, but no delivery with reconsume count %d was seen", topic, v, s.failures, n)
					}
				}
			}
			if inDLQ && len(successes) == 0 {
				earlyDead++
				r.errorf("%s: %s, to be failed only %d times (max %d), is in %s", topic, v, s.failures, s.max, dlqTopic)
			}
			continue
		}
		// Planned to fail past the maximum: dead letter.
		if brokerSuccesses > 0 {
			consumedPastMax++
			r.errorf("%s: %s was consumed with reconsume count %v, past the maximum %d: it should have been dead-lettered",
				topic, v, sortedInts(successes), s.max)
		}
		if localSuccesses > 0 {
			// Its last send-back failed and the consumer took it itself:
			// consumed, not lost, and in the dead-letter queue only if
			// that send-back was stored after all.
			continue
		}
		if okDLQ && !inDLQ && failedAt[s.max] {
			notDead++
			r.errorf("%s: %s failed its delivery with reconsume count %d (the maximum) but is not in %s (lost)", topic, v, s.max, dlqTopic)
		} else if okDLQ && !inDLQ && s.ok > 0 {
			notDead++
			r.errorf("%s: %s, to be failed %d times (max %d), is neither consumed nor in %s (deliveries: %s)",
				topic, v, s.failures, s.max, dlqTopic, formatDelivers(s.delivers))
		}
	}
	// Dead letters and deliveries of values never sent.
	if okDLQ {
		for _, vs := range dlq.Queues {
			for _, v := range vs {
				if v != "" && vals[v] == nil {
					strayDelivers = append(strayDelivers, v+" (dead letter)")
				}
			}
		}
	}
	sort.Strings(strayDelivers)
	for _, v := range strayDelivers {
		unexpected++
		r.errorf("%s: %s was never sent (unexpected)", topic, v)
	}
	r.set("retried-values", retried)
	r.set("dead-lettered", deadLettered)
	r.set("lost", lost)
	r.set("never-consumed", never)
	r.set("reconsume-mismatch", mismatch)
	r.set("missing-retry", missingRetry)
	r.set("not-dead-lettered", notDead)
	r.set("dead-lettered-early", earlyDead)
	r.set("consumed-past-max", consumedPastMax)
	r.set("consumed-and-dead", both)
	r.set("unexpected", unexpected)
	return r.done()
}

func formatDelivers(ds []*history.Op) string {
	if len(ds) == 0 {
		return "none"
	}
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s at %s with count %d", d.Decision, secs(d.Invoke), d.Reconsume)
	}
	return s
}

func sortedInts(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
