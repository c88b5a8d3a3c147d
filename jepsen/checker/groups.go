package checker

import (
	"slices"
	"sort"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// ConsumerGroupChecker judges the group workload's push consumers.
const ConsumerGroupChecker = "consumer-group"

// LockGrace is how long after a fault the consumer-group checker forgives
// two members of an orderly group consuming one queue at once: a node that
// becomes leader starts with no queue locks, and a member keeps consuming a
// queue for up to its lock's maximum age (the client's 30 s by default)
// without renewing it.
const LockGrace = 35 * time.Second

// checkConsumerGroups checks, for every consumer group of the run:
//
//   - at-least-once: every acknowledged send was delivered to the group;
//   - orderly groups: each callback's messages are consecutive offsets of
//     one queue, a queue is never delivered past a gap, two members never
//     run callbacks of one queue at the same time, and a message delivered
//     to one member is not delivered again to another (a clean handover
//     starts where the old owner stopped), except within LockGrace of a
//     fault (see locks: not across leader changes);
//   - committed offsets (history.GroupOffset reads) never move backwards;
//   - member lists: a node that has been up since a member joined (no
//     kill, power loss, corruption or membership change of that node, and
//     no network or process fault anywhere since) lists that member until
//     it leaves.
func checkConsumerGroups(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	var delivers, joins, leaves, members, offs []*history.Op
	acked := map[string]*history.Op{}
	for i := range run.Ops {
		op := &run.Ops[i]
		switch op.Kind {
		case history.Send:
			if op.Outcome == history.OK && !op.Drain {
				acked[op.Value] = op
			}
		case history.Deliver:
			delivers = append(delivers, op)
		case history.Join:
			joins = append(joins, op)
		case history.Leave:
			leaves = append(leaves, op)
		case history.Members:
			members = append(members, op)
		case history.GroupOffset:
			offs = append(offs, op)
		}
	}
	if len(joins) == 0 {
		r.notef("no consumer groups in this run")
		return r.done()
	}
	groups := map[string]bool{}
	orderly := map[string]bool{}
	for _, op := range joins {
		groups[op.Group] = true
		orderly[op.Group] = orderly[op.Group] || op.Orderly
	}
	r.set("groups", int64(len(groups)))
	r.set("deliveries", int64(len(delivers)))
	r.set("members-joined", int64(len(joins)))

	// At least once.
	seen := map[string]map[string]bool{}
	for _, op := range delivers {
		if seen[op.Group] == nil {
			seen[op.Group] = map[string]bool{}
		}
		for _, m := range op.Msgs {
			seen[op.Group][m.Value] = true
		}
	}
	var lost int64
	for _, g := range sortedKeys(groups) {
		vals := make([]string, 0, len(acked))
		for v := range acked {
			if !seen[g][v] {
				vals = append(vals, v)
			}
		}
		sort.Strings(vals)
		for _, v := range vals {
			lost++
			s := acked[v]
			r.errorf("group %q: acknowledged send %s (queue %d offset %d, acked at %s) was never delivered (lost)", g, v, s.Queue, s.Offset, secs(s.Complete))
		}
	}
	r.set("lost", lost)

	checkOrderly(r, delivers, orderly, run.Events)
	checkGroupOffsets(r, offs)
	checkMemberLists(r, joins, leaves, members, run.Events)
	return r.done()
}

// checkOrderly checks the orderly groups' deliveries queue by queue.
func checkOrderly(r *report, delivers []*history.Op, orderly map[string]bool, events []history.Event) {
	type key struct {
		group string
		queue int
	}
	byQueue := map[key][]*history.Op{}
	for _, op := range delivers {
		if orderly[op.Group] {
			k := key{op.Group, op.Queue}
			byQueue[k] = append(byQueue[k], op)
		}
	}
	var gaps, broken, overlaps, handovers, forgiven int64
	keys := make([]key, 0, len(byQueue))
	for k := range byQueue {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].queue < keys[j].queue
	})
	for _, k := range keys {
		ops := byQueue[k]
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
		high := int64(-1)
		firstBy := map[int64]int{} // offset -> process first delivered it
		for i, op := range ops {
			for j := 1; j < len(op.Msgs); j++ {
				if op.Msgs[j].Offset != op.Msgs[j-1].Offset+1 {
					broken++
					r.errorf("group %q queue %d: callback at %s (process %d) got offsets %d then %d: not in queue order",
						k.group, k.queue, secs(op.Invoke), op.Process, op.Msgs[j-1].Offset, op.Msgs[j].Offset)
					break
				}
			}
			// A queue handed over cleanly starts where its old owner
			// stopped: the new owner gets its lock only after the old one
			// persisted its offset and unlocked. A message of the queue
			// delivered again to another member means the new owner began
			// while the old one still held the queue.
			for _, m := range op.Msgs {
				if m.Offset > high {
					break
				}
				if prev, ok := firstBy[m.Offset]; ok && prev != op.Process {
					if nearFault(events, op.Invoke, LockGrace) {
						forgiven++
					} else {
						handovers++
						r.errorf("group %q queue %d: offset %d delivered to process %d at %s after process %d had it: the queue had two owners",
							k.group, k.queue, m.Offset, op.Process, secs(op.Invoke), prev)
					}
					break
				}
			}
			for _, m := range op.Msgs {
				if _, ok := firstBy[m.Offset]; !ok {
					firstBy[m.Offset] = op.Process
				}
			}
			if len(op.Msgs) > 0 {
				if first := op.Msgs[0].Offset; first > high+1 {
					gaps++
					r.errorf("group %q queue %d: callback at %s (process %d) started at offset %d, but only offsets up to %d had been delivered: out of order",
						k.group, k.queue, secs(op.Invoke), op.Process, first, high)
				}
				high = max(high, op.Msgs[len(op.Msgs)-1].Offset)
			}
			// Two members inside callbacks of the queue at once.
			for _, prev := range ops[:i] {
				if prev.Process == op.Process || prev.Complete <= op.Invoke {
					continue
				}
				if nearFault(events, op.Invoke, LockGrace) {
					forgiven++
					continue
				}
				overlaps++
				r.errorf("group %q queue %d: processes %d (%s-%s) and %d (%s-%s) consumed the queue at the same time: two lock holders",
					k.group, k.queue, prev.Process, secs(prev.Invoke), secs(prev.Complete), op.Process, secs(op.Invoke), secs(op.Complete))
			}
		}
	}
	r.set("orderly-gaps", gaps)
	r.set("orderly-unordered", broken)
	r.set("two-owners", overlaps)
	r.set("handover-redeliveries", handovers)
	if forgiven > 0 {
		r.set("two-owners-near-faults", forgiven)
	}
}

// nearFault reports whether t is within grace after (or during) a fault.
// The harness's closing "heal" event is not a fault (each fault's own
// event says when it ended): counted as one, it forgave every two-owner
// handover in the last LockGrace of a run, even one with no fault at all,
// and let the lock-two-owners mutant escape in 4 seeds of 10.
func nearFault(events []history.Event, t int64, grace time.Duration) bool {
	for _, e := range events {
		if e.Kind == "heal" {
			continue
		}
		end := e.End
		if end == 0 {
			end = t // still active when the run stopped
		}
		if e.Start <= t && t <= end+int64(grace) {
			return true
		}
	}
	return false
}

// checkGroupOffsets checks that a group's committed offset of a queue, as
// read, never went backwards: a read that began after another completed
// returns at least what that one did.
func checkGroupOffsets(r *report, offs []*history.Op) {
	type key struct {
		group string
		queue int
	}
	byQueue := map[key][]*history.Op{}
	for _, op := range offs {
		if op.Outcome == history.OK {
			k := key{op.Group, op.Queue}
			byQueue[k] = append(byQueue[k], op)
		}
	}
	var back int64
	for k, ops := range byQueue {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Complete < ops[j].Complete })
		// best: the highest offset read by a read completed before the
		// current one began.
		best, bestOp := int64(-1), (*history.Op)(nil)
		done := 0
		byInvoke := slices.Clone(ops)
		sort.SliceStable(byInvoke, func(i, j int) bool { return byInvoke[i].Invoke < byInvoke[j].Invoke })
		for _, op := range byInvoke {
			for done < len(ops) && ops[done].Complete < op.Invoke {
				if ops[done].Offset > best {
					best, bestOp = ops[done].Offset, ops[done]
				}
				done++
			}
			if op.Offset < best {
				back++
				r.errorf("group %q queue %d: committed offset read %d at %s, after %d was read at %s: it moved backwards",
					k.group, k.queue, op.Offset, secs(op.Invoke), best, secs(bestOp.Complete))
			}
		}
	}
	r.set("offset-regressions", back)
}

// checkMemberLists checks every node's member lists against the members
// that had joined and not left.
func checkMemberLists(r *report, joins, leaves, lists []*history.Op, events []history.Event) {
	left := map[string]int64{} // client id -> when its leave began
	for _, op := range leaves {
		left[op.Value] = op.Invoke
	}
	var missing, judged int64
	for _, l := range lists {
		if l.Outcome != history.OK {
			continue
		}
		listed := map[string]bool{}
		for _, m := range l.Msgs {
			listed[m.Value] = true
		}
		for _, j := range joins {
			if j.Group != l.Group || j.Outcome != history.OK || j.Complete >= l.Invoke {
				continue
			}
			if t, ok := left[j.Value]; ok && t <= l.Complete {
				continue
			}
			if faultSince(events, l.Node, j.Invoke, l.Complete) {
				continue
			}
			judged++
			if !listed[j.Value] {
				missing++
				r.errorf("group %q: node %d's member list at %s lacks %s, which joined at %s and had not left: the node lost its heartbeat",
					l.Group, l.Node, secs(l.Invoke), j.Value, secs(j.Complete))
			}
		}
	}
	r.set("member-checks", judged)
	r.set("members-missing", missing)
}

// faultSince reports whether a fault could have made node miss a heartbeat
// or lose its member table between from and to: a restart of node (kill,
// power loss, corruption, membership change) or any network or process
// fault (partitions, pauses, delays, resets, clock changes) anywhere.
func faultSince(events []history.Event, node int, from, to int64) bool {
	for _, e := range events {
		end := e.End
		if end == 0 {
			end = to
		}
		if e.Start > to || end < from {
			continue
		}
		switch e.Kind {
		case "kill", "kill-leader", "power-loss", "corrupt", "bitflip", "membership":
			if len(e.Nodes) == 0 || slices.Contains(e.Nodes, node) {
				return true
			}
		default:
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
