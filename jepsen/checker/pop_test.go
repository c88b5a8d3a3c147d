package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Hand-built histories of the pop workload (times in ms, invisible time
// 3000 ms): the valid one passes, each mutation breaks one rule.

const (
	popTopic = "popped"
	popCG    = "cg"
	popFIFO  = "fifo"
)

func (b *builder) popSend(value string, q int, off, inv int64, out history.Outcome) {
	b.add(history.Op{Process: 1, Kind: history.PopSend, Topic: popTopic, Queue: q, Value: value, Offset: off, Attempt: 1,
		Invoke: inv * ms, Complete: (inv + 5) * ms, Outcome: out})
}

func (b *builder) popJoin(group string, orderly bool) {
	b.add(history.Op{Process: 9, Kind: history.PopJoin, Group: group, Orderly: orderly, Outcome: history.OK})
}

// popDeliver records one message of batch handed out from inv to inv+10.
func (b *builder) popDeliver(group, batch string, i int, value string, q int, off, inv int64) string {
	h := fmt.Sprintf("%s/%d", batch, i)
	b.add(history.Op{Process: 10, Kind: history.PopDeliver, Group: group, Topic: popTopic, Queue: q, Offset: off, Value: value,
		InvisibleMs: 3000, Handle: h, Orderly: group == popFIFO, Invoke: inv * ms, Complete: (inv + 10) * ms, Outcome: history.OK})
	return h
}

func (b *builder) popAck(group, handle string, inv int64, out history.Outcome) {
	b.add(history.Op{Process: 10, Kind: history.PopAck, Group: group, Handle: handle, Invoke: inv * ms, Complete: (inv + 5) * ms, Outcome: out})
}

func (b *builder) popChange(group, handle string, inv int64, out history.Outcome) {
	b.add(history.Op{Process: 10, Kind: history.PopChange, Group: group, Handle: handle, InvisibleMs: 3000,
		Invoke: inv * ms, Complete: (inv + 5) * ms, Outcome: out})
}

// popHistory: a, b in queue 0, c in queue 1; the concurrent group
// receives a and b in one batch, acks a, extends b and acks it late; c
// is received by a consumer that lets its invisible time pass, then by
// another that acks it. The orderly group receives a, acks it, then b
// and c.
func popHistory() *builder {
	b := newBuilder()
	b.popJoin(popCG, false)
	b.popJoin(popFIFO, true)
	b.popSend("a", 0, 0, 0, history.OK)
	b.popSend("b", 0, 1, 10, history.OK)
	b.popSend("c", 1, 0, 20, history.OK)
	ha := b.popDeliver(popCG, "cg#1", 0, "a", 0, 0, 100)
	hb := b.popDeliver(popCG, "cg#1", 1, "b", 0, 1, 100)
	b.popAck(popCG, ha, 200, history.OK)
	b.popChange(popCG, hb, 2000, history.OK)
	b.popAck(popCG, hb, 4500, history.OK) // within the extended 5000
	hc1 := b.popDeliver(popCG, "cg#2", 0, "c", 1, 0, 150)
	hc2 := b.popDeliver(popCG, "cg#3", 0, "c", 1, 0, 3200) // after 150+3000
	b.popAck(popCG, hc1, 3400, history.Fail)               // expired
	b.popAck(popCG, hc2, 3500, history.OK)
	fa := b.popDeliver(popFIFO, "fifo#1", 0, "a", 0, 0, 100)
	b.popAck(popFIFO, fa, 120, history.OK)
	fb := b.popDeliver(popFIFO, "fifo#2", 0, "b", 0, 1, 130)
	fc := b.popDeliver(popFIFO, "fifo#2", 1, "c", 1, 0, 130)
	b.popAck(popFIFO, fb, 200, history.Info)
	b.popAck(popFIFO, fc, 210, history.OK)
	b.topicDrain(popTopic, 0, 9000, "a", "b")
	b.topicDrain(popTopic, 1, 9000, "c")
	b.topicDrain("%DLQ%"+popCG, 0, 9000)
	b.topicDrain("%DLQ%"+popFIFO, 0, 9000)
	return b
}

func TestPopCheckerValid(t *testing.T) {
	res := checkPop(&popHistory().run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(3), res.Counts["values"])
	require.Equal(t, int64(1), res.Counts["redelivery-pairs"])
	require.Equal(t, int64(0), res.Counts["held-twice-explained"])
}

func TestPopCheckerCatches(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b *builder)
		count  string
	}{
		"send lost": {func(b *builder) {
			b.popSend("n", 1, 1, 50, history.OK)
		}, "lost"},
		"never acked": {func(b *builder) {
			b.popSend("n", 1, 1, 50, history.OK)
			b.topicDrain(popTopic, 1, 9500, "c", "n")
		}, "never-acked"},
		"handed out while held": {func(b *builder) {
			b.popDeliver(popCG, "cg#9", 0, "c", 1, 0, 1000) // c held by cg#2 until 3150
		}, "held-twice"},
		"held past an extension": {func(b *builder) {
			b.popDeliver(popCG, "cg#9", 0, "b", 0, 1, 3500) // b extended until 5000, acked at 4505
		}, "held-twice"},
		"delivered after an ok ack": {func(b *builder) {
			b.popDeliver(popCG, "cg#9", 0, "a", 0, 0, 3300) // a acked at 205
		}, "acked-redelivered"},
		"orderly queue skipped": {func(b *builder) {
			b.popSend("d", 1, 1, 30, history.OK)
			b.popSend("e", 1, 2, 40, history.OK)
			b.popDeliver(popFIFO, "fifo#9", 0, "e", 1, 2, 500) // d never acked
			b.topicDrain(popTopic, 1, 9500, "c", "d", "e")
		}, "fifo-skip"},
		"orderly batch out of order": {func(b *builder) {
			b.popSend("d", 1, 1, 30, history.OK)
			b.popSend("e", 1, 2, 40, history.OK)
			b.popDeliver(popFIFO, "fifo#9", 0, "e", 1, 2, 500)
			b.popDeliver(popFIFO, "fifo#9", 1, "d", 1, 1, 500)
			b.topicDrain(popTopic, 1, 9500, "c", "d", "e")
		}, "fifo-unordered"},
		"never sent": {func(b *builder) {
			b.popDeliver(popCG, "cg#9", 0, "x", 1, 5, 500)
		}, "unexpected"},
	} {
		t.Run(name, func(t *testing.T) {
			b := popHistory()
			tc.mutate(b)
			res := checkPop(&b.run, Options{}.withDefaults())
			require.False(t, res.Valid, "%s not caught", name)
			require.Positive(t, res.Counts[tc.count], "%v", res.Errors)
		})
	}
}

// A second delivery within the hold is explained by a fault between the
// two deliveries: counted, not an error.
func TestPopCheckerExplainsFaults(t *testing.T) {
	b := popHistory()
	b.popDeliver(popCG, "cg#9", 0, "c", 1, 0, 1000)
	b.run.Events = append(b.run.Events, history.Event{Kind: "kill-leader", Start: 500 * ms, End: 1500 * ms, Nodes: []int{1}})
	res := checkPop(&b.run, Options{}.withDefaults())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(2), res.Counts["held-twice-explained"]) // cg#2 then cg#9, cg#9 then cg#3

	// A fault does not excuse a delivery after an ok ack.
	b.popDeliver(popCG, "cg#10", 0, "a", 0, 0, 1000)
	res = checkPop(&b.run, Options{}.withDefaults())
	require.False(t, res.Valid)
	require.Positive(t, res.Counts["acked-redelivered"])
}

func TestPopCheckerNoPop(t *testing.T) {
	res := checkPop(&newBuilder().run, Options{}.withDefaults())
	require.True(t, res.Valid)
	require.Contains(t, res.Note, "no pop sends")
}
