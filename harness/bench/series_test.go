package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStep(t *testing.T) {
	for total, want := range map[time.Duration]time.Duration{
		time.Second:      100 * time.Millisecond,
		10 * time.Second: 100 * time.Millisecond,
		25 * time.Second: 200 * time.Millisecond,
		60 * time.Second: 300 * time.Millisecond,
	} {
		require.Equal(t, want, step(total), "step(%v)", total)
	}
	require.Equal(t, uint32(0), micros(-time.Second))
	require.Equal(t, uint32(1500), micros(1500*time.Microsecond))
	require.Equal(t, uint32(math.MaxUint32), micros(100*time.Hour), "saturates")
}

// timeline puts each answer and failure in its step, rates count the
// messages of a step over its width (the last step takes the remainder),
// and steps without answers have no latency.
func TestTimeline(t *testing.T) {
	ms := time.Millisecond
	l := &recorder{failedAt: []time.Duration{120 * ms, 130 * ms}}
	for _, s := range []struct {
		at, d time.Duration
		msgs  int
	}{
		{50 * ms, 1 * ms, 1},
		{60 * ms, 3 * ms, 2},
		{950 * ms, 10 * ms, 32},
		{1040 * ms, 20 * ms, 32}, // past the last step's start: the last step
	} {
		l.s = append(l.s, sample{atUS: micros(s.at), dUS: micros(s.d), msgs: uint32(s.msgs)})
	}
	got := timeline(l, 1050*ms)
	require.Len(t, got, 10)
	require.Equal(t, Interval{Start: 0, Msgs: 3, Rate: 30, P50: 1, P99: 1, Max: 3}, got[0])
	require.Equal(t, Interval{Start: 0.1, Errors: 2}, got[1])
	for i := 2; i < 9; i++ {
		require.Zero(t, got[i].Msgs+got[i].Errors, "step %d", i)
		require.Zero(t, got[i].P50, "step %d", i)
	}
	last := got[9]
	require.InDelta(t, 0.9, last.Start, 1e-9)
	require.Equal(t, int64(64), last.Msgs)
	require.InDelta(t, 64/0.15, last.Rate, 1e-6, "the last step is 150 ms wide")
	require.Equal(t, 10.0, last.P50)
	require.Equal(t, 20.0, last.Max)
}

// The report holds both charts inline, escapes what it is given, shades
// every kill on both charts and lists the kills.
func TestWriteHTML(t *testing.T) {
	series := []Interval{
		{Start: 0, Msgs: 100, Rate: 1000, P50: 1, P99: 2, Max: 3},
		{Start: 0.1, Msgs: 0},
		{Start: 0.2, Msgs: 50, Rate: 500, Errors: 1, P50: 2, P99: 400, Max: 600},
		{Start: 0.3, Msgs: 100, Rate: 1000, P50: 1, P99: 2, Max: 3},
	}
	kills := []KillWindow{{Node: 2, At: 0.05, Recovered: 0.25}, {Node: 3, At: 0.31, Recovered: 0.35}}
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, "bench <b>", "summary & more", "send", series, kills))
	doc := b.String()
	require.Equal(t, 2, strings.Count(doc, "<svg"))
	require.NotContains(t, doc, "<?xml")
	require.Contains(t, doc, "<title>bench &lt;b&gt;</title>")
	require.Contains(t, doc, "summary &amp; more")
	require.Equal(t, 2*len(kills), strings.Count(doc, "fill-opacity:0.25"), "each kill shaded on both charts")
	require.Contains(t, doc, "<tr><td>1</td><td>n2</td><td>0.05</td><td>200</td></tr>")
	require.Contains(t, doc, "<tr><td>2</td><td>n3</td><td>0.31</td><td>40</td></tr>")
	require.Contains(t, doc, "failed sends per step")

	b.Reset()
	require.NoError(t, WriteHTML(&b, "t", "s", "pull", series[:1], nil))
	require.NotContains(t, b.String(), "fill-opacity:0.25", "no kills, no bands")
	require.NotContains(t, b.String(), "<table>")
}

// A run without latency samples (a push consume run) gets its throughput
// chart and a note instead of a latency chart.
func TestWriteHTMLWithoutLatency(t *testing.T) {
	series := []Interval{{Start: 0, Msgs: 100, Rate: 1000}, {Start: 0.1, Msgs: 50, Rate: 500}}
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, "t", "s", "push consumer pull", series, nil))
	require.Equal(t, 1, strings.Count(b.String(), "<svg"))
	require.Contains(t, b.String(), "No latency recorded")
}
