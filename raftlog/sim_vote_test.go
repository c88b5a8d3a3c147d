package raftlog

import "testing"

// The correct Storage survives power cuts aimed at every vote it grants
// (the schedule TestSimCatchesUnsyncedVote uses), in any build.
func TestSimPowerCutAfterVote(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 10
	}
	var crashes, elections int
	for seed := uint64(1); seed <= seeds; seed++ {
		out := runSeed(t, seed, simHooks{powerCutAfterVote: true}, false)
		if out.err != nil {
			t.Fatalf("seed %d: %v", seed, out.err)
		}
		crashes += out.s.crashes
		elections += out.s.elections
	}
	t.Logf("%d seeds: %d power cuts, %d elections", seeds, crashes, elections)
	if crashes == 0 || elections == 0 {
		t.Fatal("no power cut or no election: the schedule does not exercise votes")
	}
}
