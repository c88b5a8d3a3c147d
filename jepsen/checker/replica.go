package checker

import (
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// checkReplicaAgreement compares the nodes' raft logs (as etcd's
// mergeMembersEntries does): up to the lowest commit index any node
// reported, entries at one index must have the same term and checksum on
// every node, and every node must hold every index from the highest first
// index to that commit index. A node whose log could not be read
// completely (Problem) is a violation too. Entries above the commit index
// may differ (uncommitted tails).
func checkReplicaAgreement(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	reps := append([]history.Replica(nil), run.Replicas...)
	sort.SliceStable(reps, func(a, b int) bool { return reps[a].Node < reps[b].Node })
	r.set("replicas", int64(len(reps)))
	if len(reps) == 0 {
		r.notef("no replica logs recorded")
		return r.done()
	}
	if len(reps) < 2 {
		r.notef("only %d replica log: nothing to compare", len(reps))
	}

	// per replica: index → entry, checking the log's own order
	logs := make([]map[uint64]history.Entry, len(reps))
	var minCommit uint64
	haveCommit := false
	var lo uint64 = 1
	for i, rep := range reps {
		if rep.Problem != "" {
			r.errorf("node %d log: %s", rep.Node, rep.Problem)
		}
		m := make(map[uint64]history.Entry, len(rep.Entries))
		var prev uint64
		for j, e := range rep.Entries {
			if j > 0 && e.Index <= prev {
				r.errorf("node %d log: index %d follows index %d (indexes must increase)", rep.Node, e.Index, prev)
			}
			prev = e.Index
			if old, dup := m[e.Index]; dup && old != e {
				continue // reported above as an order violation
			}
			m[e.Index] = e
		}
		logs[i] = m
		if rep.Commit > 0 {
			if !haveCommit || rep.Commit < minCommit {
				minCommit = rep.Commit
			}
			haveCommit = true
		}
		first := rep.First
		if first == 0 && len(rep.Entries) > 0 {
			first = rep.Entries[0].Index
		}
		lo = max(lo, first)
	}
	if !haveCommit {
		r.notef("no node reported a commit index: nothing compared")
		return r.done()
	}
	r.set("min-commit", int64(minCommit))
	r.set("first-compared", int64(lo))

	var compared, mismatches, holes int64
	hi := minCommit
	var last uint64
	for _, rep := range reps {
		for _, e := range rep.Entries {
			last = max(last, e.Index)
		}
	}
	if hi > last && hi >= lo {
		// no node holds anything there: one error, not one per index
		holes += int64(hi-max(last, lo-1)) * int64(len(reps))
		r.errorf("no node has entries %d..%d, below the commit index %d (hole)", max(last+1, lo), hi, minCommit)
		hi = last
	}
	for idx := lo; idx <= hi; idx++ {
		ref := -1
		for i := range reps {
			e, ok := logs[i][idx]
			if !ok {
				holes++
				r.errorf("node %d log: no entry at index %d, below the commit index %d (hole)", reps[i].Node, idx, minCommit)
				continue
			}
			if ref < 0 {
				ref = i
				continue
			}
			re := logs[ref][idx]
			if e.Term != re.Term || e.Sum != re.Sum {
				mismatches++
				r.errorf("index %d: node %d has term %d sum %08x but node %d has term %d sum %08x (mismatching committed entries)",
					idx, reps[ref].Node, re.Term, re.Sum, reps[i].Node, e.Term, e.Sum)
			}
		}
		compared++
	}
	r.set("indexes-compared", compared)
	r.set("mismatches", mismatches)
	r.set("holes", holes)
	if lo > minCommit {
		r.notef("nothing to compare: the logs start at %d, after the commit index %d", lo, minCommit)
	}
	return r.done()
}
