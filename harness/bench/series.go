package bench

import (
	"slices"
	"time"
)

// Interval is one step of a run's timeline.
type Interval struct {
	Start float64 // seconds since the run started
	Msgs  int64   // messages acknowledged (or pulled) in the step
	Rate  float64 // Msgs per second
	// Errors counts sends (or pulls) that failed in the step.
	Errors int64
	// Latency of the sends (pulls) answered in the step, in milliseconds;
	// all zero when none was.
	P50, P99, Max float64
}

// KillWindow is one leader kill of a failover run: when the node was
// killed and when a send was next acknowledged, in seconds since the run
// started.
type KillWindow struct {
	Node          uint64
	At, Recovered float64
}

// maxPoints bounds a timeline's length, so the report stays readable (and
// small) for long runs.
const maxPoints = 200

// step returns the timeline's step for a run of length total: a multiple
// of 100 ms giving at most maxPoints steps.
func step(total time.Duration) time.Duration {
	const unit = 100 * time.Millisecond
	n := (total/maxPoints + unit - 1) / unit
	return max(n, 1) * unit
}

// timeline buckets a run's samples and failures into steps.
func timeline(l *recorder, total time.Duration) []Interval {
	st := step(total)
	n := max(int(total/st), 1) // the last step also takes the remainder
	out := make([]Interval, n)
	lat := make([][]time.Duration, n)
	for i := range out {
		out[i].Start = (time.Duration(i) * st).Seconds()
	}
	at := func(d time.Duration) int { return min(max(int(d/st), 0), n-1) }
	l.mu.Lock()
	for _, s := range l.s {
		i := at(s.at())
		out[i].Msgs += int64(s.msgs)
		lat[i] = append(lat[i], s.d())
	}
	for _, d := range l.failedAt {
		out[at(d)].Errors++
	}
	l.mu.Unlock()
	for i := range out {
		width := st
		if i == n-1 {
			width = total - time.Duration(i)*st // st up to 2 st
		}
		if width > 0 {
			out[i].Rate = float64(out[i].Msgs) / width.Seconds()
		}
		if len(lat[i]) > 0 {
			slices.Sort(lat[i])
			out[i].P50, out[i].P99, out[i].Max = quantile(lat[i], 0.5), quantile(lat[i], 0.99), quantile(lat[i], 1)
		}
	}
	return out
}
