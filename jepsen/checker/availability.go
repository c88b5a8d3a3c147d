package checker

import (
	"math"

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
	return r.done()
}
