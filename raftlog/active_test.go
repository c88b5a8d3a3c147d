package raftlog

import (
	"slices"
	"testing"
)

// A leader's Status.Active keeps a follower that answers every heartbeat
// at every tick, including the tick at which CheckQuorum clears raft's
// RecentActive flags (before the answers to that tick's heartbeats are
// in), and drops a follower not heard from for an election timeout.
func TestActiveSurvivesCheckQuorumReset(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	want := []uint64{1, 2, 3}
	for tick := range 3 * 10 {
		// One tick of the leader, and its status before the followers'
		// answers to what the tick sent are delivered.
		g.tick(1, 1)
		if got := g.status(1).Active; !slices.Equal(got, want) {
			t.Fatalf("tick %d: active %v, want %v", tick+1, got, want)
		}
		g.quiet()
	}
	g.cut[3] = true
	for range 10 + 1 {
		g.tick(1, 1)
		g.quiet()
	}
	if got := g.status(1).Active; !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("node 3 cut for an election timeout: active %v, want [1 2]", got)
	}
}
