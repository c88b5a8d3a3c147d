//go:build mutant

package raftlog

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/failpoint"
)

// simVoteBudget is how many seeds TestSimCatchesUnsyncedVote may try:
// about 1 seed in 23 ends with two leaders in a term (13 of seeds 1-300;
// 40 of them fail in all, the others by a node refusing to start).
const simVoteBudget = 300

// The simulator catches the product's vote-not-fsynced mutant
// (Storage.Failpoints): with the power cut 1 ms after every vote a node
// grants (all unsynced writes lost) and a checkpoint syncing each node's
// file system every simCheckpointMs, a node comes back without the vote it
// gave, votes again in the same term, and the simulator's safety check
// sees two leaders in one term. Seeds may fail first by a node refusing to
// start because its raft state lost writes its log depends on (the
// Storage's own guard); any other failure is not the mutant's. The correct
// Storage passes the same seeds.
func TestSimCatchesUnsyncedVote(t *testing.T) {
	refused := 0
	for seed := uint64(1); seed <= simVoteBudget; seed++ {
		out := runSeed(t, seed, simHooks{powerCutAfterVote: true, failpoints: failpoint.Of(failpoint.VoteNotFsynced)}, false)
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
