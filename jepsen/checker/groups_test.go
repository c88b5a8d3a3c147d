package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

// groupHistory is a clean orderly-group history: two acked sends to queue
// 0, one member that joined at 10 ms and was delivered both, member lists
// naming it, and two committed-offset reads.
func groupHistory() *builder {
	b := newBuilder()
	b.send(1, 0, "a", 1, 2, history.OK, 0)
	b.send(1, 0, "b", 3, 4, history.OK, 1)
	b.add(history.Op{Process: 5, Kind: history.Join, Group: "og", Value: "c1", Orderly: true, Invoke: 5 * ms, Complete: 10 * ms, Outcome: history.OK})
	b.deliver(5, "og", 0, 20, 30, 0, "a", "b")
	b.add(history.Op{Process: 9, Kind: history.Members, Group: "og", Node: 2, Invoke: 40 * ms, Complete: 41 * ms, Outcome: history.OK,
		Msgs: []history.Msg{{Value: "c1"}}})
	b.add(history.Op{Process: 9, Kind: history.GroupOffset, Group: "og", Queue: 0, Offset: 2, Invoke: 50 * ms, Complete: 51 * ms, Outcome: history.OK})
	b.add(history.Op{Process: 9, Kind: history.GroupOffset, Group: "og", Queue: 0, Offset: 2, Invoke: 60 * ms, Complete: 61 * ms, Outcome: history.OK})
	return b
}

func (b *builder) deliver(proc int, group string, q int, inv, comp, from int64, vals ...string) int {
	msgs := make([]history.Msg, len(vals))
	for i, v := range vals {
		msgs[i] = history.Msg{Offset: from + int64(i), Value: v}
	}
	return b.add(history.Op{Process: proc, Kind: history.Deliver, Group: group, Queue: q, Msgs: msgs, Orderly: true,
		Invoke: inv * ms, Complete: comp * ms, Outcome: history.OK})
}

func checkGroups(b *builder) history.CheckerResult {
	return checkConsumerGroups(&b.run, Options{}.withDefaults())
}

func TestConsumerGroupCheckerValid(t *testing.T) {
	res := checkGroups(groupHistory())
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(1), res.Counts["member-checks"])
}

func TestConsumerGroupCheckerCatches(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(b *builder)
		count  string
	}{
		"lost": {func(b *builder) { b.send(1, 1, "c", 5, 6, history.OK, 0) }, "lost"},
		"gap": {func(b *builder) {
			b.send(1, 0, "c", 5, 6, history.OK, 2)
			b.send(1, 0, "d", 7, 8, history.OK, 3)
			b.deliver(5, "og", 0, 31, 32, 3, "d")
			b.deliver(5, "og", 0, 33, 34, 2, "c")
		}, "orderly-gaps"},
		"two owners": {func(b *builder) {
			b.add(history.Op{Process: 6, Kind: history.Join, Group: "og", Value: "c2", Orderly: true, Invoke: 5 * ms, Complete: 10 * ms, Outcome: history.OK})
			b.deliver(6, "og", 0, 25, 35, 1, "b")
		}, "two-owners"},
		"handover redelivery": {func(b *builder) {
			b.add(history.Op{Process: 6, Kind: history.Join, Group: "og", Value: "c2", Orderly: true, Invoke: 5 * ms, Complete: 10 * ms, Outcome: history.OK})
			b.deliver(6, "og", 0, 31, 35, 1, "b")
		}, "handover-redeliveries"},
		"offset regression": {func(b *builder) {
			b.add(history.Op{Process: 9, Kind: history.GroupOffset, Group: "og", Queue: 0, Offset: 1, Invoke: 70 * ms, Complete: 71 * ms, Outcome: history.OK})
		}, "offset-regressions"},
		"member forgotten": {func(b *builder) {
			b.add(history.Op{Process: 9, Kind: history.Members, Group: "og", Node: 3, Invoke: 80 * ms, Complete: 81 * ms, Outcome: history.OK})
		}, "members-missing"},
	} {
		t.Run(name, func(t *testing.T) {
			b := groupHistory()
			tc.mutate(b)
			res := checkGroups(b)
			require.False(t, res.Valid, "%s not caught", name)
			require.Positive(t, res.Counts[tc.count], "%v", res.Counts)
		})
	}
}

// The harness's closing heal is not a fault: a handover after it, in a
// run without faults, is two owners all the same.
func TestConsumerGroupCheckerHealIsNoFault(t *testing.T) {
	b := groupHistory()
	b.add(history.Op{Process: 6, Kind: history.Join, Group: "og", Value: "c2", Orderly: true, Invoke: 5 * ms, Complete: 10 * ms, Outcome: history.OK})
	b.deliver(6, "og", 0, 31, 35, 1, "b")
	b.run.Events = append(b.run.Events, history.Event{Kind: "heal", Start: 20 * ms, End: 20 * ms, Description: "heal every fault"})
	res := checkGroups(b)
	require.False(t, res.Valid)
	require.Positive(t, res.Counts["handover-redeliveries"], "%v", res.Counts)
}

func TestConsumerGroupCheckerForgivesFaults(t *testing.T) {
	// Two owners within LockGrace of a fault (a new leader starts with no
	// locks), and a member missing from a node restarted since it joined.
	b := groupHistory()
	b.add(history.Op{Process: 6, Kind: history.Join, Group: "og", Value: "c2", Orderly: true, Invoke: 5 * ms, Complete: 10 * ms, Outcome: history.OK})
	b.deliver(6, "og", 0, 25, 35, 1, "b")
	b.run.Ops[4].Msgs = append(b.run.Ops[4].Msgs, history.Msg{Value: "c2"}) // node 2 knows c2
	b.add(history.Op{Process: 9, Kind: history.Members, Group: "og", Node: 3, Invoke: 80 * ms, Complete: 81 * ms, Outcome: history.OK})
	b.run.Events = append(b.run.Events, history.Event{Kind: "kill", Start: 15 * ms, End: 18 * ms, Nodes: []int{3}})
	res := checkGroups(b)
	require.True(t, res.Valid, "%v", res.Errors)
	require.Equal(t, int64(2), res.Counts["two-owners-near-faults"], "the overlap and the redelivery")
}
