package checker

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// maxFinalGap bounds how far beyond the number of drained messages a
// drained offset may lie before it is treated as garbage rather than as
// the end of a queue with a hole (it keeps a corrupt offset from making
// the final log huge).
const maxFinalGap = 1 << 20

// Loc is one position in the final log.
type Loc struct {
	Queue  int
	Offset int64
}

// FinalLog is the authoritative content of every queue after the run, as
// agreed by the drain reads of all nodes.
type FinalLog struct {
	// Queues holds each queue's values by offset. An empty string marks an
	// offset that no node returned (a hole, itself a violation).
	Queues map[int][]string
	locs   map[string][]Loc
}

// NewFinalLog wraps per-queue contents (values by offset, "" for a hole)
// as a FinalLog and indexes where every value is.
func NewFinalLog(queues map[int][]string) *FinalLog {
	f := &FinalLog{Queues: queues, locs: make(map[string][]Loc)}
	qs := make([]int, 0, len(queues))
	for q := range queues {
		qs = append(qs, q)
	}
	sort.Ints(qs)
	for _, q := range qs {
		for o, v := range queues[q] {
			if v != "" {
				f.locs[v] = append(f.locs[v], Loc{Queue: q, Offset: int64(o)})
			}
		}
	}
	return f
}

// Locations returns every position of value in the final log, by queue
// and offset. It is nil-safe.
func (f *FinalLog) Locations(value string) []Loc {
	if f == nil {
		return nil
	}
	return f.locs[value]
}

// OffsetsIn returns the offsets of value in queue q, ascending.
func (f *FinalLog) OffsetsIn(q int, value string) []int64 {
	var out []int64
	for _, l := range f.Locations(value) {
		if l.Queue == q {
			out = append(out, l.Offset)
		}
	}
	return out
}

// At returns the value at offset o of queue q; ok is false beyond the end
// of the queue or at a hole.
func (f *FinalLog) At(q int, o int64) (v string, ok bool) {
	if f == nil {
		return "", false
	}
	vs := f.Queues[q]
	if o < 0 || o >= int64(len(vs)) {
		return "", false
	}
	return vs[o], vs[o] != ""
}

// Len is the length of queue q (its end offset).
func (f *FinalLog) Len(q int) int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.Queues[q]))
}

// Size is the number of messages in the final log (holes left out).
func (f *FinalLog) Size() int64 {
	if f == nil {
		return 0
	}
	var n int64
	for _, l := range f.locs {
		n += int64(len(l))
	}
	return n
}

// drained is what one node's drain reads returned for one queue.
type drained struct {
	ok, failed int
	vals       map[int64]string
}

// BuildFinalLog merges the drain reads of ops into the final log and
// reports how the nodes disagree. It returns nil when ops hold no drain
// read. Offsets where nodes disagree take the value most nodes returned
// (ties: the lowest node's).
func BuildFinalLog(ops []history.Op) (*FinalLog, []string) {
	run := &history.Run{Ops: ops}
	final, res := checkFinalLog(run, Options{}.withDefaults())
	return final, res.Errors
}

// checkFinalLog is the final-log checker. It builds the authoritative log
// from the drain polls (nil if there are none) and reports every way the
// nodes' drains disagree: a node returning two values for one offset, an
// offset where nodes returned different values, a drain that is not
// contiguous from offset 0, a node whose drain is shorter than another's,
// and a node with no successful drain of a queue.
func checkFinalLog(run *history.Run, opts Options) (*FinalLog, history.CheckerResult) {
	r := newReport(opts.MaxErrors)
	// per node, per queue
	nodes := make(map[int]map[int]*drained)
	polls := 0
	for i := range run.Ops {
		op := &run.Ops[i]
		if !op.Drain || op.Kind != history.Poll {
			continue
		}
		polls++
		byQ := nodes[op.Node]
		if byQ == nil {
			byQ = make(map[int]*drained)
			nodes[op.Node] = byQ
		}
		d := byQ[op.Queue]
		if d == nil {
			d = &drained{vals: make(map[int64]string)}
			byQ[op.Queue] = d
		}
		if op.Outcome != history.OK {
			d.failed++
			continue
		}
		d.ok++
		for _, m := range op.Msgs {
			if prev, dup := d.vals[m.Offset]; dup && prev != m.Value {
				r.errorf("node %d queue %d offset %d: drain returned both %s and %s (divergent drain)",
					op.Node, op.Queue, m.Offset, prev, m.Value)
				r.add("divergent-offsets", 1)
				continue
			}
			d.vals[m.Offset] = m.Value
		}
	}
	r.set("drain-polls", int64(polls))
	if polls == 0 {
		if len(run.Ops) == 0 {
			r.notef("empty history: no drain reads")
			return nil, r.done()
		}
		r.errorf("no drain reads: the final log is unknown")
		r.notef("skipped: no drain")
		return nil, r.done()
	}

	nodeIDs := make([]int, 0, len(nodes))
	seen := make(map[int]bool)
	for n := range nodes {
		nodeIDs = append(nodeIDs, n)
		seen[n] = true
	}
	for n := 1; n <= run.Meta.Nodes; n++ {
		if !seen[n] {
			nodeIDs = append(nodeIDs, n)
		}
	}
	sort.Ints(nodeIDs)
	drainedNodes := 0
	for _, byQ := range nodes {
		for _, d := range byQ {
			if d.ok > 0 {
				drainedNodes++
				break
			}
		}
	}
	r.set("nodes-drained", int64(drainedNodes))

	queues := make(map[int]bool)
	for _, q := range queuesOf(run) {
		queues[q] = true
	}
	for _, byQ := range nodes {
		for q := range byQ {
			queues[q] = true
		}
	}
	qs := make([]int, 0, len(queues))
	for q := range queues {
		qs = append(qs, q)
	}
	sort.Ints(qs)

	final := make(map[int][]string)
	var total int64
	for _, q := range qs {
		vals := mergeQueue(r, q, nodeIDs, nodes)
		final[q] = vals
		var n int64
		for _, v := range vals {
			if v != "" {
				n++
			}
		}
		total += n
		r.set(fmt.Sprintf("queue-%d", q), n)
	}
	r.set("messages", total)
	return NewFinalLog(final), r.done()
}

// mergeQueue merges the drains of queue q by all nodes into one log and
// reports disagreements between the nodes.
func mergeQueue(r *report, q int, nodeIDs []int, nodes map[int]map[int]*drained) []string {
	type vote struct {
		value string
		count int
		first int // lowest node returning it
	}
	// union of offsets
	count := 0
	for _, n := range nodeIDs {
		if d := nodes[n][q]; d != nil {
			count += len(d.vals)
		}
	}
	var maxOff int64 = -1
	for _, n := range nodeIDs {
		d := nodes[n][q]
		if d == nil {
			continue
		}
		for o := range d.vals {
			switch {
			case o < 0:
				r.errorf("node %d queue %d: drain returned negative offset %d", n, q, o)
				delete(d.vals, o)
			case o > int64(count)+maxFinalGap:
				r.errorf("node %d queue %d: drain returned offset %d, far beyond the %d messages drained", n, q, o, count)
				delete(d.vals, o)
			default:
				maxOff = max(maxOff, o)
			}
		}
	}
	length := maxOff + 1
	vals := make([]string, length)
	for o := int64(0); o < length; o++ {
		var votes []vote
		for _, n := range nodeIDs {
			d := nodes[n][q]
			if d == nil {
				continue
			}
			v, ok := d.vals[o]
			if !ok {
				continue
			}
			found := false
			for i := range votes {
				if votes[i].value == v {
					votes[i].count++
					found = true
				}
			}
			if !found {
				votes = append(votes, vote{value: v, count: 1, first: n})
			}
		}
		if len(votes) == 0 {
			continue // hole, reported per node below
		}
		best := votes[0]
		for _, v := range votes[1:] {
			if v.count > best.count {
				best = v
			}
		}
		vals[o] = best.value
		if len(votes) > 1 {
			r.add("divergent-offsets", 1)
			for _, v := range votes {
				if v.value != best.value {
					r.errorf("queue %d offset %d: node %d drained %s but node %d drained %s (divergent drain)",
						q, o, v.first, v.value, best.first, best.value)
				}
			}
		}
	}

	// per node: successful, contiguous from 0, as long as the longest
	for _, n := range nodeIDs {
		d := nodes[n][q]
		if d == nil || d.ok == 0 {
			failed := 0
			if d != nil {
				failed = d.failed
			}
			r.errorf("node %d queue %d: no successful drain read (%d failed)", n, q, failed)
			r.add("drains-missing", 1)
			continue
		}
		if d.failed > 0 {
			r.add("drain-polls-failed", int64(d.failed))
		}
		var end int64 // one past the contiguous prefix from 0
		for {
			if _, ok := d.vals[end]; !ok {
				break
			}
			end++
		}
		if int64(len(d.vals)) > end {
			// something beyond a hole
			next := end
			for o := range d.vals {
				if o > end && (next == end || o < next) {
					next = o
				}
			}
			r.errorf("node %d queue %d: drain is not contiguous: offsets %d..%d missing but offset %d returned",
				n, q, end, next-1, next)
			r.add("drain-gaps", 1)
			continue
		}
		if end < length {
			longest, longestEnd := 0, int64(-1)
			for _, m := range nodeIDs {
				if dm := nodes[m][q]; dm != nil && int64(len(dm.vals)) > longestEnd {
					longest, longestEnd = m, int64(len(dm.vals))
				}
			}
			r.errorf("queue %d: node %d drained %d messages but node %d drained %d (node %d was not caught up)",
				q, n, end, longest, longestEnd, n)
			r.add("short-drains", 1)
		}
	}
	return vals
}
