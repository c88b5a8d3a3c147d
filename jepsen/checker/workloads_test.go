package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Hand-built histories of the delay, transaction and retry workloads
// (times in ms): each passes its checker, and each mutation breaks one
// rule.

// topicPoll records an ok poll of topic's queue q returning vals at
// consecutive offsets from from, completed at comp.
func (b *builder) topicPoll(topic string, node, q int, from, inv, comp int64, vals ...string) int {
	msgs := make([]history.Msg, len(vals))
	for i, v := range vals {
		msgs[i] = history.Msg{Offset: from + int64(i), Value: v}
	}
	return b.add(history.Op{Process: 50 + node, Kind: history.TopicPoll, Topic: topic, Queue: q, Offset: from,
		Next: from + int64(len(vals)), Msgs: msgs, Node: node, Invoke: inv * ms, Complete: comp * ms, Outcome: history.OK})
}

// topicDrain records the same final read of topic's queue q on nodes 1..3.
func (b *builder) topicDrain(topic string, q int, t int64, vals ...string) {
	for n := 1; n <= 3; n++ {
		i := b.topicPoll(topic, n, q, 0, t, t+1, vals...)
		b.run.Ops[i].Drain = true
	}
}

const delayTopic = "delayed"

func (b *builder) delaySend(value string, q int, delayMs, inv, comp int64, out history.Outcome, attempt int) {
	b.add(history.Op{Process: 1, Kind: history.DelaySend, Topic: delayTopic, Queue: q, Value: value, DelayMs: delayMs,
		Attempt: attempt, Invoke: inv * ms, Complete: comp * ms, Outcome: out})
}

// delayHistory: a (1 s) and b (2 s) acknowledged, c indeterminate and
// delivered, d failed; a poll sees a and b after they are due.
func delayHistory() *builder {
	b := newBuilder()
	b.delaySend("a", 0, 1000, 0, 10, history.OK, 1)
	b.delaySend("b", 1, 2000, 5, 15, history.OK, 1)
	b.delaySend("c", 0, 1000, 20, 1520, history.Info, 1)
	b.delaySend("d", 1, 1000, 30, 40, history.Fail, 1)
	b.topicPoll(delayTopic, 2, 0, 0, 900, 950)
	b.topicPoll(delayTopic, 2, 0, 0, 980, 991, "a")
	b.topicPoll(delayTopic, 1, 1, 0, 2010, 2020, "b")
	b.topicDrain(delayTopic, 0, 5000, "a", "c")
	b.topicDrain(delayTopic, 1, 5000, "b")
	return b
}

func TestDelayCheckerValid(t *testing.T) {
	res := checkDelay(&delayHistory().run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(1), res.Counts["recovered"])
	require.Equal(t, int64(3), res.Counts["observed"])
	require.Equal(t, int64(-9), res.Counts["min-margin-ms"], "a seen 9 ms before due: within the tolerance")
}

func TestDelayCheckerCatches(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b *builder)
		count  string
	}{
		"lost": {func(b *builder) {
			b.delaySend("e", 1, 1000, 50, 60, history.OK, 1)
		}, "lost"},
		"delivered twice": {func(b *builder) {
			b.topicDrain(delayTopic, 0, 6000, "a", "c", "a")
		}, "duplicated"},
		"failed send delivered": {func(b *builder) {
			b.topicDrain(delayTopic, 1, 6000, "b", "d")
		}, "unexpected"},
		"never sent": {func(b *builder) {
			b.topicDrain(delayTopic, 1, 6000, "b", "zz")
		}, "unexpected"},
		"early": {func(b *builder) {
			b.topicPoll(delayTopic, 3, 1, 0, 1500, 1600, "b") // due at 2005
		}, "early"},
		"misrouted": {func(b *builder) {
			b.topicDrain(delayTopic, 1, 6000, "b", "a")
			b.topicDrain(delayTopic, 0, 6000, "c")
		}, "misrouted"},
		"nodes disagree": {func(b *builder) {
			i := b.topicPoll(delayTopic, 3, 1, 0, 6000, 6001, "b", "x")
			b.run.Ops[i].Drain = true
		}, "final-log-errors"},
	} {
		t.Run(name, func(t *testing.T) {
			b := delayHistory()
			tc.mutate(b)
			res := checkDelay(&b.run, Options{}.withDefaults())
			require.False(t, res.Valid, "%s not caught", name)
			require.Positive(t, res.Counts[tc.count], "%v %v", res.Counts, res.Errors)
		})
	}
}

func TestDelayCheckerAllowances(t *testing.T) {
	// A value whose send was repeated may be stored twice; with the clock
	// nemesis early deliveries are not judged.
	b := delayHistory()
	b.delaySend("a", 0, 1000, 11, 12, history.OK, 2)
	b.topicDrain(delayTopic, 0, 6000, "a", "c", "a")
	b.topicPoll(delayTopic, 3, 1, 0, 1500, 1600, "b")
	b.run.Meta.Nemesis = []string{"clock"}
	res := checkDelay(&b.run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(1), res.Counts["duplicated-retried"])
	require.Contains(t, res.Note, "not checked")

	res = checkDelay(&newBuilder().run, Options{}.withDefaults())
	require.True(t, res.Valid)
	require.NotEmpty(t, res.Note)
}

const txnTopic = "txn"

func (b *builder) txnSend(value string, q int, decision string, out history.Outcome) {
	b.add(history.Op{Process: 1, Kind: history.TxnSend, Topic: txnTopic, Queue: q, Value: value, Decision: decision,
		Invoke: 10 * ms, Complete: 20 * ms, Outcome: out})
}

func (b *builder) txnCheck(value, decision string) {
	b.add(history.Op{Process: 2, Kind: history.TxnCheck, Topic: txnTopic, Value: value, Decision: decision,
		Invoke: 1000 * ms, Complete: 1000 * ms, Outcome: history.OK})
}

// txnHistory: c committed, r rolled back, u unknown then committed by its
// check-back, v unknown then rolled back, p unknown never checked, f's
// half message failed, i's was indeterminate (never stored).
func txnHistory() *builder {
	b := newBuilder()
	b.txnSend("c", 0, history.DecisionCommit, history.OK)
	b.txnSend("r", 0, history.DecisionRollback, history.OK)
	b.txnSend("u", 1, history.DecisionUnknown, history.OK)
	b.txnSend("v", 1, history.DecisionUnknown, history.OK)
	b.txnSend("p", 1, history.DecisionUnknown, history.OK)
	b.txnSend("f", 0, "", history.Fail)
	b.txnSend("i", 0, "", history.Info)
	b.txnCheck("u", history.DecisionCommit)
	b.txnCheck("v", history.DecisionRollback)
	b.txnCheck("v", history.DecisionRollback)
	b.topicPoll(txnTopic, 2, 0, 0, 30, 31, "c")
	b.topicPoll(txnTopic, 2, 1, 0, 1100, 1101, "u")
	b.topicDrain(txnTopic, 0, 5000, "c")
	b.topicDrain(txnTopic, 1, 5000, "u")
	return b
}

func TestTransactionCheckerValid(t *testing.T) {
	res := checkTransaction(&txnHistory().run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(2), res.Counts["committed"])
	require.Equal(t, int64(2), res.Counts["rolled-back"])
	require.Equal(t, int64(3), res.Counts["undecided"])
}

func TestTransactionCheckerCatches(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b *builder)
		count  string
	}{
		"commit lost": {func(b *builder) {
			b.txnSend("c2", 0, history.DecisionCommit, history.OK)
		}, "lost"},
		"check-back commit lost": {func(b *builder) {
			b.txnSend("u2", 0, history.DecisionUnknown, history.OK)
			b.txnCheck("u2", history.DecisionCommit)
		}, "lost"},
		"committed twice": {func(b *builder) {
			b.topicDrain(txnTopic, 0, 6000, "c", "c")
		}, "duplicated"},
		"rollback read": {func(b *builder) {
			b.topicPoll(txnTopic, 3, 0, 1, 40, 41, "r")
		}, "reads-not-committed"},
		"rollback stored": {func(b *builder) {
			b.topicDrain(txnTopic, 0, 6000, "c", "r")
		}, "not-committed-stored"},
		"check-back rollback stored": {func(b *builder) {
			b.topicDrain(txnTopic, 1, 6000, "u", "v")
		}, "not-committed-stored"},
		"pending delivered": {func(b *builder) {
			b.topicDrain(txnTopic, 1, 6000, "u", "p")
		}, "not-committed-stored"},
		"half visible before its end": {func(b *builder) {
			b.topicPoll(txnTopic, 3, 1, 0, 500, 501, "u")
			b.topicPoll(txnTopic, 3, 0, 1, 500, 501, "f")
		}, "reads-not-committed"},
		"never sent": {func(b *builder) {
			b.topicDrain(txnTopic, 0, 6000, "c", "zz")
		}, "unexpected"},
		"conflicting decisions": {func(b *builder) {
			b.txnCheck("r", history.DecisionCommit)
		}, "conflicts"},
	} {
		t.Run(name, func(t *testing.T) {
			b := txnHistory()
			tc.mutate(b)
			res := checkTransaction(&b.run, Options{}.withDefaults())
			require.False(t, res.Valid, "%s not caught", name)
			require.Positive(t, res.Counts[tc.count], "%v %v", res.Counts, res.Errors)
		})
	}
}

const retryTopic = "rt"

var retryDLQTopic = "%DLQ%rg"

func (b *builder) retrySend(value string, q, failures int, out history.Outcome) {
	b.add(history.Op{Process: 1, Kind: history.RetrySend, Topic: retryTopic, Group: "rg", Queue: q, Value: value,
		Failures: failures, MaxReconsume: 1, Attempt: 1, Invoke: 10 * ms, Complete: 20 * ms, Outcome: out})
}

// retryDeliver records a delivery by a broker: of the message itself at
// reconsume count 0, else of a retry copy from the group's retry topic,
// each at an offset of its own.
func (b *builder) retryDeliver(value string, reconsume int, decision string, at int64) {
	topic := retryTopic
	if reconsume > 0 {
		topic = "%RETRY%rg"
	}
	b.add(history.Op{Process: 3, Kind: history.RetryDeliver, Topic: topic, Group: "rg", Value: value, Offset: b.id,
		Reconsume: reconsume, Decision: decision, Invoke: at * ms, Complete: at * ms, Outcome: history.OK})
}

// localRetry records the consumer's own retry of value's latest delivery
// (its send-back failed): the same topic, queue and offset, the count
// one higher.
func (b *builder) localRetry(value string, decision string, at int64) {
	for i := len(b.run.Ops) - 1; i >= 0; i-- {
		if op := b.run.Ops[i]; op.Kind == history.RetryDeliver && op.Value == value {
			op.Reconsume++
			op.Decision, op.Invoke, op.Complete = decision, at*ms, at*ms
			b.add(op)
			return
		}
	}
	panic("no delivery of " + value)
}

// emptyDLQ replaces the history's drains of the dead-letter topic by one
// that finds it empty, at ms.
func (b *builder) emptyDLQ(at int64) {
	ops := b.run.Ops[:0]
	for _, op := range b.run.Ops {
		if op.Topic != retryDLQTopic {
			ops = append(ops, op)
		}
	}
	b.run.Ops = ops
	b.topicDrain(retryDLQTopic, 0, at)
}

// retryHistory (max 1): z consumed at once, o after one failure, t failed
// twice: dead-lettered after its second failure.
func retryHistory() *builder {
	b := newBuilder()
	b.retrySend("z", 0, 0, history.OK)
	b.retrySend("o", 0, 1, history.OK)
	b.retrySend("t", 1, 2, history.OK)
	b.retrySend("f", 1, 0, history.Fail)
	b.retryDeliver("z", 0, history.DecisionSuccess, 30)
	b.retryDeliver("o", 0, history.DecisionLater, 30)
	b.retryDeliver("t", 0, history.DecisionLater, 30)
	b.retryDeliver("o", 1, history.DecisionSuccess, 10030)
	b.retryDeliver("t", 1, history.DecisionLater, 10030)
	b.topicDrain(retryTopic, 0, 20000, "z", "o")
	b.topicDrain(retryTopic, 1, 20000, "t")
	b.topicDrain(retryDLQTopic, 0, 20000, "t")
	return b
}

func TestRetryCheckerValid(t *testing.T) {
	res := checkRetry(&retryHistory().run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(1), res.Counts["dead-lettered"])
	require.Equal(t, int64(2), res.Counts["retried-values"])
}

// A consumer whose send-back failed retries by itself, past the maximum,
// while the send-back, stored after all, takes the value to the
// dead-letter queue: valid (RocketMQ's clients do the same).
func TestRetryCheckerLocalRetries(t *testing.T) {
	b := retryHistory()
	b.localRetry("t", history.DecisionSuccess, 10050) // reconsume 2 > max 1, locally
	res := checkRetry(&b.run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)

	// The send-back failed for good: the local retry consumed the value,
	// and it is not in the dead-letter queue. Valid too (possible when
	// every node is killed at once).
	b = retryHistory()
	b.emptyDLQ(20000)
	b.localRetry("t", history.DecisionSuccess, 10050)
	res = checkRetry(&b.run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)

	// The same count from a broker's retry copy is a violation.
	b = retryHistory()
	b.retryDeliver("t", 2, history.DecisionSuccess, 20030)
	res = checkRetry(&b.run, Options{}.withDefaults())
	require.False(t, res.Valid)
	require.Positive(t, res.Counts["consumed-past-max"])
	require.Positive(t, res.Counts["consumed-and-dead"])
}

func TestRetryCheckerCatches(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b *builder)
		count  string
	}{
		"send lost": {func(b *builder) {
			b.retrySend("n", 1, 0, history.OK)
			b.retryDeliver("n", 0, history.DecisionSuccess, 40)
		}, "lost"},
		"never consumed": {func(b *builder) {
			b.retrySend("n", 1, 1, history.OK)
			b.retryDeliver("n", 0, history.DecisionLater, 40)
			b.topicDrain(retryTopic, 1, 30000, "t", "n")
		}, "never-consumed"},
		"reconsume count skipped": {func(b *builder) {
			b.retrySend("n", 1, 1, history.OK)
			b.retryDeliver("n", 0, history.DecisionLater, 40)
			b.retryDeliver("n", 2, history.DecisionSuccess, 10040)
			b.topicDrain(retryTopic, 1, 30000, "t", "n")
		}, "reconsume-mismatch"},
		"retry never delivered": {func(b *builder) {
			b.retrySend("n", 1, 1, history.OK)
			b.retryDeliver("n", 1, history.DecisionSuccess, 10040)
			b.topicDrain(retryTopic, 1, 30000, "t", "n")
		}, "missing-retry"},
		"dead letter lost": {func(b *builder) { b.emptyDLQ(30000) }, "not-dead-lettered"},
		"consumed past the maximum": {func(b *builder) {
			b.retryDeliver("t", 2, history.DecisionSuccess, 20030)
		}, "consumed-past-max"},
		"consumed and dead": {func(b *builder) {
			b.topicDrain(retryDLQTopic, 0, 30000, "t", "o")
		}, "consumed-and-dead"},
		"dead-lettered early": {func(b *builder) {
			b.retrySend("n", 1, 1, history.OK)
			b.retryDeliver("n", 0, history.DecisionLater, 40)
			b.topicDrain(retryTopic, 1, 30000, "t", "n")
			b.topicDrain(retryDLQTopic, 0, 30000, "t", "n")
		}, "dead-lettered-early"},
		"failed send delivered": {func(b *builder) {
			b.retryDeliver("f", 0, history.DecisionSuccess, 40)
		}, "unexpected"},
		"never sent": {func(b *builder) {
			b.retryDeliver("zz", 0, history.DecisionSuccess, 40)
		}, "unexpected"},
	} {
		t.Run(name, func(t *testing.T) {
			b := retryHistory()
			tc.mutate(b)
			res := checkRetry(&b.run, Options{}.withDefaults())
			require.False(t, res.Valid, "%s not caught", name)
			require.Positive(t, res.Counts[tc.count], "%v %v", res.Counts, res.Errors)
		})
	}
}
