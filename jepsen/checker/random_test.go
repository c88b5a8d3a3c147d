package checker

import (
	"container/heap"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

// genConfig shapes a randomized history.
type genConfig struct {
	seed      int64
	ops       int     // operations before the drain
	queues    int     //
	producers int     //
	infoFrac  float64 // fraction of indeterminate operations
	failFrac  float64 // fraction of failed operations
}

// simProc is one simulated client (its process id changes after every
// indeterminate operation).
type simProc struct {
	id       int
	consumer bool
	queue    int // a consumer's queue
	seq      int
	retry    string // value of an indeterminate send to retry
	retryQ   int
	attempt  int
	// consumer state
	fetched bool
	next    int64
	polls   int
}

// simEvent is a point in simulated time: an operation is invoked, takes
// effect (its linearization point) or completes.
type simEvent struct {
	at   int64
	kind int // 0 invoke, 1 effect, 2 complete
	seq  int // tie-break: creation order
	p    *simProc
	op   *history.Op
	land bool // an indeterminate operation that takes effect
}

type eventHeap []*simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// genRun simulates a deduplicating broker and its clients: producers send
// unique values to random queues and retry indeterminate sends under a new
// process; one consumer per queue fetches its committed offset, polls
// following Next (followers may serve a stale prefix) and commits every
// few polls. Every operation takes effect at a random point of its
// interval; indeterminate ones take effect half of the time and complete
// late. The run ends with the drains of three nodes and agreeing replicas.
// The history is valid by construction.
func genRun(c genConfig) *history.Run {
	rng := rand.New(rand.NewSource(c.seed))
	logs := make([][]string, c.queues)
	where := make(map[string]int64)
	committed := make([]int64, c.queues)
	for q := range committed {
		committed[q] = -1
	}
	nextProc := 0
	newProc := func() int { nextProc++; return nextProc }

	var h eventHeap
	seq := 0
	push := func(e *simEvent) {
		seq++
		e.seq = seq
		heap.Push(&h, e)
	}
	for i := 0; i < c.producers; i++ {
		push(&simEvent{at: rng.Int63n(10) * ms / 10, p: &simProc{id: newProc()}})
	}
	for q := 0; q < c.queues; q++ {
		push(&simEvent{at: rng.Int63n(10) * ms / 10, p: &simProc{id: newProc(), consumer: true, queue: q}})
	}

	run := &history.Run{Meta: history.Meta{Queues: c.queues, Nodes: 3, Dedupe: true, Workload: "retries"}}
	started := 0
	var end int64
	for h.Len() > 0 {
		e := heap.Pop(&h).(*simEvent)
		end = max(end, e.at)
		p := e.p
		switch e.kind {
		case 0: // invoke
			if started >= c.ops {
				continue
			}
			started++
			op := &history.Op{Process: p.id, Node: 1 + rng.Intn(3), Invoke: e.at, Group: "g"}
			if !p.consumer {
				op.Kind = history.Send
				if p.retry != "" && rng.Intn(10) < 7 {
					p.attempt++
					op.Value, op.Queue, op.Attempt = p.retry, p.retryQ, p.attempt
				} else {
					p.seq++
					op.Value, op.Queue, op.Attempt = fmt.Sprintf("p%d-%d", p.id, p.seq), rng.Intn(c.queues), 1
					p.retry, p.attempt = "", 1
				}
			} else {
				op.Queue = p.queue
				switch {
				case !p.fetched:
					op.Kind = history.Fetch
				case p.polls >= 3:
					op.Kind, op.Offset = history.Commit, p.next
				default:
					op.Kind, op.Offset = history.Poll, p.next
				}
			}
			dur := (1 + rng.Int63n(40)) * ms / 10
			effect := e.at + rng.Int63n(dur+1)
			r := rng.Float64()
			switch {
			case r < c.infoFrac:
				op.Outcome = history.Info
				op.Complete = e.at + dur + 50*ms // a timeout
				if rng.Intn(2) == 0 && (op.Kind == history.Send || op.Kind == history.Commit) {
					push(&simEvent{at: effect, kind: 1, p: p, op: op, land: true})
				}
			case r < c.infoFrac+c.failFrac:
				op.Outcome = history.Fail
				op.Complete = e.at + dur
			default:
				op.Outcome = history.OK
				op.Complete = e.at + dur
				push(&simEvent{at: effect, kind: 1, p: p, op: op})
			}
			push(&simEvent{at: op.Complete, kind: 2, p: p, op: op})
		case 1: // effect
			op := e.op
			q := op.Queue
			switch op.Kind {
			case history.Send:
				o, dup := where[op.Value]
				if !dup {
					o = int64(len(logs[q]))
					logs[q] = append(logs[q], op.Value)
					where[op.Value] = o
				}
				op.Offset = o
			case history.Poll:
				avail := int64(len(logs[q])) - op.Offset
				k := min(avail, rng.Int63n(8))
				if rng.Intn(4) == 0 && k > 0 { // a stale follower
					k = rng.Int63n(k + 1)
				}
				for i := int64(0); i < k; i++ {
					o := op.Offset + i
					op.Msgs = append(op.Msgs, history.Msg{Offset: o, Value: logs[q][o]})
				}
				op.Next = op.Offset + max(k, 0)
			case history.Commit:
				committed[q] = op.Offset
			case history.Fetch:
				op.Offset = committed[q]
			}
		case 2: // complete
			op := e.op
			if op.Outcome == history.Info && op.Kind == history.Send && !e.land {
				op.Offset = 0
			}
			run.Ops = append(run.Ops, *op)
			if op.Outcome == history.Info {
				p.id = newProc()
				if op.Kind == history.Send {
					p.retry, p.retryQ = op.Value, op.Queue
				}
				p.fetched = false
			} else if op.Outcome == history.OK {
				switch op.Kind {
				case history.Send:
					p.retry = ""
				case history.Fetch:
					p.fetched, p.next, p.polls = true, max(op.Offset, 0), 0
				case history.Poll:
					p.next = op.Next
					p.polls++
				case history.Commit:
					p.polls = 0
				}
			} else if op.Kind == history.Commit {
				p.polls = 0
			}
			push(&simEvent{at: e.at + rng.Int63n(2*ms), p: p})
		}
	}
	// info sends record no offset
	for i := range run.Ops {
		if op := &run.Ops[i]; op.Kind == history.Send && op.Outcome != history.OK {
			op.Offset = 0
		}
	}

	// drains: every node reads every queue in pages of 100
	t := end + 100*ms
	for node := 1; node <= 3; node++ {
		proc := newProc()
		for q := 0; q < c.queues; q++ {
			for from := int64(0); ; {
				to := min(from+100, int64(len(logs[q])))
				op := history.Op{Process: proc, Kind: history.Poll, Queue: q, Offset: from, Next: to, Node: node,
					Invoke: t, Complete: t + ms/2, Outcome: history.OK, Drain: true}
				for o := from; o < to; o++ {
					op.Msgs = append(op.Msgs, history.Msg{Offset: o, Value: logs[q][o]})
				}
				run.Ops = append(run.Ops, op)
				t += ms
				if to == from {
					break
				}
				from = to
			}
		}
	}
	for i := range run.Ops {
		run.Ops[i].ID = int64(i + 1)
	}

	total := uint64(0)
	for q := range logs {
		total += uint64(len(logs[q]))
	}
	for node := 1; node <= 3; node++ {
		rep := history.Replica{Node: node, Commit: total, First: 1}
		for i := uint64(1); i <= total; i++ {
			rep.Entries = append(rep.Entries, history.Entry{Index: i, Term: 1 + i/1000, Sum: uint32(i * 2654435761)})
		}
		run.Replicas = append(run.Replicas, rep)
	}
	run.Events = []history.Event{
		{Kind: "partition", Start: end / 4, End: end / 3, Nodes: []int{2}, Description: "isolate n2"},
		{Kind: "kill", Start: end / 2, End: end/2 + 200*ms, Nodes: []int{1}, Description: "kill -9 n1"},
	}
	run.Meta.Healed = end/2 + 200*ms
	run.Meta.Duration = t
	return run
}

func TestRandomizedValidHistory(t *testing.T) {
	cfg := genConfig{seed: 7, ops: 20000, queues: 4, producers: 12, infoFrac: 0.03, failFrac: 0.01}
	run := genRun(cfg)
	start := time.Now()
	res := Check(run, Options{Timeout: 30 * time.Second})
	t.Logf("checked %d ops in %s\n%s", len(run.Ops), time.Since(start), Summary(res))
	for _, name := range allCheckers {
		requireValid(t, res, name)
	}
	require.True(t, res.Valid)

	// the history is not trivial: indeterminate sends landed and were
	// retried, and consumers restarted
	lin := res.Checkers[LinearizableChecker]
	assert.Greater(t, lin.Counts["patched-in"], int64(20))
	assert.Greater(t, lin.Counts["patched-dropped"], int64(20))
	assert.Greater(t, lin.Counts["widened"], int64(5))
	assert.Greater(t, res.Ops["send.info"], int64(100))
	assert.Greater(t, res.Ops["poll.ok"], int64(3000))
	assert.Greater(t, res.Checkers[TotalQueueChecker].Counts["recovered"], int64(5))
	assert.Greater(t, res.Checkers[ConsumerChecker].Counts["fetches-checked"], int64(20))
}

func TestRandomizedHistoryWithLostWrite(t *testing.T) {
	cfg := genConfig{seed: 11, ops: 5000, queues: 4, producers: 8, infoFrac: 0.03, failFrac: 0.01}
	run := genRun(cfg)
	// every node lost one acknowledged message: its slot now holds a value
	// no one sent, on every node
	var victim *history.Op
	for i := len(run.Ops) / 2; i < len(run.Ops); i++ {
		if op := &run.Ops[i]; op.Kind == history.Send && op.Outcome == history.OK && op.Attempt == 1 {
			victim = op
			break
		}
	}
	require.NotNil(t, victim)
	for i := range run.Ops {
		op := &run.Ops[i]
		if !op.Drain || op.Queue != victim.Queue {
			continue
		}
		for j := range op.Msgs {
			if op.Msgs[j].Value == victim.Value {
				op.Msgs[j].Value = "intruder"
			}
		}
	}
	res := check(t, run)
	tq := requireInvalid(t, res, TotalQueueChecker)
	assert.Equal(t, int64(1), tq.Counts["lost"])
	assert.Equal(t, int64(1), tq.Counts["unexpected"])
	requireInvalid(t, res, LinearizableChecker)
	requireInvalid(t, res, ReadConsistencyChecker)
	requireValid(t, res, FinalLogChecker)
}
