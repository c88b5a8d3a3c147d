package checker

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// cursor is what a consumer process should read next from one queue.
type cursor struct {
	next  int64
	known bool
	why   string // how next was learned, for errors
}

// checkConsumer is the consumer checker. Per process (drains and polls
// without a group left out) it
// checks that
//
//   - the messages of one poll are at consecutive offsets starting at the
//     poll's start offset (int-poll-skip, int-nonmonotonic-poll);
//   - a poll's Next is one past its last message; an empty poll's Next
//     does not jump over messages of the final log;
//   - every poll starts where the previous poll's Next said, or, after a
//     fetch returning c, at c (0 when c is -1) (poll-skip,
//     nonmonotonic-poll).
//
// Per (group, queue) it checks that committed offsets are durable: a fetch
// never returns less than a commit acknowledged before the fetch was
// invoked (offset regression), nor an offset no commit carried
// (unexpected offset).
func checkConsumer(run *history.Run, final *FinalLog, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	byProc := make(map[int][]*history.Op)
	var procs []int
	consumerOps := 0
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Drain || op.Kind == history.Send || (op.Kind == history.Poll && op.Group == "") {
			// Polls without a group are random reads (the log workload),
			// not a consumer following its offsets.
			continue
		}
		consumerOps++
		if _, ok := byProc[op.Process]; !ok {
			procs = append(procs, op.Process)
		}
		byProc[op.Process] = append(byProc[op.Process], op)
	}
	if consumerOps == 0 {
		r.notef("no consumer operations")
		return r.done()
	}
	sort.Ints(procs)

	var polls, skips, nonmono, nextBad int64
	for _, p := range procs {
		ops := byProc[p]
		sort.SliceStable(ops, func(a, b int) bool { return ops[a].Invoke < ops[b].Invoke })
		cursors := make(map[int]*cursor)
		cur := func(q int) *cursor {
			c := cursors[q]
			if c == nil {
				c = &cursor{}
				cursors[q] = c
			}
			return c
		}
		for _, op := range ops {
			switch op.Kind {
			case history.Fetch:
				c := cur(op.Queue)
				if op.Outcome != history.OK {
					c.known = false
					continue
				}
				c.next, c.known = max(op.Offset, 0), true
				c.why = fmt.Sprintf("a fetch at %s returned %d", secs(op.Complete), op.Offset)
			case history.Poll:
				if op.Outcome != history.OK {
					continue
				}
				polls++
				where := fmt.Sprintf("process %d queue %d: poll at %s (node %d)", p, op.Queue, secs(op.Invoke), op.Node)
				c := cur(op.Queue)
				if c.known && op.Offset != c.next {
					if op.Offset > c.next {
						skips++
						r.errorf("%s started at offset %d but %s: offsets %d..%d skipped (poll-skip)",
							where, op.Offset, c.why, c.next, op.Offset-1)
					} else {
						nonmono++
						r.errorf("%s started at offset %d but %s (nonmonotonic-poll)", where, op.Offset, c.why)
					}
				}
				want := op.Offset
				for _, m := range op.Msgs {
					switch {
					case m.Offset > want:
						skips++
						r.errorf("%s from %d returned offset %d where %d was due: offsets %d..%d skipped (int-poll-skip)",
							where, op.Offset, m.Offset, want, want, m.Offset-1)
					case m.Offset < want:
						nonmono++
						r.errorf("%s from %d returned offset %d where %d was due (int-nonmonotonic-poll)",
							where, op.Offset, m.Offset, want)
					}
					want = m.Offset + 1
				}
				if len(op.Msgs) > 0 && op.Next != want {
					nextBad++
					r.errorf("%s from %d returned messages up to offset %d but next %d", where, op.Offset, want-1, op.Next)
				}
				if len(op.Msgs) == 0 && op.Next > op.Offset && final != nil {
					if _, ok := final.At(op.Queue, op.Offset); ok {
						skips++
						r.errorf("%s from %d returned nothing but next %d, although the final log has messages there (poll-skip)",
							where, op.Offset, op.Next)
					}
				}
				c.next, c.known = op.Next, true
				c.why = fmt.Sprintf("the poll at %s said next %d", secs(op.Invoke), op.Next)
			}
		}
	}
	r.set("polls-checked", polls)
	r.set("skips", skips)
	r.set("nonmonotonic", nonmono)
	r.set("next-mismatches", nextBad)

	regressions, unexpected, fetches := checkOffsetDurability(r, run.Ops)
	r.set("fetches-checked", fetches)
	r.set("regressions", regressions)
	r.set("unexpected-offsets", unexpected)
	return r.done()
}

// checkOffsetDurability checks the committed offsets of every (group,
// queue): fetches must not go below an acknowledged commit that completed
// before them, nor return offsets never committed.
func checkOffsetDurability(r *report, ops []history.Op) (regressions, unexpected, fetches int64) {
	type key struct {
		group string
		queue int
	}
	type commit struct {
		offset, complete int64
		op               *history.Op
	}
	okCommits := make(map[key][]commit)
	tried := make(map[key]map[int64]bool)  // ok or info commits
	failed := make(map[key]map[int64]bool) // failed commits
	var fetchOps []*history.Op
	for i := range ops {
		op := &ops[i]
		k := key{op.Group, op.Queue}
		switch op.Kind {
		case history.Commit:
			set := tried
			if op.Outcome == history.Fail {
				set = failed
			}
			if set[k] == nil {
				set[k] = make(map[int64]bool)
			}
			set[k][op.Offset] = true
			if op.Outcome == history.OK {
				okCommits[k] = append(okCommits[k], commit{op.Offset, op.Complete, op})
			}
		case history.Fetch:
			if op.Outcome == history.OK {
				fetchOps = append(fetchOps, op)
			}
		}
	}
	// prefix maxima of acknowledged commits by completion time
	type best struct {
		complete int64
		max      commit
	}
	prefix := make(map[key][]best)
	for k, cs := range okCommits {
		sort.Slice(cs, func(a, b int) bool { return cs[a].complete < cs[b].complete })
		bs := make([]best, len(cs))
		for i, c := range cs {
			m := c
			if i > 0 && bs[i-1].max.offset >= c.offset {
				m = bs[i-1].max
			}
			bs[i] = best{complete: c.complete, max: m}
		}
		prefix[k] = bs
	}
	for _, op := range fetchOps {
		fetches++
		k := key{op.Group, op.Queue}
		bs := prefix[k]
		// acknowledged commits completed strictly before the fetch began
		n := sort.Search(len(bs), func(i int) bool { return bs[i].complete >= op.Invoke })
		if n > 0 {
			m := bs[n-1].max
			if op.Offset < m.offset {
				regressions++
				r.errorf("group %q queue %d: fetch at %s (process %d, node %d) returned %d but commit %d was acknowledged at %s (process %d): offset regression",
					op.Group, op.Queue, secs(op.Invoke), op.Process, op.Node, op.Offset, m.offset, secs(m.complete), m.op.Process)
			}
		}
		if op.Offset != -1 && !tried[k][op.Offset] {
			unexpected++
			if failed[k][op.Offset] {
				r.errorf("group %q queue %d: fetch at %s (process %d) returned %d, which only failed commits carried (unexpected offset)",
					op.Group, op.Queue, secs(op.Invoke), op.Process, op.Offset)
			} else {
				r.errorf("group %q queue %d: fetch at %s (process %d) returned %d, which no process tried to commit (unexpected offset)",
					op.Group, op.Queue, secs(op.Invoke), op.Process, op.Offset)
			}
		}
	}
	return regressions, unexpected, fetches
}
