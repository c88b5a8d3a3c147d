package raftlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Ready whose write finds the disk full stops at that write: nothing
// after it is done (no answer sent, nothing applied) while the loop
// retries with a backoff of 10 ms doubling to 1 s, and a retry once space
// frees goes on from that write.
func TestLoopStallsAndResumes(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	g.quiet()
	require.NoError(t, g.propose(1, "a"))
	g.full[3] = true
	for _, m := range g.outbox() {
		g.core(m.GetTo()).Step(m)
		g.handle(m.GetTo())
	}
	n3 := g.nodes[3]
	require.True(t, n3.stalled())
	require.True(t, n3.loop.busy, "the stalled Ready was given up")
	require.Equal(t, phEntries, n3.loop.phase)
	for _, m := range g.outbox() {
		require.NotEqual(t, uint64(3), m.GetFrom(), "the stalled follower answered: %s", msgString(m))
		g.out = append(g.out, m)
	}
	var waits []time.Duration
	for range 9 {
		waits = append(waits, n3.loop.stallWait())
		g.handle(3) // a retry, still full
		require.True(t, n3.stalled())
	}
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
		160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, time.Second, time.Second}, waits)
	require.Equal(t, 10, n3.loop.stall.tries)

	g.full[3] = false
	g.handle(3)
	require.False(t, n3.stalled())
	require.False(t, n3.loop.busy)
	require.Nil(t, n3.loop.stall)
	answered := false
	for _, m := range g.out {
		answered = answered || (m.GetFrom() == 3 && m.GetTo() == 1)
	}
	require.True(t, answered, "the resumed Ready did not send the answer it held back")
	g.quiet()
	require.Equal(t, g.nodes[1].data, n3.data)
	require.Contains(t, n3.data, g.status(1).Commit)
}
