package checker

import (
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// PopChecker judges the pop workload's SimpleConsumers.
const PopChecker = "pop"

// PopSlack is how much earlier than its invisible time allows a message
// may be seen delivered again before the pop checker calls it an early
// delivery: the broker's wall clock and the harness's monotonic clock
// may drift apart a little.
const PopSlack = 100 * time.Millisecond

// popKey names a message of a group: its queue and offset.
type popKey struct {
	group  string
	queue  int
	offset int64
}

// checkPop is the pop checker. With the history's PopSend, PopDeliver,
// PopAck and PopChange ops and the drains of the topic and of each
// group's dead-letter topic it checks, for every consumer group:
//
//   - lost: an acknowledged send is in the topic's final log;
//   - never-acked: every acknowledged send was acked by the group (an ack
//     answered ok, or indeterminate), or is in its dead-letter topic;
//   - held twice: a message delivered while an earlier delivery of it
//     still held it — before that delivery's invocation plus its
//     invisible time, or plus the time of an ok change of invisible time
//     (from the change's invocation), minus PopSlack. When a fault
//     (leader change, clock change, pause, ...) overlaps the two
//     deliveries it is counted as explained (held-twice-explained);
//     otherwise it is an error (held-twice);
//   - acked-redelivered: a message delivered again after an ok ack of an
//     earlier delivery completed; no fault excuses it (acks are
//     replicated);
//   - orderly groups (fifo-skip): a batch that hands out offset n of a
//     queue while an acknowledged send at an offset m < n of that queue
//     had no ack (ok or indeterminate) invoked before the batch completed
//     and is not dead-lettered; and, within a batch, a queue's offsets
//     ascend (fifo-unordered);
//   - unexpected: nothing is delivered that was never sent or whose sends
//     all failed.
func checkPop(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	type sendSum struct {
		outcomes
		queue  int
		offset int64
	}
	sends := map[string]*sendSum{}
	var topic string
	delivers := map[string]*history.Op{}
	byKey := map[popKey][]*history.Op{}
	acks := map[string][]*history.Op{}
	changes := map[string][]*history.Op{}
	groups := map[string]bool{} // group -> orderly
	batchOps := map[string][]*history.Op{}
	var batchOrder []string
	for i := range run.Ops {
		op := &run.Ops[i]
		switch op.Kind {
		case history.PopSend:
			topic = op.Topic
			s := sends[op.Value]
			if s == nil {
				s = &sendSum{queue: op.Queue, offset: -1}
				sends[op.Value] = s
			}
			s.add(op.Outcome)
			if op.Outcome == history.OK {
				s.queue, s.offset = op.Queue, op.Offset
			}
		case history.PopDeliver:
			delivers[op.Handle] = op
			b := batchOf(op.Handle)
			if batchOps[b] == nil {
				batchOrder = append(batchOrder, b)
			}
			batchOps[b] = append(batchOps[b], op)
			k := popKey{op.Group, op.Queue, op.Offset}
			byKey[k] = append(byKey[k], op)
			groups[op.Group] = groups[op.Group] || op.Orderly
		case history.PopJoin:
			groups[op.Group] = groups[op.Group] || op.Orderly
		case history.PopAck:
			acks[op.Handle] = append(acks[op.Handle], op)
		case history.PopChange:
			changes[op.Handle] = append(changes[op.Handle], op)
		}
	}
	if len(sends) == 0 {
		r.notef("no pop sends in this run")
		return r.done()
	}
	r.set("values", int64(len(sends)))
	r.set("deliveries", int64(len(delivers)))
	final, okFinal := topicFinalLog(r, run, topic, run.Meta.Queues, opts)
	dlqs := map[string]*FinalLog{}
	for _, g := range sortedValues(groups) {
		if d, ok := topicFinalLog(r, run, "%DLQ%"+g, 1, opts); ok {
			dlqs[g] = d
			r.add("dead-letters", d.Size())
		}
	}

	// acked[group][value]: an ack answered ok or indeterminate; firstAck
	// is the earliest invocation of such an ack per group and message.
	ackedBy := map[string]map[string]bool{}
	firstAck := map[popKey]int64{}
	for h, as := range acks {
		d := delivers[h]
		if d == nil {
			continue
		}
		k := popKey{d.Group, d.Queue, d.Offset}
		for _, a := range as {
			if a.Outcome == history.Fail {
				continue
			}
			if ackedBy[d.Group] == nil {
				ackedBy[d.Group] = map[string]bool{}
			}
			ackedBy[d.Group][d.Value] = true
			if t, ok := firstAck[k]; !ok || a.Invoke < t {
				firstAck[k] = a.Invoke
			}
		}
	}

	var lost, never, unexpected int64
	for _, v := range sortedValues(sends) {
		s := sends[v]
		if okFinal && s.ok > 0 && len(final.Locations(v)) == 0 {
			lost++
			r.errorf("%s: acknowledged send %s is not in the final log (lost)", topic, v)
		}
		if s.ok == 0 {
			continue
		}
		for _, g := range sortedValues(groups) {
			if ackedBy[g][v] || (dlqs[g] != nil && len(dlqs[g].Locations(v)) > 0) {
				continue
			}
			never++
			r.errorf("group %q: acknowledged send %s (queue %d offset %d) was never acked (deliveries: %s)",
				g, v, s.queue, s.offset, formatPopDelivers(byKey[popKey{g, s.queue, s.offset}]))
		}
	}
	for _, h := range sortedValues(delivers) {
		d := delivers[h]
		if s := sends[d.Value]; s == nil || s.ok+s.info == 0 {
			unexpected++
			r.errorf("group %q: %s delivered at %s was never sent, or only by failed sends (unexpected)", d.Group, d.Value, secs(d.Invoke))
		}
	}

	// Deliveries of one message, in order of invocation.
	var twice, explained, redelivered, pairs int64
	keys := make([]popKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.queue != b.queue {
			return a.queue < b.queue
		}
		return a.offset < b.offset
	})
	for _, k := range keys {
		ds := byKey[k]
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].Invoke < ds[j].Invoke })
		for j := 1; j < len(ds); j++ {
			d2 := ds[j]
			for _, d1 := range ds[:j] {
				pairs++
				for _, a := range acks[d1.Handle] {
					if a.Outcome == history.OK && a.Complete < d2.Invoke {
						redelivered++
						r.errorf("group %q: queue %d offset %d (%s) was acked at %s (delivery %s) and delivered again at %s (%s)",
							k.group, k.queue, k.offset, d2.Value, secs(a.Complete), d1.Handle, secs(d2.Invoke), d2.Handle)
						break
					}
				}
				hold := holdUntil(d1, changes[d1.Handle])
				if d2.Complete >= hold-int64(PopSlack) {
					continue
				}
				if faultBetween(run.Events, d1.Invoke, d2.Complete) {
					explained++
					continue
				}
				twice++
				r.errorf("group %q: queue %d offset %d (%s) delivered at %s-%s (%s) while delivery %s at %s held it until %s",
					k.group, k.queue, k.offset, d2.Value, secs(d2.Invoke), secs(d2.Complete), d2.Handle, d1.Handle, secs(d1.Invoke), secs(hold))
			}
		}
	}

	// Orderly groups: batches in queue order.
	var skips, unordered, batches int64
	sendsByQueue := map[int][]int64{} // queue -> offsets of acknowledged sends
	valueAt := map[int]map[int64]string{}
	for v, s := range sends {
		if s.ok > 0 && s.offset >= 0 {
			sendsByQueue[s.queue] = append(sendsByQueue[s.queue], s.offset)
			if valueAt[s.queue] == nil {
				valueAt[s.queue] = map[int64]string{}
			}
			valueAt[s.queue][s.offset] = v
		}
	}
	for _, offs := range sendsByQueue {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	}
	// A batch's lowest offset of each queue, checked in batch order.
	var orderly []string // batches of orderly groups, in order of appearance
	lowest := map[string]map[int]*history.Op{}
	for _, b := range batchOrder {
		var last map[int]int64
		for _, d := range batchOps[b] {
			if !groups[d.Group] {
				break
			}
			if last == nil {
				last = map[int]int64{}
				lowest[b] = map[int]*history.Op{}
				orderly = append(orderly, b)
			}
			if l, ok := last[d.Queue]; ok && d.Offset <= l {
				unordered++
				r.errorf("group %q: batch %s hands out queue %d offset %d after offset %d (fifo-unordered)", d.Group, b, d.Queue, d.Offset, l)
			}
			last[d.Queue] = d.Offset
			if f := lowest[b][d.Queue]; f == nil || d.Offset < f.Offset {
				lowest[b][d.Queue] = d
			}
		}
	}
	for _, b := range orderly {
		for _, q := range sortedQueues(lowest[b]) {
			d := lowest[b][q]
			batches++
			dlq := dlqs[d.Group]
			for _, m := range sendsByQueue[d.Queue] {
				if m >= d.Offset {
					break
				}
				if t, ok := firstAck[popKey{d.Group, d.Queue, m}]; ok && t < d.Complete {
					continue
				}
				v := valueAt[d.Queue][m]
				if dlq != nil && len(dlq.Locations(v)) > 0 {
					continue
				}
				skips++
				r.errorf("group %q (orderly): batch %s at %s hands out queue %d offset %d while offset %d (%s) was not acked (fifo-skip)",
					d.Group, b, secs(d.Invoke), d.Queue, d.Offset, m, v)
				break
			}
		}
	}
	r.set("redelivery-pairs", pairs)
	r.set("lost", lost)
	r.set("never-acked", never)
	r.set("unexpected", unexpected)
	r.set("held-twice", twice)
	r.set("held-twice-explained", explained)
	r.set("acked-redelivered", redelivered)
	r.set("orderly-batches", batches)
	r.set("fifo-skip", skips)
	r.set("fifo-unordered", unordered)
	return r.done()
}

// holdUntil is until when (run time, ns) delivery d surely hid its
// message: its invocation plus its invisible time, or an ok change's
// invocation plus the change's time if later.
func holdUntil(d *history.Op, changes []*history.Op) int64 {
	hold := d.Invoke + d.InvisibleMs*int64(time.Millisecond)
	for _, c := range changes {
		if c.Outcome == history.OK {
			hold = max(hold, c.Invoke+c.InvisibleMs*int64(time.Millisecond))
		}
	}
	return hold
}

// faultBetween reports whether a fault was active at some time in
// [from, to].
func faultBetween(events []history.Event, from, to int64) bool {
	for _, e := range events {
		if e.Kind == "heal" {
			continue
		}
		end := e.End
		if end == 0 {
			end = to
		}
		if e.Start <= to && end >= from {
			return true
		}
	}
	return false
}

func formatPopDelivers(ds []*history.Op) string {
	if len(ds) == 0 {
		return "none"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Handle + " at " + secs(d.Invoke)
	}
	return strings.Join(parts, ", ")
}

// batchOf is the batch part of a delivery's handle ("<batch>/<i>").
func batchOf(handle string) string {
	if i := strings.LastIndexByte(handle, '/'); i >= 0 {
		return handle[:i]
	}
	return handle
}

func sortedQueues(m map[int]*history.Op) []int {
	out := make([]int, 0, len(m))
	for q := range m {
		out = append(out, q)
	}
	sort.Ints(out)
	return out
}
