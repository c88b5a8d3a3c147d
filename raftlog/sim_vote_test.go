package raftlog

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/mutant"
)

// simVoteBudget is how many seeds TestSimCatchesUnsyncedVote may try:
// about 1 seed in 23 ends with two leaders in a term (13 of seeds 1-300;
// 45 of them fail in all, the others by a node refusing to start).
const simVoteBudget = 300

// The simulator catches the product's vote-not-fsynced mutant
// (Storage.UnsafeNoSync): with the power cut 1 ms after every vote a node
// grants (all unsynced writes lost) and a checkpoint syncing each node's
// file system every simCheckpointMs, a node comes back without the vote it
// gave, votes again in the same term, and the simulator's safety check
// sees two leaders in one term. Seeds may fail first by a node refusing to
// start because its raft state lost writes its log depends on (the
// Storage's own guard); any other failure is not the mutant's. The correct
// Storage passes the same seeds.
func TestSimCatchesUnsyncedVote(t *testing.T) {
	if !mutant.Enabled {
		t.Skip("Storage.UnsafeNoSync takes effect only in a build with -tags mutant")
	}
	refused := 0
	for seed := uint64(1); seed <= simVoteBudget; seed++ {
		out := runSeed(t, seed, simHooks{powerCutAfterVote: true, unsyncedState: true}, false)
		if out.err == nil {
			continue
		}
		msg := out.err.Error()
		if !strings.Contains(msg, "two leaders in term") {
			if !strings.Contains(msg, "lost synced writes") && !strings.Contains(msg, "the state file's compaction point") {
				t.Fatalf("seed %d failed, but not by lost raft state: %v", seed, out.err)
			}
			refused++
			continue
		}
		t.Logf("seed %d caught the vote-not-fsynced mutant: %v (%d earlier seeds failed by a node refusing to start)", seed, out.err, refused)
		for s := uint64(1); s <= seed; s++ {
			if out := runSeed(t, s, simHooks{powerCutAfterVote: true}, false); out.err != nil {
				t.Fatalf("seed %d: the correct storage failed under the same power cuts: %v", s, out.err)
			}
		}
		t.Logf("the correct storage passed seeds 1-%d", seed)
		return
	}
	t.Fatalf("no seed among %d made two leaders in a term with the vote-not-fsynced mutant (%d failed by a refusal to start)", simVoteBudget, refused)
}

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
