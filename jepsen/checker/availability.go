package checker

import (
	"math"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// checkAvailability checks liveness after the faults healed: at least one
// send must be acknowledged within opts.AvailabilityWindow of Meta.Healed
// (the start of the run if nothing healed). It also reports the fraction
// of sends acknowledged over the whole run, in per mille.
func checkAvailability(run *history.Run, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	healed := max(run.Meta.Healed, 0)
	var sends, okSends, okAfter, attemptedAfter int64
	first := int64(math.MaxInt64)
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.Send || op.Drain {
			continue
		}
		sends++
		if op.Invoke >= healed || op.Complete >= healed {
			attemptedAfter++
		}
		if op.Outcome != history.OK {
			continue
		}
		okSends++
		if op.Complete >= healed {
			okAfter++
			first = min(first, op.Complete)
		}
	}
	r.set("sends", sends)
	r.set("ok-sends-after-heal", okAfter)
	if sends > 0 {
		r.set("ok-permille", okSends*1000/sends)
	}
	if sends == 0 {
		r.notef("no sends in the history")
		return r.done()
	}
	window := int64(opts.AvailabilityWindow)
	if first == math.MaxInt64 {
		r.errorf("no send was acknowledged after the faults healed at %s (%d sends attempted after)", secs(healed), attemptedAfter)
		return r.done()
	}
	r.set("heal-to-first-ok-ms", (first-healed)/1e6)
	if first-healed > window {
		r.errorf("the first send acknowledged after the faults healed at %s completed at %s, %s later (limit %s)",
			secs(healed), secs(first), secs(first-healed), opts.AvailabilityWindow)
	}
	checkHeldUnderHostileClients(run, r)
	checkHeldUnderFullDisk(run, r)
	return r.done()
}

// HostileMemoryBound is how much a node's anonymous memory (heap and
// stacks) may grow while the hostile nemesis holds it: 200 connections
// announcing 16 MiB frames must not make it allocate them. The two
// flooders' unanswered sends alone may hold the node's in-flight budget
// (512 MiB by default, 64 MiB per connection) and the raft pipeline
// behind them; measured peaks were 190-430 MiB.
const HostileMemoryBound = 1 << 30

// hostileStallWindow is the shortest hostile fault in which stalled
// connections must have been closed (the nemesis holds it at least 4 s).
const hostileStallWindow = int64(3500 * time.Millisecond)

// hostileSettle is how long after hostile clients connect the group must
// be acknowledging sends again; a hostile fault shorter than twice this is
// not judged.
const hostileSettle = int64(2 * time.Second)

// checkHeldUnderHostileClients: hostile clients (the "hostile" nemesis) do
// not stop the group. During every such fault, from hostileSettle after it
// began to its end, at least one send is acknowledged if any was attempted.
// The nemesis injects one fault at a time, so nothing else explains a
// stall in that window.
func checkHeldUnderHostileClients(run *history.Run, r *report) {
	for _, ev := range run.Events {
		if ev.Kind != "hostile" || ev.Error != "" {
			continue
		}
		if peak, ok := ev.Measures["rss-anon-peak-bytes"]; ok {
			grew := peak - ev.Measures["rss-anon-before-bytes"]
			r.res.Counts["hostile-rss-growth-max-mib"] = max(r.res.Counts["hostile-rss-growth-max-mib"], grew>>20)
			// A broker in power-loss mode keeps every open file's content
			// in its anonymous memory (the harness's LazyFS overlay, up to
			// a whole index file), so its growth says nothing of the
			// connections: recorded, not judged.
			if grew > HostileMemoryBound && ev.Measures["rss-anon-holds-files"] == 0 {
				r.errorf("hostile clients (%s) grew the node's anonymous memory by %d MiB (bound %d MiB)", ev.Description, grew>>20, HostileMemoryBound>>20)
			}
		}
		// Connections stalled mid-frame are closed by the node's read
		// deadline (2 s in these runs), then redialled: the nemesis holds
		// the fault at least 4 s, so some are closed.
		if n := ev.Measures["stalled-conns"]; n > 0 && ev.End-ev.Start >= hostileStallWindow {
			closed := ev.Measures["stalled-closed-by-node"]
			r.add("hostile-stalled-closed", closed)
			if closed == 0 {
				r.errorf("the node closed none of the %d connections that stalled mid-frame during %s (%s to %s): no read deadline",
					n, ev.Description, secs(ev.Start), secs(ev.End))
			}
		}
		if ev.End-ev.Start < 2*hostileSettle {
			continue
		}
		from := ev.Start + hostileSettle
		attempted, acked := sendsInWindow(run, from, ev.End)
		r.add("hostile-windows", 1)
		r.add("ok-sends-under-hostile-clients", acked)
		if attempted > 0 && acked == 0 {
			r.errorf("no send was acknowledged from %s to %s while hostile clients held %s (%d attempted)",
				secs(from), secs(ev.End), ev.Description, attempted)
		}
	}
}

// sendsInWindow counts the sends (drains aside) that were in flight at
// some time in [from, to] (attempted) and those acknowledged in it.
func sendsInWindow(run *history.Run, from, to int64) (attempted, acked int64) {
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Kind != history.Send || op.Drain || op.Invoke > to || (op.Complete != 0 && op.Complete < from) {
			continue
		}
		attempted++
		if op.Outcome == history.OK && op.Complete >= from && op.Complete <= to {
			acked++
		}
	}
	return attempted, acked
}
