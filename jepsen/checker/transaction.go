package checker

import (
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// TransactionChecker judges the transaction workload's transactional
// messages.
const TransactionChecker = "transaction"

// txnSum is what the history says about one transactional value.
type txnSum struct {
	queue int
	// sends: the TxnSend ops; decided: the local transaction's decision
	// ("" if it never ran); checks: the check-backs' answers.
	sends   []*history.Op
	decided string
	checks  map[string]int
}

// outcome is how the value's transaction must end: commit, rollback, or
// "" when nothing decided it (its half message was never stored, or its
// local transaction said unknown and no check-back came: it stays
// pending, invisible). conflict is set when the decisions disagree.
func (s *txnSum) outcome() (end string, conflict bool) {
	if s.decided == history.DecisionCommit || s.decided == history.DecisionRollback {
		end = s.decided
	}
	for d := range s.checks {
		switch {
		case end == "":
			end = d
		case d != end:
			conflict = true
		}
	}
	return end, conflict
}

// acked reports whether a send of the value was acknowledged: the half
// message stored, the local transaction run and its END_TRANSACTION
// accepted.
func (s *txnSum) acked() bool {
	for _, op := range s.sends {
		if op.Outcome == history.OK {
			return true
		}
	}
	return false
}

// checkTransaction is the transaction checker. With the history's TxnSend
// and TxnCheck ops and the drain of their topic (TopicPoll ops) it checks
// that
//
//   - every node drained the same topic (as final-log does);
//   - a committed value (its local transaction said commit, or a
//     check-back answered commit) is in the final log exactly once, if
//     its send was acknowledged or a check-back committed it (lost,
//     duplicated);
//   - a rolled-back value (its local transaction or a check-back said
//     rollback) is in no poll and not in the final log;
//   - a value nothing decided (the half message's send failed or was
//     indeterminate, or the local transaction said unknown and no
//     check-back came) is in no poll and not in the final log either: a
//     transaction ends only as its producer says;
//   - no value is in the topic that no transaction carried, and the
//     decisions recorded for one value never disagree (a harness error).
func checkTransaction(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	vals := map[string]*txnSum{}
	var topic string
	get := func(op *history.Op) *txnSum {
		s := vals[op.Value]
		if s == nil {
			s = &txnSum{queue: op.Queue, checks: map[string]int{}}
			vals[op.Value] = s
		}
		return s
	}
	checks := 0
	for i := range run.Ops {
		op := &run.Ops[i]
		switch op.Kind {
		case history.TxnSend:
			topic = op.Topic
			s := get(op)
			s.queue = op.Queue
			s.sends = append(s.sends, op)
			if op.Decision != "" {
				s.decided = op.Decision
			}
		case history.TxnCheck:
			checks++
			get(op).checks[op.Decision]++
		}
	}
	if len(vals) == 0 || topic == "" {
		r.notef("no transactional sends in this run")
		return r.done()
	}
	ends := map[string]string{}
	var committed, rolledBack, undecided, conflicts int64
	for _, v := range sortedValues(vals) {
		s := vals[v]
		end, conflict := s.outcome()
		if conflict {
			conflicts++
			r.errorf("%s: %s: the local transaction said %q and check-backs answered %v: the harness decided it two ways", topic, v, s.decided, s.checks)
		}
		ends[v] = end
		switch end {
		case history.DecisionCommit:
			committed++
		case history.DecisionRollback:
			rolledBack++
		default:
			undecided++
		}
	}
	r.set("values", int64(len(vals)))
	r.set("committed", committed)
	r.set("rolled-back", rolledBack)
	r.set("undecided", undecided)
	r.set("check-backs", int64(checks))
	r.set("conflicts", conflicts)

	// Polls: only committed values may be seen.
	var badReads int64
	reported := map[string]bool{}
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.TopicPoll || op.Topic != topic || op.Outcome != history.OK {
			continue
		}
		for _, m := range op.Msgs {
			s := vals[m.Value]
			if s == nil || ends[m.Value] == history.DecisionCommit {
				continue // never sent: reported with the final log
			}
			badReads++
			if !reported[m.Value] {
				reported[m.Value] = true
				r.errorf("%s: a poll of node %d at %s read %s (queue %d offset %d), whose transaction %s",
					topic, op.Node, secs(op.Invoke), m.Value, op.Queue, m.Offset, fate(s, ends[m.Value]))
			}
		}
	}
	r.set("reads-not-committed", badReads)

	final, ok := topicFinalLog(r, run, topic, run.Meta.Queues, opts)
	if !ok {
		return r.done()
	}
	r.set("messages", final.Size())
	var lost, dup, visible, unexpected int64
	for _, v := range sortedValues(vals) {
		s := vals[v]
		locs := final.Locations(v)
		switch ends[v] {
		case history.DecisionCommit:
			if len(locs) == 0 && (s.acked() || len(s.checks) > 0) {
				lost++
				r.errorf("%s: %s was %s but is not in the final log (lost)", topic, v, fate(s, ends[v]))
			}
			if len(locs) > 1 {
				dup++
				r.errorf("%s: committed %s is stored at %s (duplicated)", topic, v, formatLocs(locs))
			}
		default:
			if len(locs) > 0 {
				visible++
				r.errorf("%s: %s is in the final log at %s, but its transaction %s", topic, v, formatLocs(locs), fate(s, ends[v]))
			}
		}
	}
	var strays []string
	for _, vs := range final.Queues {
		for _, v := range vs {
			if v != "" && vals[v] == nil {
				strays = append(strays, v)
				unexpected++
			}
		}
	}
	sort.Strings(strays)
	for _, v := range strays {
		r.errorf("%s: %s is in the final log but no transaction carried it (unexpected)", topic, v)
	}
	r.set("lost", lost)
	r.set("duplicated", dup)
	r.set("not-committed-stored", visible)
	r.set("unexpected", unexpected)
	return r.done()
}

// fate describes how a value's transaction ended, for errors.
func fate(s *txnSum, end string) string {
	switch {
	case end == history.DecisionCommit && s.decided == history.DecisionCommit:
		return "was committed by its producer"
	case end == history.DecisionCommit:
		return "was committed by a check-back"
	case end == history.DecisionRollback && s.decided == history.DecisionRollback:
		return "was rolled back by its producer"
	case end == history.DecisionRollback:
		return "was rolled back by a check-back"
	case s.decided == history.DecisionUnknown:
		return "was left unknown and never checked back (still pending)"
	}
	return "was never decided (its half message's send did not succeed)"
}
