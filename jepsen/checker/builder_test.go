package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

// ms is one millisecond in the history's nanoseconds.
const ms = int64(time.Millisecond)

// builder assembles synthetic histories; times are given in milliseconds.
type builder struct {
	run history.Run
	id  int64
}

func newBuilder() *builder {
	return &builder{run: history.Run{Meta: history.Meta{Queues: 2, Nodes: 3, Dedupe: true}}}
}

// add appends op with the next id and returns its index.
func (b *builder) add(op history.Op) int {
	b.id++
	op.ID = b.id
	b.run.Ops = append(b.run.Ops, op)
	return len(b.run.Ops) - 1
}

func (b *builder) send(proc, q int, value string, inv, comp int64, out history.Outcome, off int64) int {
	return b.add(history.Op{Process: proc, Kind: history.Send, Queue: q, Value: value, Offset: off,
		Attempt: 1, Node: 1, Invoke: inv * ms, Complete: comp * ms, Outcome: out})
}

func (b *builder) retry(proc, q int, value string, attempt int, inv, comp int64, out history.Outcome, off int64) int {
	i := b.send(proc, q, value, inv, comp, out, off)
	b.run.Ops[i].Attempt = attempt
	return i
}

// poll records an ok poll returning vals at consecutive offsets from from.
func (b *builder) poll(proc, q int, from int64, inv, comp int64, vals ...string) int {
	msgs := make([]history.Msg, len(vals))
	for i, v := range vals {
		msgs[i] = history.Msg{Offset: from + int64(i), Value: v}
	}
	return b.add(history.Op{Process: proc, Kind: history.Poll, Queue: q, Offset: from, Next: from + int64(len(vals)),
		Msgs: msgs, Group: "g", Node: 2, Invoke: inv * ms, Complete: comp * ms, Outcome: history.OK})
}

func (b *builder) fetch(proc, q int, inv, comp int64, out history.Outcome, off int64) int {
	return b.add(history.Op{Process: proc, Kind: history.Fetch, Queue: q, Group: "g", Offset: off, Node: 1,
		Invoke: inv * ms, Complete: comp * ms, Outcome: out})
}

func (b *builder) commit(proc, q int, inv, comp int64, out history.Outcome, off int64) int {
	return b.add(history.Op{Process: proc, Kind: history.Commit, Queue: q, Group: "g", Offset: off, Node: 1,
		Invoke: inv * ms, Complete: comp * ms, Outcome: out})
}

// drain records node's final read of queue q at time t.
func (b *builder) drain(node, q int, t int64, vals ...string) int {
	i := b.poll(1000+node, q, 0, t, t+1, vals...)
	b.run.Ops[i].Drain = true
	b.run.Ops[i].Node = node
	return i
}

// drainAll records the same final read of queue q on nodes 1..3.
func (b *builder) drainAll(q int, t int64, vals ...string) {
	for n := 1; n <= 3; n++ {
		b.drain(n, q, t+int64(n)*2, vals...)
	}
}

// replicas records n identical raft logs with entries 1..last, all
// committed.
func (b *builder) replicas(n int, last uint64) {
	b.run.Replicas = nil
	for node := 1; node <= n; node++ {
		rep := history.Replica{Node: node, Commit: last, First: 1}
		for i := uint64(1); i <= last; i++ {
			rep.Entries = append(rep.Entries, history.Entry{Index: i, Term: 1 + i/4, Sum: uint32(i * 7919)})
		}
		b.run.Replicas = append(b.run.Replicas, rep)
	}
}

// validBuilder is a small valid concurrent history: two queues,
// overlapping sends, indeterminate sends that landed (z, and x which is
// retried and deduplicated) and that did not (y, retried and lost again;
// d), a failed send (c), a consumer that restarts after an indeterminate
// commit, the drains of three nodes, three agreeing replicas and a few
// faults healed at 500 ms.
func validBuilder() *builder {
	b := newBuilder()
	// queue 0, final log: p1-1 p2-1 p3-1 p7-1 p1-2
	b.send(1, 0, "p1-1", 0, 10, history.OK, 0)
	b.send(2, 0, "p2-1", 5, 15, history.OK, 1)
	b.send(3, 0, "p3-1", 8, 1000, history.Info, 0)      // landed at offset 2
	b.send(5, 0, "p5-1", 20, 1000, history.Info, 0)     // never landed
	b.send(7, 0, "p7-1", 25, 900, history.Info, 0)      // landed at offset 3
	b.send(1, 0, "p1-2", 40, 50, history.OK, 4)         //
	b.retry(4, 0, "p3-1", 2, 1001, 1010, history.OK, 2) // deduplicated retry
	b.retry(6, 0, "p5-1", 2, 1005, 1020, history.Info, 0)
	// consumer of queue 0
	b.fetch(8, 0, 0, 2, history.OK, -1)
	b.poll(8, 0, 0, 3, 4)
	b.poll(8, 0, 0, 60, 70, "p1-1", "p2-1", "p3-1") // a stale prefix
	b.commit(8, 0, 71, 72, history.OK, 3)
	b.poll(8, 0, 3, 80, 90, "p7-1", "p1-2")
	b.commit(8, 0, 91, 95, history.Info, 5) // landed
	b.fetch(9, 0, 100, 101, history.OK, 5)
	b.poll(9, 0, 5, 102, 103)
	// queue 1, final log: p10-1
	b.send(10, 1, "p10-1", 0, 5, history.OK, 0)
	b.send(11, 1, "p11-1", 6, 7, history.Fail, 0)
	b.send(12, 1, "p12-1", 8, 2000, history.Info, 0) // never landed
	// drains
	b.drainAll(0, 3000, "p1-1", "p2-1", "p3-1", "p7-1", "p1-2")
	b.drainAll(1, 3000, "p10-1")
	b.replicas(3, 10)
	b.run.Replicas[1].Commit = 9
	b.run.Events = []history.Event{
		{Kind: "partition", Start: 200 * ms, End: 500 * ms, Nodes: []int{1}, Description: "isolate n1"},
		{Kind: "kill", Start: 300 * ms, End: 400 * ms, Nodes: []int{2}, Description: "kill -9 n2"},
		{Kind: "heal", Start: 500 * ms, End: 500 * ms, Description: "heal all"},
	}
	b.run.Meta.Healed = 500 * ms
	b.run.Meta.Duration = 3100 * ms
	return b
}

// find returns the index of the first op matching f.
func (b *builder) find(t *testing.T, f func(op *history.Op) bool) int {
	t.Helper()
	for i := range b.run.Ops {
		if f(&b.run.Ops[i]) {
			return i
		}
	}
	require.FailNow(t, "no such op")
	return -1
}

// check runs Check with a short timeout and logs the summary.
func check(t *testing.T, run *history.Run) history.Results {
	t.Helper()
	res := Check(run, Options{Timeout: 10 * time.Second})
	t.Log("\n" + Summary(res))
	return res
}

// requireInvalid asserts that checker name found a violation and returns
// its result.
func requireInvalid(t *testing.T, res history.Results, name string) history.CheckerResult {
	t.Helper()
	c, ok := res.Checkers[name]
	require.True(t, ok, "no %s result", name)
	require.False(t, c.Valid, "%s should be invalid", name)
	require.NotEmpty(t, c.Errors, "%s should explain the violation", name)
	require.False(t, res.Valid)
	return c
}

// requireValid asserts that checker name found no violation.
func requireValid(t *testing.T, res history.Results, name string) history.CheckerResult {
	t.Helper()
	c, ok := res.Checkers[name]
	require.True(t, ok, "no %s result", name)
	require.True(t, c.Valid, "%s should be valid: %v", name, c.Errors)
	return c
}
